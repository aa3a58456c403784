// Helpers for the formats tests: a scratch directory removed at the end of each test,
// raw file writing, and an assertion that a call throws flint::Error with given words.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace flint::testing {

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            ("flint_" + std::string(info ? info->name() : "test") + "_" +
             std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(std::string_view name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline void write_bytes(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

// A safetensors file image: length prefix `header_size` (default: the real size), header,
// data.
inline std::string safetensors_image(std::string_view header, std::string_view data,
                                     uint64_t header_size = UINT64_MAX) {
  if (header_size == UINT64_MAX) header_size = header.size();
  std::string out;
  for (int i = 0; i < 8; ++i) out += static_cast<char>((header_size >> (8 * i)) & 0xFF);
  out += header;
  out += data;
  return out;
}

// Runs `fn`, expecting flint::Error whose message contains every one of `words`.
template <typename Fn>
::testing::AssertionResult throws_with(Fn&& fn, const std::vector<std::string_view>& words) {
  try {
    fn();
  } catch (const Error& e) {
    const std::string message = e.what();
    for (std::string_view word : words) {
      if (message.find(word) == std::string::npos) {
        return ::testing::AssertionFailure() << "message lacks '" << word << "': " << message;
      }
    }
    return ::testing::AssertionSuccess() << message;
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-flint exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

// `words` with `first` in front (a file name that every message must contain).
inline std::vector<std::string_view> with_first(std::string_view first,
                                                const std::vector<std::string_view>& words) {
  std::vector<std::string_view> all;
  all.reserve(words.size() + 1);
  all.push_back(first);
  for (std::string_view word : words) all.push_back(word);
  return all;
}

}  // namespace flint::testing
