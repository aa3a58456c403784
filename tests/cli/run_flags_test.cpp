// The run commands' shared flags: --matmul-kernels picks a matmul variant by name.
#include "cli/run_flags.h"

#include <gtest/gtest.h>

#include <string>

#include "kernels/matmul.h"

namespace flint::cli {
namespace {

TEST(RunFlags, MatmulKernelsPicksAVariantByName) {
  RunFlags flags;
  flags.log_level = "warning";
  for (std::string_view isa : kernels::matmul_isas()) {
    flags.matmul_kernels = std::string(isa);
    flags.apply();
    EXPECT_EQ(kernels::matmul_isa(), isa);
  }
  flags.matmul_kernels = "auto";
  flags.apply();
  EXPECT_NE(kernels::matmul_isa(), "amx");  // opt-in only
  EXPECT_EQ(kernels::matmul_isa(), kernels::matmul_isas().front());
  flags.matmul_kernels = "no-such-kernels";
  EXPECT_THROW(flags.apply(), UsageError);
  EXPECT_EQ(kernels::matmul_isa(), kernels::matmul_isas().front());  // unchanged
}

}  // namespace
}  // namespace flint::cli
