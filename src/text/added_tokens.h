// Added tokens (tokenizer.json "added_tokens"): strings such as "<｜User｜>" or "<think>" that
// are cut out of the text before pre-tokenization and map to one id each.
//
// Matching follows the reference tokenizer (transformers.js DictionarySplitter): scanning left
// to right, at each position the longest added token starting there wins; otherwise the scan
// moves on by one character. All added tokens are matched, special or not. lstrip / rstrip
// trim JavaScript whitespace from the neighbouring text. single_word is not supported (the
// reference ignores it; tokenizer loading rejects it).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "text/text_span.h"

namespace flint::text {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
};

// One piece of the input: either plain text (token_index < 0) or an added token.
struct TextSection {
  std::string_view text;     // a view into the caller's input
  int32_t token_index = -1;  // index into AddedTokenMatcher::tokens(), or -1 for plain text
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);

  const std::vector<AddedToken>& tokens() const { return tokens_; }

  // Splits valid UTF-8 `text` into plain sections and added tokens, applies lstrip/rstrip and
  // drops empty plain sections. Appends to `out` (cleared first). O(len * longest token) in the
  // worst case; positions whose byte cannot start a token are skipped in O(1).
  // No token is matched that overlaps one of `literal` (sorted, disjoint byte ranges of
  // `text`): added-token strings there stay plain text.
  void split(std::string_view text, std::vector<TextSection>& out,
             std::span<const TextSpan> literal = {}) const;

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;  // sorted by byte
    int32_t token_index = -1;
  };
  int32_t child(int32_t node, uint8_t byte) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> nodes_;
  bool can_start_[256] = {};
  bool any_strip_ = false;
};

// JavaScript String.prototype.trimStart / trimEnd on valid UTF-8 (the \s set of js_regex.h).
std::string_view js_trim_start(std::string_view text);
std::string_view js_trim_end(std::string_view text);
bool is_js_whitespace(char32_t cp);

}  // namespace flint::text
