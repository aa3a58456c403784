// The safetensors reader and writer: a round trip, and one test per kind of malformed
// file, each checking that the error names the file and the tensor.
#include "formats/safetensors.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "test_files.h"

namespace flint {
namespace {

using testing::safetensors_image;
using testing::TempDir;
using testing::throws_with;

template <typename T>
std::span<const std::byte> as_bytes(const std::vector<T>& values) {
  return std::as_bytes(std::span<const T>(values));
}

TEST(Safetensors, WriteThenReadRoundTrips) {
  TempDir dir;
  const std::vector<float> matrix{1, 2, 3, 4, 5, 6};
  const std::vector<uint16_t> bf16{0x3F80, 0x4000, 0xC040, 0x0000};
  const std::vector<int8_t> bytes{-1, 2, -3};
  const std::vector<float> scalar{42.0f};
  const std::vector<float> empty;
  const std::vector<TensorToWrite> tensors{
      {"bytes", DType::I8, {3}, as_bytes(bytes)},
      {"layers.0.w", DType::BF16, {2, 2}, as_bytes(bf16)},
      {"matrix", DType::F32, {2, 3}, as_bytes(matrix)},
      {"scalar", DType::F32, {}, as_bytes(scalar)},
      {"empty", DType::F32, {0, 5}, as_bytes(empty)},
  };
  const auto path = dir / "model.safetensors";
  write_safetensors(path, tensors, {{"format", "pt"}});

  SafetensorsFile file = SafetensorsFile::open(path);
  EXPECT_EQ(file.metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
  ASSERT_EQ(file.tensors().size(), tensors.size());
  for (const TensorToWrite& t : tensors) {
    const TensorInfo* info = file.find(t.name);
    ASSERT_NE(info, nullptr) << t.name;
    EXPECT_EQ(info->dtype, t.dtype);
    EXPECT_EQ(info->shape, t.shape);
    EXPECT_EQ(info->nbytes(), t.bytes.size());
    EXPECT_EQ(info->begin % dtype_size(info->dtype), 0u) << "aligned " << t.name;
    auto data = file.data(*info);
    ASSERT_EQ(data.size(), t.bytes.size());
    // std::equal, not memcmp: the empty tensor's bytes have no storage (data() is null), and
    // memcmp on a null pointer is undefined even for 0 bytes.
    EXPECT_TRUE(std::equal(data.begin(), data.end(), t.bytes.begin(), t.bytes.end())) << t.name;
  }
  EXPECT_EQ(file.find("scalar")->numel(), 1u);
  EXPECT_EQ(file.find("empty")->numel(), 0u);
  EXPECT_EQ(file.find("missing"), nullptr);
  // Four-byte tensors come first, in the given order; the header is padded to 8 bytes.
  EXPECT_EQ(file.tensors()[0].name, "matrix");
  EXPECT_EQ(file.tensors()[1].name, "scalar");
  EXPECT_EQ(file.tensors()[2].name, "empty");
  EXPECT_EQ((file.file_size() - 6 * 4 - 2 * 4 - 3 - 4) % 8, 0u);
}

TEST(Safetensors, KeepsHeaderOrderAndAllowsGaps) {
  const std::string header = R"({"z":{"dtype":"U8","shape":[2],"data_offsets":[6,8]},)"
                             R"("a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                             R"("inside":{"dtype":"U8","shape":[0],"data_offsets":[1,1]}})";
  const std::string image = safetensors_image(header, "abcdefghij");
  auto parsed = parse_safetensors_header(std::as_bytes(std::span(image)), "mem");
  ASSERT_EQ(parsed.tensors.size(), 3u);
  EXPECT_EQ(parsed.tensors[0].name, "z");
  EXPECT_EQ(parsed.tensors[1].name, "a");
  EXPECT_EQ(parsed.data_start, 8 + header.size());
}

// Parses `header` + `data` as a file named "bad.safetensors" and expects an error with
// the file name and `words`.
::testing::AssertionResult rejects(const std::string& header,
                                   const std::vector<std::string_view>& words,
                                   const std::string& data = std::string(64, '\0')) {
  const std::string image = safetensors_image(header, data);
  return throws_with(
      [&] { parse_safetensors_header(std::as_bytes(std::span(image)), "bad.safetensors"); },
      testing::with_first("bad.safetensors: ", words));
}

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":" + dtype + ",\"shape\":" + shape +
         ",\"data_offsets\":" + offsets + "}";
}

TEST(Safetensors, RejectsTruncatedOrAbsurdLengths) {
  auto parse = [](const std::string& image) {
    parse_safetensors_header(std::as_bytes(std::span(image)), "f.safetensors");
  };
  EXPECT_TRUE(throws_with([&] { parse("1234"); }, {"f.safetensors", "too short"}));
  EXPECT_TRUE(throws_with([&] { parse(safetensors_image("{}", "", 1000)); },
                          {"f.safetensors", "1000", "larger than the file"}));
  EXPECT_TRUE(throws_with([&] { parse(safetensors_image("{}", "", uint64_t{1} << 40)); },
                          {"f.safetensors", "limit"}));
  EXPECT_TRUE(throws_with([&] { parse(safetensors_image("{}", "", UINT64_MAX - 3)); },
                          {"f.safetensors", "limit"}));
  EXPECT_TRUE(throws_with([&] { parse(safetensors_image("", "")); }, {"not valid JSON"}));
}

TEST(Safetensors, RejectsBadJson) {
  EXPECT_TRUE(rejects("{", {"not valid JSON"}));
  EXPECT_TRUE(rejects("{\"a\":1} x", {"not valid JSON"}));
  EXPECT_TRUE(rejects("{\"t\xff\":1}", {"not valid JSON"}));  // invalid UTF-8
  EXPECT_TRUE(rejects(std::string("{\"t\0\":1}", 8), {"not valid JSON"}));
  EXPECT_TRUE(rejects("[1,2]", {"array", "expected a JSON object"}));
  EXPECT_TRUE(rejects("{\"w\":5}", {"tensor 'w'", "expected an object"}));
}

TEST(Safetensors, RejectsMissingOrMistypedFields) {
  EXPECT_TRUE(rejects(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", {"'w'", "missing \"dtype\""}));
  EXPECT_TRUE(
      rejects(R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", {"'w'", "missing \"shape\""}));
  EXPECT_TRUE(rejects(R"({"w":{"dtype":"F32","shape":[1]}})", {"'w'", "missing \"data_offsets\""}));
  EXPECT_TRUE(rejects("{" + entry("w", "5", "[1]", "[0,4]") + "}", {"'w'", "\"dtype\" is number"}));
  EXPECT_TRUE(
      rejects("{" + entry("w", "\"F32\"", "\"1\"", "[0,4]") + "}", {"'w'", "\"shape\" is string"}));
  EXPECT_TRUE(rejects("{" + entry("w", "\"F32\"", "[1]", "[0]") + "}", {"'w'", "data_offsets"}));
  EXPECT_TRUE(
      rejects("{" + entry("w", "\"F32\"", "[1]", "[0,\"4\"]") + "}", {"'w'", "data_offsets"}));
  EXPECT_TRUE(rejects("{" + entry("w", "\"F32\"", "[1]", "[-4,0]") + "}", {"'w'", "data_offsets"}));
}

