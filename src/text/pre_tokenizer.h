// Pre-tokenization: splitting text into the words that BPE merges independently.
//
// Supported tokenizer.json "pre_tokenizer" forms (anything else is rejected when loading):
//   - {"type": "Sequence", "pretokenizers": [Split..., ByteLevel]}
//   - {"type": "ByteLevel", ...} alone
// where Split is {"type": "Split", "pattern": {"Regex": ...} | {"String": ...},
// "behavior": "Isolated", "invert": false} and ByteLevel has "add_prefix_space": false.
// DeepSeek's is three Splits (digit runs of 1-3, CJK runs, the letters/punctuation/whitespace
// pattern) and then ByteLevel with use_regex false.
//
// Each Split cuts every current piece into its matches and the text between them (the
// reference's "Isolated" behaviour: nothing is dropped). ByteLevel with use_regex true further
// keeps only the matches of the GPT-2 pattern; with use_regex false it only re-spells bytes,
// which flint does not need to do (BPE works on raw bytes).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "text/js_regex.h"

namespace flint::text {

class PreTokenizer {
 public:
  PreTokenizer() = default;
  // Parses and validates the "pre_tokenizer" value; `what` prefixes error messages
  // (e.g. "tokenizer.json field pre_tokenizer").
  static PreTokenizer from_json(const nlohmann::json& config, std::string_view what);

  // Appends the words of valid UTF-8 `text` to `out` as views into `text`. Words are non-empty
  // and, concatenated, give `text` back (unless a ByteLevel regex drops unmatched text).
  void split(std::string_view text, std::vector<std::string_view>& out) const;

  std::size_t split_count() const { return splits_.size(); }

 private:
  void add_split(const nlohmann::json& config, const std::string& what);
  void add_byte_level(const nlohmann::json& config, const std::string& what);

  std::vector<JsRegex> splits_;      // "Isolated" splits, applied in order
  std::vector<JsRegex> byte_level_;  // zero or one GPT-2 pattern (ByteLevel use_regex)
};

}  // namespace flint::text
