// Little binary messages between ranks (the engine's step commands, the KV cache's journal):
// plain values and spans appended to a byte vector and read back in the same order. Both
// ends are the same build, so there is no versioning; a short or malformed message is a
// bug (FLINT_CHECK), not a user error.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "base/check.h"

namespace flint {

class ByteWriter {
 public:
  explicit ByteWriter(std::vector<uint8_t>& out) : out_(out) {}
  template <typename T>
  void put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out_.insert(out_.end(), p, p + sizeof v);
  }
  template <typename T>
  void put_span(std::span<const T> v) {
    put<uint64_t>(v.size());
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    out_.insert(out_.end(), p, p + v.size_bytes());
  }
  void put_string(const std::string& s) { put_span(std::span<const char>(s.data(), s.size())); }

 private:
  std::vector<uint8_t>& out_;
};

class ByteReader {
 public:
  explicit ByteReader(std::span<const uint8_t> in) : in_(in) {}
  bool done() const { return at_ == in_.size(); }
  template <typename T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    FLINT_CHECK(at_ + sizeof(T) <= in_.size(), "short message");
    T v;
    std::memcpy(&v, in_.data() + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }
  template <typename T>
  std::vector<T> get_vector() {
    const auto n = get<uint64_t>();
    FLINT_CHECK(at_ + n * sizeof(T) <= in_.size(), "short message");
    std::vector<T> v(n);
    if (n > 0) std::memcpy(v.data(), in_.data() + at_, n * sizeof(T));
    at_ += n * sizeof(T);
    return v;
  }
  std::string get_string() {
    auto v = get_vector<char>();
    return std::string(v.begin(), v.end());
  }

 private:
  std::span<const uint8_t> in_;
  size_t at_ = 0;
};

}  // namespace flint
