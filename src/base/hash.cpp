#include "base/hash.h"

#include <bit>
#include <cstring>

namespace flint {
namespace {

// The five primes of the XXH64 specification.
constexpr uint64_t kP1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t kP2 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t kP3 = 0x165667B19E3779F9ULL;
constexpr uint64_t kP4 = 0x85EBCA77C2B2AE63ULL;
constexpr uint64_t kP5 = 0x27D4EB2F165667C5ULL;

// Unaligned little-endian loads (memcpy compiles to one mov).
uint64_t load64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  return v;
}

uint32_t load32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap32(v);
  return v;
}

uint64_t lane_round(uint64_t acc, uint64_t lane) {
  acc += lane * kP2;
  acc = std::rotl(acc, 31);
  return acc * kP1;
}

uint64_t merge_round(uint64_t acc, uint64_t lane) {
  acc ^= lane_round(0, lane);
  return acc * kP1 + kP4;
}

void init_lanes(uint64_t lanes[4], uint64_t seed) {
  lanes[0] = seed + kP1 + kP2;
  lanes[1] = seed + kP2;
  lanes[2] = seed;
  lanes[3] = seed - kP1;
}

// Consumes whole 32-byte stripes of [p, p + n); returns the bytes consumed.
std::size_t consume_stripes(uint64_t lanes[4], const unsigned char* p, std::size_t n) {
  std::size_t done = 0;
  for (; n - done >= 32; done += 32) {
    lanes[0] = lane_round(lanes[0], load64(p + done));
    lanes[1] = lane_round(lanes[1], load64(p + done + 8));
    lanes[2] = lane_round(lanes[2], load64(p + done + 16));
    lanes[3] = lane_round(lanes[3], load64(p + done + 24));
  }
  return done;
}

uint64_t converge(const uint64_t lanes[4]) {
  uint64_t acc = std::rotl(lanes[0], 1) + std::rotl(lanes[1], 7) + std::rotl(lanes[2], 12) +
                 std::rotl(lanes[3], 18);
  for (int i = 0; i < 4; ++i) acc = merge_round(acc, lanes[i]);
  return acc;
}

// The tail (fewer than 32 bytes) and the final avalanche.
uint64_t finish(uint64_t acc, const unsigned char* p, std::size_t n) {
  for (; n >= 8; p += 8, n -= 8) {
    acc ^= lane_round(0, load64(p));
    acc = std::rotl(acc, 27) * kP1 + kP4;
  }
  if (n >= 4) {
    acc ^= static_cast<uint64_t>(load32(p)) * kP1;
    acc = std::rotl(acc, 23) * kP2 + kP3;
    p += 4;
    n -= 4;
  }
  for (; n > 0; ++p, --n) {
    acc ^= static_cast<uint64_t>(*p) * kP5;
    acc = std::rotl(acc, 11) * kP1;
  }
  acc ^= acc >> 33;
  acc *= kP2;
  acc ^= acc >> 29;
  acc *= kP3;
  acc ^= acc >> 32;
  return acc;
}

}  // namespace

uint64_t hash64(const void* data, std::size_t n, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t acc;
  std::size_t done = 0;
  if (n >= 32) {
    uint64_t lanes[4];
    init_lanes(lanes, seed);
    done = consume_stripes(lanes, p, n);
    acc = converge(lanes);
  } else {
    acc = seed + kP5;
  }
  acc += static_cast<uint64_t>(n);
  return finish(acc, p + done, n - done);
}

uint64_t hash_combine(uint64_t a, uint64_t b) {
  unsigned char bytes[16];
  if constexpr (std::endian::native == std::endian::big) {
    a = __builtin_bswap64(a);
    b = __builtin_bswap64(b);
  }
  std::memcpy(bytes, &a, 8);
  std::memcpy(bytes + 8, &b, 8);
  return hash64(bytes, sizeof bytes, 0);
}

Hasher::Hasher(uint64_t seed) : seed_(seed) { init_lanes(lanes_, seed); }

Hasher& Hasher::update(const void* data, std::size_t n) {
  if (n == 0) return *this;
  const auto* p = static_cast<const unsigned char*>(data);
  total_ += n;
  if (buffered_ + n < 32) {  // still short of one stripe: only buffer
    std::memcpy(buffer_ + buffered_, p, n);
    buffered_ += n;
    return *this;
  }
  if (buffered_ > 0) {  // complete the buffered stripe first
    const std::size_t fill = 32 - buffered_;
    std::memcpy(buffer_ + buffered_, p, fill);
    consume_stripes(lanes_, buffer_, 32);
    p += fill;
    n -= fill;
    buffered_ = 0;
  }
  const std::size_t done = consume_stripes(lanes_, p, n);
  std::memcpy(buffer_, p + done, n - done);
  buffered_ = n - done;
  return *this;
}

uint64_t Hasher::digest() const {
  uint64_t acc = total_ >= 32 ? converge(lanes_) : seed_ + kP5;
  acc += total_;
  return finish(acc, buffer_, buffered_);
}

}  // namespace flint
