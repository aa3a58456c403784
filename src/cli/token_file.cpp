#include "cli/token_file.h"

#include <cstring>
#include <fstream>
#include <iterator>

#include "base/error.h"
#include "cli/flags.h"
#include "text/tokenizer.h"

namespace flint::cli {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read {}", path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

std::vector<int32_t> read_token_file(const std::string& model_dir, const std::string& path,
                                     const std::string& format, const dsv4::Config& config) {
  const std::string bytes = read_file(path);
  std::vector<int32_t> ids;
  if (format == "text") {
    ids = text::Tokenizer::load(model_dir).encode(bytes, true);
    if (ids.empty() || ids[0] != config.bos_token_id)
      ids.insert(ids.begin(), static_cast<int32_t>(config.bos_token_id));
  } else if (format == "u16" || format == "i32") {
    const size_t width = format == "u16" ? 2 : 4;
    if (bytes.size() % width != 0)
      throw Error("{}: {} bytes is not a whole number of {} ids", path, bytes.size(), format);
    ids.resize(bytes.size() / width);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (width == 2) {
        uint16_t v;
        std::memcpy(&v, bytes.data() + 2 * i, 2);
        ids[i] = v;
      } else {
        std::memcpy(&ids[i], bytes.data() + 4 * i, 4);
      }
    }
  } else {
    throw UsageError("--format must be text, u16 or i32, got '{}'", format);
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= config.vocab_size)
      throw Error("{}: token {} at index {} is outside the vocabulary [0, {})", path, ids[i], i,
                  config.vocab_size);
  }
  return ids;
}

}  // namespace flint::cli
