// 64-bit non-cryptographic hashing: xxHash64 (Yann Collet's published algorithm, written
// here from its specification), for prefix-cache block hashes, identities and file
// checksums.
//
// The results equal the reference XXH64 bit for bit (the tests hold the reference's
// vectors), so a value stored on disk today can be recomputed by any xxHash64, and the
// bytes are read as little-endian on every CPU. Not cryptographic: anybody can build
// collisions on purpose, so a hash only ever *finds* a candidate; callers compare the
// real contents before trusting it (see kv/disk_tier.h).
//
// Cost: about one cycle per 1-2 bytes on long inputs (four independent 64-bit lanes),
// a few nanoseconds for short ones. Everything here is pure and thread-safe; a Hasher is
// a small value type owned by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace flint {

// XXH64 of `n` bytes at `data` (`data` may be null when n == 0).
uint64_t hash64(const void* data, std::size_t n, uint64_t seed = 0);

inline uint64_t hash64(std::string_view bytes, uint64_t seed = 0) {
  return hash64(bytes.data(), bytes.size(), seed);
}

// Mixes two hashes into one, order-dependent (hash_combine(a, b) != hash_combine(b, a)
// in general). Defined as hash64 of the 16 little-endian bytes of a then b, so it is as
// well distributed as hash64 itself.
uint64_t hash_combine(uint64_t a, uint64_t b);

// Streaming XXH64: update() with the input in any number of pieces, then digest() gives
// exactly hash64(all the pieces concatenated, seed). Lets a checksum cover a header and
// a payload that live in different buffers without copying them together.
class Hasher {
 public:
  explicit Hasher(uint64_t seed = 0);

  Hasher& update(const void* data, std::size_t n);
  Hasher& update(std::string_view bytes) { return update(bytes.data(), bytes.size()); }
  // Does not change the state: more update() calls may follow.
  uint64_t digest() const;

 private:
  uint64_t seed_;
  uint64_t lanes_[4];
  uint64_t total_ = 0;  // bytes seen
  unsigned char buffer_[32];
  std::size_t buffered_ = 0;  // bytes of buffer_ in use, always < 32 between calls
};

}  // namespace flint
