// Errors a user can cause (a bad checkpoint, a bad flag, a bad request).
//
// flint has two tiers of failure:
//  - flint::Error (this file): thrown for anything that comes from outside the process.
//    The message names the file, tensor, field or flag involved. Commands catch it at the
//    top and exit non-zero; the server turns it into an HTTP error. It never aborts.
//  - FLINT_CHECK (check.h): a broken invariant of flint itself; aborts with file:line.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace flint {

class Error : public std::runtime_error {
 public:
  explicit Error(std::string message) : std::runtime_error(std::move(message)) {}

  template <typename... Args>
  explicit Error(fmt::format_string<Args...> format, Args&&... args)
      : std::runtime_error(fmt::format(format, std::forward<Args>(args)...)) {}
};

}  // namespace flint
