#include "base/check.h"

#include <cstdio>
#include <cstdlib>

namespace flint::detail {

void check_failed(const char* file, int line, const char* condition, const std::string& message) {
  std::fflush(stdout);
  std::fprintf(stderr, "flint: internal error at %s:%d: check failed: %s%s%s\n", file, line,
               condition, message.empty() ? "" : ": ", message.c_str());
  std::fprintf(stderr, "flint: this is a bug in flint; please report it with the command line.\n");
  std::fflush(stderr);
  std::abort();
}

}  // namespace flint::detail
