// Invariant checks: for conditions that can only fail through a bug in flint.
// Anything a user can cause must throw flint::Error instead (see error.h).
#pragma once

#include <fmt/format.h>

namespace flint::detail {
[[noreturn]] void check_failed(const char* file, int line, const char* condition,
                               const std::string& message);
}  // namespace flint::detail

// FLINT_CHECK(cond) or FLINT_CHECK(cond, "format {}", args...): aborts with file:line.
#define FLINT_CHECK(cond, ...)                                                    \
  do {                                                                            \
    if (!(cond)) [[unlikely]] {                                                   \
      ::flint::detail::check_failed(__FILE__, __LINE__, #cond,                    \
                                    ::flint::detail::check_message(__VA_ARGS__)); \
    }                                                                             \
  } while (0)

#ifdef NDEBUG
#define FLINT_DCHECK(cond, ...) \
  do {                          \
  } while (0)
#else
#define FLINT_DCHECK(cond, ...) FLINT_CHECK(cond, __VA_ARGS__)
#endif

namespace flint::detail {
inline std::string check_message() { return {}; }
template <typename... Args>
std::string check_message(fmt::format_string<Args...> format, Args&&... args) {
  return fmt::format(format, std::forward<Args>(args)...);
}
}  // namespace flint::detail
