// Byte-level BPE alphabet and the UTF-8 handling around it.
//
// GPT-2 style byte-level BPE (used by DeepSeek) spells every byte 0..255 as one printable
// code point (0x21..0x7E, 0xA1..0xAC and 0xAE..0xFF map to themselves; the other 68 bytes map
// to U+0100..U+0143 in byte order) so that vocabulary entries are printable strings: a space is
// "Ġ" (U+0120), a newline "Ċ" (U+010A). flint tokenizes raw bytes directly and only needs this
// table to read tokenizer.json (vocab and merges are spelled in this alphabet) and to write it.
//
// UTF-8 decoding follows the WHATWG Encoding Standard's decoder, which is what JavaScript's
// TextDecoder (the reference tokenizer's decoder) and Rust's from_utf8_lossy implement: each
// maximal subpart of an ill-formed sequence becomes one U+FFFD. Utf8Decoder is the streaming
// form, so decoding bytes in any number of pieces gives the same text as decoding them at once.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace flint::text {

// The byte-level alphabet: code point for each byte, and the inverse.
class ByteLevelAlphabet {
 public:
  static const ByteLevelAlphabet& get();

  // The code point that spells byte `b` (e.g. 0x20 -> U+0120 'Ġ').
  char32_t code_point(uint8_t b) const { return to_code_point_[b]; }
  // The byte spelled by code point `cp`, or nullopt if `cp` is not in the alphabet.
  std::optional<uint8_t> byte(char32_t cp) const;

  // "Ġthe" -> " the". Returns nullopt if a character is outside the alphabet or `text` is not
  // valid UTF-8. O(len).
  std::optional<std::string> decode(std::string_view text) const;
  // " the" -> "Ġthe" (any bytes, valid UTF-8 or not). O(len).
  std::string encode(std::string_view bytes) const;

 private:
  ByteLevelAlphabet();
  std::array<char32_t, 256> to_code_point_{};
  std::array<int16_t, 0x144> to_byte_{};  // indexed by code point < 0x144, -1 if absent
};

// Appends the UTF-8 encoding of `cp` (must be a Unicode scalar value) to `out`.
void append_utf8(std::string& out, char32_t cp);

inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

// Streaming WHATWG UTF-8 decoder. push() appends every code point completed by `byte` (or a
// U+FFFD for an ill-formed subpart) to `out`; a partial sequence stays pending until completed.
// finish() turns a pending partial sequence into one U+FFFD. The state is 4 bytes; no
// allocation except through `out`.
class Utf8Decoder {
 public:
  void push(uint8_t byte, std::string& out);
  void push(std::string_view bytes, std::string& out) {
    for (char c : bytes) push(static_cast<uint8_t>(c), out);
  }
  void finish(std::string& out);
  bool pending() const { return needed_ != 0; }

 private:
  void reset() {
    needed_ = 0;
    seen_ = 0;
    lower_ = 0x80;
    upper_ = 0xBF;
  }
  uint32_t code_point_ = 0;
  uint8_t needed_ = 0;
  uint8_t seen_ = 0;
  uint8_t lower_ = 0x80;
  uint8_t upper_ = 0xBF;
  char buffer_[4] = {};  // the bytes of the pending sequence, copied out when it completes
};

// True if `text` is well-formed UTF-8 (no surrogates, no overlongs, <= U+10FFFF).
bool is_valid_utf8(std::string_view text);

// `text` with every ill-formed subpart replaced by U+FFFD (the WHATWG rule). Returns a view of
// `text` itself when it is already valid (the common case, no copy), else a view of `storage`.
std::string_view to_valid_utf8(std::string_view text, std::string& storage);

// Decodes the code point starting at text[pos] of valid UTF-8 and returns its length in bytes.
inline int utf8_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}
char32_t decode_utf8_at(std::string_view valid_text, std::size_t pos, int* length);

}  // namespace flint::text
