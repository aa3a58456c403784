#include "formats/npy.h"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string_view>

#include "base/error.h"
#include "base/mmap_file.h"

namespace flint {

namespace {

constexpr std::string_view kMagic = "\x93NUMPY";

// A cursor over the header's Python dict literal; every failure names the file.
class DictReader {
 public:
  DictReader(std::string_view text, const std::string& label) : text_(text), label_(label) {}

  [[noreturn]] void fail(std::string_view what) const {
    throw Error("{}: bad .npy header at byte {} ({}): {}", label_, pos_, what,
                std::string(text_.substr(0, 120)));
  }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool accept(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!accept(c)) fail(std::string("expected '") + c + "'");
  }
  std::string string_literal() {
    skip_space();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"'))
      fail("expected a string");
    const char quote = text_[pos_++];
    const std::size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string value(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return value;
  }
  bool boolean() {
    skip_space();
    for (auto [word, value] : {std::pair{std::string_view("True"), true}, {"False", false}}) {
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    }
    fail("expected True or False");
  }
  std::vector<int64_t> tuple_of_ints() {
    expect('(');
    std::vector<int64_t> values;
    while (!accept(')')) {
      skip_space();
      int64_t value = 0;
      std::size_t digits = 0;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
        if (value > (INT64_MAX - 9) / 10) fail("dimension too large");
        value = value * 10 + (text_[pos_++] - '0');
        ++digits;
      }
      if (digits == 0) fail("expected a dimension");
      values.push_back(value);
      if (!accept(',')) {
        expect(')');
        break;
      }
    }
    return values;
  }

 private:
  std::string_view text_;
  const std::string& label_;
  std::size_t pos_ = 0;
};

}  // namespace

std::string npy_f32_header(std::span<const int64_t> shape) {
  std::string dims;
  for (int64_t dim : shape) dims += (dims.empty() ? "" : ", ") + std::to_string(dim);
  if (shape.size() == 1) dims += ",";
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  const std::size_t unpadded = kMagic.size() + 4 + dict.size() + 1;  // + '\n'
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  std::string header(kMagic);
  header += '\x01';
  header += '\x00';
  header += static_cast<char>(dict.size() & 0xFF);
  header += static_cast<char>(dict.size() >> 8);
  return header + dict;
}

void write_npy_f32(const std::filesystem::path& path, std::span<const int64_t> shape,
                   std::span<const float> data) {
  uint64_t numel = 1;
  for (int64_t dim : shape) {
    if (dim < 0 || __builtin_mul_overflow(numel, static_cast<uint64_t>(dim), &numel)) {
      throw Error("{}: invalid shape for .npy output", path.string());
    }
  }
  if (numel != data.size()) {
    throw Error("{}: shape holds {} values but {} were given", path.string(), numel, data.size());
  }
  const std::string header = npy_f32_header(shape);
  if (header.size() - 10 > 0xFFFF) throw Error("{}: shape too long for .npy 1.0", path.string());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error("cannot create {}: {}", path.string(), std::strerror(errno));
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(data.data()),
            static_cast<std::streamsize>(data.size() * sizeof(float)));
  out.close();
  if (!out) throw Error("cannot write {}: {}", path.string(), std::strerror(errno));
}

NpyArray read_npy_f32(const std::filesystem::path& path) {
  const std::string label = path.string();
  MappedFile file = MappedFile::open(path);
  const std::string_view bytes(reinterpret_cast<const char*>(file.bytes().data()), file.size());
  if (bytes.size() < 10 || bytes.substr(0, 6) != kMagic) throw Error("{}: not a .npy file", label);
  const int major = static_cast<unsigned char>(bytes[6]);
  std::size_t header_len = 0;
  std::size_t header_start = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9]) << 8;
    header_start = 10;
  } else if (major == 2) {
    if (bytes.size() < 12) throw Error("{}: truncated .npy header", label);
    for (int i = 11; i >= 8; --i)
      header_len = (header_len << 8) | static_cast<unsigned char>(bytes[i]);
    header_start = 12;
  } else {
    throw Error("{}: .npy format version {} is not supported (1 and 2 are)", label, major);
  }
  if (header_len > bytes.size() - header_start) throw Error("{}: truncated .npy header", label);

  DictReader dict(bytes.substr(header_start, header_len), label);
  NpyArray array;
  bool have_descr = false, have_order = false, have_shape = false;
  dict.expect('{');
  while (!dict.accept('}')) {
    const std::string key = dict.string_literal();
    dict.expect(':');
    if (key == "descr") {
      const std::string descr = dict.string_literal();
      if (descr != "<f4") throw Error("{}: dtype '{}' is not supported (only '<f4')", label, descr);
      have_descr = true;
    } else if (key == "fortran_order") {
      if (dict.boolean()) throw Error("{}: Fortran-order arrays are not supported", label);
      have_order = true;
    } else if (key == "shape") {
      array.shape = dict.tuple_of_ints();
      have_shape = true;
    } else {
      dict.fail("unknown key '" + key + "'");
    }
    if (!dict.accept(',')) {
      dict.expect('}');
      break;
    }
  }
  if (!have_descr || !have_order || !have_shape) dict.fail("missing descr, fortran_order or shape");

  uint64_t numel = 1;
  for (int64_t dim : array.shape) {
    if (__builtin_mul_overflow(numel, static_cast<uint64_t>(dim), &numel))
      dict.fail("shape overflows");
  }
  const std::size_t data_start = header_start + header_len;
  const uint64_t data_bytes = bytes.size() - data_start;
  if (numel > data_bytes / sizeof(float) || data_bytes != numel * sizeof(float)) {
    throw Error("{}: shape needs {} float32 values but the file holds {} data bytes", label, numel,
                data_bytes);
  }
  array.data.resize(numel);
  if (numel > 0) std::memcpy(array.data.data(), bytes.data() + data_start, data_bytes);
  return array;
}

}  // namespace flint
