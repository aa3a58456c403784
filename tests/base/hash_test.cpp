#include "base/hash.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace flint {
namespace {

// The buffer of xxHash's own sanity test: byte i is the top byte of a 32-bit generator
// that starts at PRIME32_1 and squares itself.
constexpr uint64_t kPrime32 = 2654435761u;

std::vector<unsigned char> sanity_buffer(std::size_t n) {
  std::vector<unsigned char> out(n);
  uint32_t gen = static_cast<uint32_t>(kPrime32);
  for (auto& b : out) {
    b = static_cast<unsigned char>(gen >> 24);
    gen *= gen;
  }
  return out;
}

struct Vector {
  std::size_t length;
  uint64_t seed;
  uint64_t expected;
};

// Reference values from the xxHash library (libxxhash 0.8.1, XXH64), chosen so that every
// path is taken: empty, each tail step (1, 4, 8 bytes), exactly one stripe, stripes plus
// each kind of tail, and a long input.
constexpr Vector kVectors[] = {
    {0, 0, 0xEF46DB3751D8E999ULL},         {0, kPrime32, 0xAC75FDA2929B17EFULL},
    {1, 0, 0x4FCE394CC88952D8ULL},         {1, kPrime32, 0x739840CB819FA723ULL},
    {3, 0, 0x63E19DE8A52309F9ULL},         {4, 0, 0x9256E58AA397AEF1ULL},
    {7, 0, 0xAB48F5CD83BCB62CULL},         {8, 0, 0xF74CB1451B32B8CFULL},
    {9, 0, 0xE8B2A733258E8A4FULL},         {14, 0, 0xCFFA8DB881BC3A3DULL},
    {14, kPrime32, 0x5B9611585EFCC9CBULL}, {15, 0, 0x4D0A4120849B3EBFULL},
    {16, 0, 0x169173A697113B29ULL},        {31, 0, 0xAD09D9A6941DD847ULL},
    {32, 0, 0xAF5753D39159EDEEULL},        {32, kPrime32, 0xDCAB9233B8CA7B0FULL},
    {33, 0, 0x6711CBDD8543BAA8ULL},        {63, 0, 0xFF4410E17CE11EFAULL},
    {64, 0, 0x18F5388F1D2BA08CULL},        {100, 0, 0x7DA3F79A7D2667C2ULL},
    {222, 0, 0x9DD507880DEBB03DULL},       {222, kPrime32, 0xDC515172B8EE0600ULL},
    {2367, 0, 0x2E717C2BB15C0A8AULL},      {2367, kPrime32, 0xF7B7F152E920C87CULL},
};

TEST(Hash, MatchesReferenceVectors) {
  const auto buffer = sanity_buffer(2367);
  for (const Vector& v : kVectors) {
    EXPECT_EQ(hash64(buffer.data(), v.length, v.seed), v.expected)
        << "length " << v.length << " seed " << v.seed;
  }
}

TEST(Hash, MatchesPublishedStrings) {
  EXPECT_EQ(hash64(nullptr, 0), 0xEF46DB3751D8E999ULL);
  EXPECT_EQ(hash64(""), 0xEF46DB3751D8E999ULL);
  EXPECT_EQ(hash64("a"), 0xD24EC4F1A98C6E5BULL);
  EXPECT_EQ(hash64("abc"), 0x44BC2CF5AD770999ULL);
  EXPECT_EQ(hash64("Nobody inspects the spammish repetition"), 0xFBCEA83C8A378BF1ULL);
}

TEST(Hash, UnalignedInputGivesSameHash) {
  const auto buffer = sanity_buffer(300);
  std::vector<unsigned char> shifted(buffer.size() + 7);
  for (std::size_t offset = 1; offset < 8; ++offset) {
    std::memcpy(shifted.data() + offset, buffer.data(), buffer.size());
    EXPECT_EQ(hash64(shifted.data() + offset, buffer.size(), 5), hash64(buffer.data(), 300, 5));
  }
}

TEST(Hash, StreamingEqualsOneShotForEverySplit) {
  const auto buffer = sanity_buffer(200);
  for (std::size_t n : {0, 5, 31, 32, 33, 64, 100, 200}) {
    const uint64_t expected = hash64(buffer.data(), n, 42);
    for (std::size_t cut = 0; cut <= n; ++cut) {
      Hasher h(42);
      h.update(buffer.data(), cut).update(buffer.data() + cut, n - cut);
      ASSERT_EQ(h.digest(), expected) << "n " << n << " cut " << cut;
    }
  }
}

TEST(Hash, StreamingInRandomPieces) {
  const auto buffer = sanity_buffer(5000);
  std::mt19937 gen(7);
  for (int trial = 0; trial < 50; ++trial) {
    Hasher h(trial);
    std::size_t at = 0;
    while (at < buffer.size()) {
      std::size_t piece = std::min<std::size_t>(gen() % 80, buffer.size() - at);
      h.update(buffer.data() + at, piece);
      at += piece;
    }
    ASSERT_EQ(h.digest(), hash64(buffer.data(), buffer.size(), trial));
  }
}

TEST(Hash, DigestDoesNotChangeState) {
  Hasher h;
  h.update("hello ");
  (void)h.digest();
  h.update("world");
  EXPECT_EQ(h.digest(), hash64("hello world"));
}

TEST(Hash, CombineIsDefinedAndOrderDependent) {
  EXPECT_EQ(hash_combine(1, 2), 0x4B180FEC3EF3D4ACULL);  // XXH64 of the 16 LE bytes
  EXPECT_NE(hash_combine(1, 2), hash_combine(2, 1));
  EXPECT_NE(hash_combine(0, 0), 0u);
}

// A smoke test of distribution: hashes of consecutive integers and of chains never
// collide in 64 bits, and each output bit is set about half the time.
TEST(Hash, NoCollisionsAndBalancedBits) {
  std::set<uint64_t> seen;
  int ones[64] = {};
  uint64_t chain = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const uint64_t h = hash64(&i, sizeof i);
    chain = hash_combine(chain, static_cast<uint64_t>(i));
    EXPECT_TRUE(seen.insert(h).second);
    EXPECT_TRUE(seen.insert(chain).second);
    for (int b = 0; b < 64; ++b) ones[b] += static_cast<int>((h >> b) & 1);
  }
  for (int b = 0; b < 64; ++b) {
    EXPECT_NEAR(ones[b], n / 2, n / 50) << "bit " << b;
  }
}

}  // namespace
}  // namespace flint
