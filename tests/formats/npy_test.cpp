// .npy files: the exact header numpy 1.24 writes, round trips, and rejected inputs.
#include "formats/npy.h"

#include <gtest/gtest.h>

#include <vector>

#include "test_files.h"

namespace flint {
namespace {

using testing::TempDir;
using testing::throws_with;

// The headers numpy.save wrote for zeros of these shapes (dtype '<f4'), copied byte for byte.
std::string numpy_header(const std::string& shape) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  dict.resize(117, ' ');
  return std::string("\x93NUMPY\x01\x00\x76\x00", 10) + dict + "\n";
}

TEST(Npy, HeaderMatchesNumpy) {
  EXPECT_EQ(npy_f32_header(std::vector<int64_t>{2, 3}), numpy_header("(2, 3)"));
  EXPECT_EQ(npy_f32_header(std::vector<int64_t>{5}), numpy_header("(5,)"));
  EXPECT_EQ(npy_f32_header(std::vector<int64_t>{}), numpy_header("()"));
  EXPECT_EQ(npy_f32_header(std::vector<int64_t>{1, 2, 3, 4}), numpy_header("(1, 2, 3, 4)"));
  EXPECT_EQ(npy_f32_header(std::vector<int64_t>{2, 3}).size(), 128u);
}

TEST(Npy, RoundTrips) {
  TempDir dir;
  const std::vector<int64_t> shape{2, 1, 3};
  const std::vector<float> data{1.5f, -2.0f, 3.25f, 0.0f, -0.0f, 1e30f};
  write_npy_f32(dir / "a.npy", shape, data);
  NpyArray array = read_npy_f32(dir / "a.npy");
  EXPECT_EQ(array.shape, shape);
  EXPECT_EQ(array.data, data);

  write_npy_f32(dir / "s.npy", {}, std::vector<float>{7.0f});
  EXPECT_EQ(read_npy_f32(dir / "s.npy").data, std::vector<float>{7.0f});
  write_npy_f32(dir / "e.npy", std::vector<int64_t>{0, 4}, {});
  EXPECT_TRUE(read_npy_f32(dir / "e.npy").data.empty());
}

TEST(Npy, ReadsVersion2AndOtherSpacing) {
  TempDir dir;
  std::string dict = "{\"shape\":(2,),\"fortran_order\":False,\"descr\":\"<f4\"}\n";
  std::string file = std::string("\x93NUMPY\x02\x00", 8);
  for (int i = 0; i < 4; ++i) file += static_cast<char>((dict.size() >> (8 * i)) & 0xFF);
  const float values[2] = {1.0f, 2.0f};
  file += dict + std::string(reinterpret_cast<const char*>(values), 8);
  testing::write_bytes(dir / "v2.npy", file);
  EXPECT_EQ(read_npy_f32(dir / "v2.npy").data, (std::vector<float>{1.0f, 2.0f}));
}

TEST(Npy, RejectsWhatItCannotRead) {
  TempDir dir;
  auto header_with = [](const std::string& dict) {
    return std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(dict.size()) + '\0' + dict;
  };
  auto check = [&](const std::string& name, const std::string& bytes,
                   const std::vector<std::string_view>& words) {
    testing::write_bytes(dir / name, bytes);
    return throws_with([&] { read_npy_f32(dir / name); }, testing::with_first(name, words));
  };
  EXPECT_TRUE(check("magic.npy", "NUMPY", {"not a .npy file"}));
  EXPECT_TRUE(check("f8.npy",
                    header_with("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }") +
                        std::string(8, '\0'),
                    {"'<f8'"}));
  EXPECT_TRUE(check("fortran.npy",
                    header_with("{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }") +
                        std::string(4, '\0'),
                    {"Fortran"}));
  EXPECT_TRUE(check("short.npy",
                    header_with("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }") +
                        std::string(8, '\0'),
                    {"3 float32 values", "8 data bytes"}));
  EXPECT_TRUE(
      check("garbage.npy", header_with("{'descr': '<f4', 'shape': (1,"), {"bad .npy header"}));
  EXPECT_TRUE(check("cut.npy", std::string("\x93NUMPY\x01\x00\xff\x00{", 11), {"truncated"}));
  EXPECT_TRUE(throws_with([&] { read_npy_f32(dir / "absent.npy"); }, {"absent.npy"}));
  EXPECT_TRUE(throws_with(
      [&] {
        write_npy_f32(dir / "w.npy", std::vector<int64_t>{2, 2}, std::vector<float>(3));
      },
      {"w.npy", "4 values", "3 were given"}));
}

}  // namespace
}  // namespace flint