TEST(Safetensors, RejectsBadDimensions) {
  EXPECT_TRUE(rejects("{" + entry("w", "\"F32\"", "[-1]", "[0,4]") + "}", {"'w'", "negative"}));
  EXPECT_TRUE(rejects("{" + entry("w", "\"F32\"", "[2.5]", "[0,4]") + "}", {"'w'", "number"}));
  EXPECT_TRUE(rejects("{" + entry("w", "\"F32\"", "[null]", "[0,4]") + "}", {"'w'", "null"}));
  EXPECT_TRUE(rejects("{" + entry("w", "\"F32\"", "[9223372036854775808]", "[0,4]") + "}",
                      {"'w'", "above 2^63"}));
  EXPECT_TRUE(rejects("{" + entry("w", "\"F32\"", "[4294967296,4294967296,16]", "[0,4]") + "}",
                      {"'w'", "overflows"}));
}

TEST(Safetensors, RejectsUnknownDtypeListingKnownOnes) {
  EXPECT_TRUE(rejects("{" + entry("layers.0.w", "\"F7\"", "[1]", "[0,1]") + "}",
                      {"tensor 'layers.0.w'", "unknown dtype 'F7'", "BF16", "F8_E8M0"}));
}

TEST(Safetensors, RejectsBadOffsets) {
  EXPECT_TRUE(rejects("{" + entry("w", "\"U8\"", "[4]", "[8,4]") + "}", {"'w'", "reversed"}));
  EXPECT_TRUE(rejects("{" + entry("w", "\"U8\"", "[4]", "[62,66]") + "}",
                      {"'w'", "outside the data section (64 bytes)"}));
  EXPECT_TRUE(rejects("{" + entry("w", "\"F32\"", "[3]", "[0,8]") + "}",
                      {"'w'", "needs 12 bytes", "hold 8"}));
  EXPECT_TRUE(rejects("{" + entry("a", "\"F32\"", "[2]", "[0,8]") + "," +
                          entry("b", "\"F32\"", "[2]", "[4,12]") + "}",
                      {"tensor 'b'", "overlap tensor 'a'"}));
  EXPECT_TRUE(rejects(
      "{" + entry("a", "\"U8\"", "[8]", "[0,8]") + "," + entry("b", "\"U8\"", "[2]", "[2,4]") + "}",
      {"tensor 'b'", "overlap tensor 'a'"}));
}

