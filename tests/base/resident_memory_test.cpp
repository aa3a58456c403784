// The peak resident memory against pages this test touches and releases itself (mmap'd, so
// no allocator keeps them): the peak rises by what was touched and, after a reset, no longer
// holds the released pages.
#include "base/resident_memory.h"

#include <sys/mman.h>

#include <gtest/gtest.h>

#include <cstring>

namespace flint {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

TEST(ResidentMemory, PeakSeesTouchedPagesAndResetForgetsReleasedOnes) {
  // Started over first: an earlier test's peak would hide this one's pages.
  if (!reset_peak_resident()) GTEST_SKIP() << "this kernel cannot reset the peak";
  const int64_t before = peak_resident_bytes();
  ASSERT_GT(before, 0);
  const std::size_t bytes = 96 * kMiB;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  std::memset(p, 1, bytes);  // every page resident
  const int64_t with = peak_resident_bytes();
  EXPECT_GE(with, before + 90 * kMiB);  // a few pages of the test itself may come and go
  munmap(p, bytes);
  // The kernel's counters are per-thread caches synced now and then: equal within a few pages.
  EXPECT_GE(peak_resident_bytes(), with - 4 * kMiB) << "a peak stays when memory is released";
  ASSERT_TRUE(reset_peak_resident());
  EXPECT_LE(peak_resident_bytes(), with - 64 * kMiB);
}

}  // namespace
}  // namespace flint
