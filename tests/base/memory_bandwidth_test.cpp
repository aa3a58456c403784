// The read-bandwidth probes: they read what they are given and nothing past it (a region
// that ends exactly where its allocation does, at an odd address, so a sanitizer build
// catches a read past the end), leave it unchanged, and return a rate. No figure is
// compared with a time: the machines are shared.
#include "base/memory_bandwidth.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>

namespace flint {
namespace {

TEST(MemoryBandwidth, ProbeOfARegionReadsOnlyItAndLeavesItUnchanged) {
  const std::size_t bytes = (std::size_t{8} << 20) + 5;  // not a whole number of words
  std::unique_ptr<uint8_t[]> region(new uint8_t[bytes]);
  std::iota(region.get(), region.get() + bytes, uint8_t{0});
  const double rate = measure_read_bandwidth_of(region.get() + 3, bytes - 3, 2);
  EXPECT_TRUE(std::isfinite(rate));
  EXPECT_GT(rate, 0);
  for (std::size_t i = 0; i < bytes; ++i) ASSERT_EQ(region[i], static_cast<uint8_t>(i)) << i;
}

TEST(MemoryBandwidth, ARegionWithoutAWholeWordReadsNothing) {
  const uint8_t few[7] = {1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(measure_read_bandwidth_of(few + 1, 6), 0);
  EXPECT_EQ(measure_read_bandwidth_of(few, 0), 0);
}

TEST(MemoryBandwidth, ProbeWithItsOwnBufferReturnsARate) {
  const double rate = measure_read_bandwidth(std::size_t{8} << 20, 2);
  EXPECT_TRUE(std::isfinite(rate));
  EXPECT_GT(rate, 0);
}

}  // namespace
}  // namespace flint
