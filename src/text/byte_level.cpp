#include "text/byte_level.h"

#include <cstring>

namespace flint::text {

ByteLevelAlphabet::ByteLevelAlphabet() {
  to_byte_.fill(-1);
  auto printable = [](int b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  };
  char32_t next = 0x100;
  for (int b = 0; b < 256; ++b) {
    to_code_point_[b] = printable(b) ? static_cast<char32_t>(b) : next++;
    to_byte_[to_code_point_[b]] = static_cast<int16_t>(b);
  }
}

const ByteLevelAlphabet& ByteLevelAlphabet::get() {
  static const ByteLevelAlphabet alphabet;
  return alphabet;
}

std::optional<uint8_t> ByteLevelAlphabet::byte(char32_t cp) const {
  if (cp >= to_byte_.size() || to_byte_[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(to_byte_[cp]);
}

std::optional<std::string> ByteLevelAlphabet::decode(std::string_view text) const {
  if (!is_valid_utf8(text)) return std::nullopt;
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    int len = 0;
    char32_t cp = decode_utf8_at(text, i, &len);
    auto b = byte(cp);
    if (!b) return std::nullopt;
    out.push_back(static_cast<char>(*b));
    i += static_cast<std::size_t>(len);
  }
  return out;
}

std::string ByteLevelAlphabet::encode(std::string_view bytes) const {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) append_utf8(out, to_code_point_[static_cast<uint8_t>(c)]);
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// The WHATWG "UTF-8 decoder" algorithm (encoding.spec.whatwg.org/#utf-8-decoder). The bounds
// on the second byte exclude overlongs (E0, F0), surrogates (ED) and values above U+10FFFF (F4).
void Utf8Decoder::push(uint8_t byte, std::string& out) {
  if (needed_ == 0) {
    if (byte < 0x80) {
      out.push_back(static_cast<char>(byte));
      return;
    }
    if (byte >= 0xC2 && byte <= 0xDF) {
      needed_ = 1;
      code_point_ = byte & 0x1F;
    } else if (byte >= 0xE0 && byte <= 0xEF) {
      if (byte == 0xE0) lower_ = 0xA0;
      if (byte == 0xED) upper_ = 0x9F;
      needed_ = 2;
      code_point_ = byte & 0x0F;
    } else if (byte >= 0xF0 && byte <= 0xF4) {
      if (byte == 0xF0) lower_ = 0x90;
      if (byte == 0xF4) upper_ = 0x8F;
      needed_ = 3;
      code_point_ = byte & 0x07;
    } else {
      out.append(kReplacementCharacter);
      return;
    }
    buffer_[0] = static_cast<char>(byte);
    return;
  }
  if (byte < lower_ || byte > upper_) {
    // The pending bytes are a maximal subpart: one U+FFFD, then `byte` starts afresh.
    reset();
    out.append(kReplacementCharacter);
    push(byte, out);
    return;
  }
  lower_ = 0x80;
  upper_ = 0xBF;
  code_point_ = (code_point_ << 6) | (byte & 0x3F);
  ++seen_;
  buffer_[seen_] = static_cast<char>(byte);
  if (seen_ == needed_) {
    out.append(buffer_, seen_ + 1u);
    reset();
  }
}

void Utf8Decoder::finish(std::string& out) {
  if (needed_ != 0) {
    reset();
    out.append(kReplacementCharacter);
  }
}

namespace {
// Length of the well-formed sequence at text[i], or 0 if it is ill-formed or truncated.
int valid_sequence_length(std::string_view text, std::size_t i) {
  auto at = [&](std::size_t k) { return static_cast<uint8_t>(text[k]); };
  uint8_t b0 = at(i);
  std::size_t n = text.size() - i;
  if (b0 < 0x80) return 1;
  if (b0 >= 0xC2 && b0 <= 0xDF) return (n >= 2 && (at(i + 1) & 0xC0) == 0x80) ? 2 : 0;
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    if (n < 3) return 0;
    uint8_t lo = b0 == 0xE0 ? 0xA0 : 0x80, hi = b0 == 0xED ? 0x9F : 0xBF;
    if (at(i + 1) < lo || at(i + 1) > hi || (at(i + 2) & 0xC0) != 0x80) return 0;
    return 3;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    if (n < 4) return 0;
    uint8_t lo = b0 == 0xF0 ? 0x90 : 0x80, hi = b0 == 0xF4 ? 0x8F : 0xBF;
    if (at(i + 1) < lo || at(i + 1) > hi || (at(i + 2) & 0xC0) != 0x80 ||
        (at(i + 3) & 0xC0) != 0x80)
      return 0;
    return 4;
  }
  return 0;
}
}  // namespace

bool is_valid_utf8(std::string_view text) {
  std::size_t i = 0;
  const std::size_t n = text.size();
  while (i < n) {
    // Skip ASCII eight bytes at a time: most text is mostly ASCII.
    if (i + 8 <= n) {
      uint64_t word;
      std::memcpy(&word, text.data() + i, 8);
      if ((word & 0x8080808080808080ull) == 0) {
        i += 8;
        continue;
      }
    }
    int len = valid_sequence_length(text, i);
    if (len == 0) return false;
    i += static_cast<std::size_t>(len);
  }
  return true;
}

std::string_view to_valid_utf8(std::string_view text, std::string& storage) {
  if (is_valid_utf8(text)) return text;
  storage.clear();
  storage.reserve(text.size() + 16);
  Utf8Decoder decoder;
  decoder.push(text, storage);
  decoder.finish(storage);
  return storage;
}

char32_t decode_utf8_at(std::string_view text, std::size_t pos, int* length) {
  auto b = [&](std::size_t k) {
    return static_cast<uint32_t>(static_cast<uint8_t>(text[pos + k]));
  };
  uint32_t b0 = b(0);
  if (b0 < 0x80) {
    *length = 1;
    return b0;
  }
  if (b0 < 0xE0) {
    *length = 2;
    return ((b0 & 0x1F) << 6) | (b(1) & 0x3F);
  }
  if (b0 < 0xF0) {
    *length = 3;
    return ((b0 & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
  }
  *length = 4;
  return ((b0 & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
}

}  // namespace flint::text