TEST(Safetensors, RejectsDuplicates) {
  EXPECT_TRUE(rejects(
      "{" + entry("w", "\"U8\"", "[4]", "[0,4]") + "," + entry("w", "\"U8\"", "[4]", "[4,8]") + "}",
      {"tensor 'w'", "named twice"}));
  EXPECT_TRUE(rejects(R"({"w":{"dtype":"U8","dtype":"F32","shape":[4],"data_offsets":[0,4]}})",
                      {"tensor 'w'", "'dtype' appears twice"}));
}

TEST(Safetensors, ChecksMetadata) {
  EXPECT_TRUE(rejects(R"({"__metadata__":[1]})", {"__metadata__", "array"}));
  EXPECT_TRUE(rejects(R"({"__metadata__":{"format":1}})", {"__metadata__", "'format'", "string"}));
  EXPECT_TRUE(rejects(R"({"__metadata__":{"k":"a","k":"b"}})", {"__metadata__", "'k'", "twice"}));
  const std::string ok = safetensors_image(R"({"__metadata__":{"format":"pt"}})", "");
  EXPECT_EQ(parse_safetensors_header(std::as_bytes(std::span(ok)), "x").metadata.at("format"),
            "pt");
}

TEST(Safetensors, OpenAndWriteErrorsNameThePath) {
  TempDir dir;
  EXPECT_TRUE(
      throws_with([&] { SafetensorsFile::open(dir / "nope.safetensors"); }, {"nope.safetensors"}));
  testing::write_bytes(dir / "short.safetensors", "{}");
  EXPECT_TRUE(throws_with([&] { SafetensorsFile::open(dir / "short.safetensors"); },
                          {"short.safetensors", "too short"}));
  const std::vector<float> three{1, 2, 3};
  const std::vector<TensorToWrite> wrong_size{{"w", DType::F32, {2, 2}, as_bytes(three)}};
  EXPECT_TRUE(throws_with([&] { write_safetensors(dir / "o.safetensors", wrong_size); },
                          {"o.safetensors", "'w'", "12 bytes"}));
  const std::vector<TensorToWrite> twice{{"w", DType::F32, {3}, as_bytes(three)},
                                         {"w", DType::F32, {3}, as_bytes(three)}};
  EXPECT_TRUE(throws_with([&] { write_safetensors(dir / "o.safetensors", twice); },
                          {"o.safetensors", "'w'", "twice"}));
  EXPECT_TRUE(throws_with([&] { write_safetensors(dir.path() / "no" / "dir.safetensors", {}); },
                          {"dir.safetensors"}));
}

}  // namespace
}  // namespace flint
