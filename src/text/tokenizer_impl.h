// Internal state of text::Tokenizer, shared by tokenizer.cpp (encode / decode) and
// tokenizer_load.cpp (building it from tokenizer.json). Not part of the public interface.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/added_tokens.h"
#include "text/bpe.h"
#include "text/pre_tokenizer.h"
#include "text/tokenizer.h"

namespace flint::text {

struct Tokenizer::Impl {
  // kWholeUtf8: the token's bytes are valid UTF-8 on their own, so a decoder with nothing
  // pending can copy them instead of decoding byte by byte.
  enum Flag : uint8_t { kValid = 1, kAdded = 2, kSpecial = 4, kWholeUtf8 = 8 };

  struct StringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  // Indexed by id (size = vocab_size()).
  std::vector<std::string> spelling;  // as in tokenizer.json
  std::vector<std::string> bytes;     // decoded bytes (byte-level tokens) or content (added)
  std::vector<uint8_t> flags;
  // Spelling -> id: the vocabulary, then added tokens (which win, as in the reference).
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> ids;

  AddedTokenMatcher added;
  PreTokenizer pre_tokenizer;
  BpeModel bpe;

  int32_t bos = kNoToken;
  int32_t eos = kNoToken;
  bool add_bos = false;
  bool add_eos = false;
  bool clean_up_spaces = false;
  int64_t model_max_length = 0;

  // Appends the bytes of byte-level token `index` through `utf8`.
  void append_bytes(std::size_t index, Utf8Decoder& utf8, std::string& out) const {
    if ((flags[index] & kWholeUtf8) && !utf8.pending()) {
      out += bytes[index];
    } else {
      utf8.push(bytes[index], out);
    }
  }

  bool has_flag(int32_t id, Flag flag) const {
    return id >= 0 && static_cast<std::size_t>(id) < flags.size() &&
           (flags[static_cast<std::size_t>(id)] & flag) != 0;
  }
};

// The reference's clean_up_tokenization (" ." -> ".", " n't" -> "n't", ...), in place.
void clean_up_tokenization(std::string& text);

}  // namespace flint::text
