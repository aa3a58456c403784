#include "text/added_tokens.h"

#include <algorithm>

#include "text/byte_level.h"

namespace flint::text {

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  nodes_.emplace_back();  // root
  for (std::size_t t = 0; t < tokens_.size(); ++t) {
    const std::string& content = tokens_[t].content;
    if (content.empty()) continue;
    any_strip_ = any_strip_ || tokens_[t].lstrip || tokens_[t].rstrip;
    can_start_[static_cast<uint8_t>(content[0])] = true;
    int32_t node = 0;
    for (char c : content) {
      auto byte = static_cast<uint8_t>(c);
      int32_t next = child(node, byte);
      if (next < 0) {
        next = static_cast<int32_t>(nodes_.size());
        nodes_.emplace_back();
        auto& children = nodes_[static_cast<std::size_t>(node)].children;
        children.insert(
            std::upper_bound(children.begin(), children.end(), std::make_pair(byte, int32_t{-1})),
            {byte, next});
      }
      node = next;
    }
    // A later duplicate of the same content wins, as in the reference's Map.
    nodes_[static_cast<std::size_t>(node)].token_index = static_cast<int32_t>(t);
  }
}

int32_t AddedTokenMatcher::child(int32_t node, uint8_t byte) const {
  for (const auto& [b, next] : nodes_[static_cast<std::size_t>(node)].children) {
    if (b == byte) return next;
    if (b > byte) break;
  }
  return -1;
}

void AddedTokenMatcher::split(std::string_view text, std::vector<TextSection>& out,
                              std::span<const TextSpan> literal) const {
  out.clear();
  std::size_t start = 0;  // start of the pending plain text
  std::size_t i = 0;
  const std::size_t n = text.size();
  std::size_t next_literal = 0;  // the first literal span not wholly before i
  while (i < n) {
    while (next_literal < literal.size() && literal[next_literal].end <= i) ++next_literal;
    if (next_literal < literal.size() && literal[next_literal].begin <= i) {
      i = literal[next_literal].end;  // client text: no control tokens inside
      continue;
    }
    if (!can_start_[static_cast<uint8_t>(text[i])]) {
      ++i;
      continue;
    }
    // A match must end before the next literal span begins.
    const std::size_t limit =
        next_literal < literal.size() ? std::min(n, literal[next_literal].begin) : n;
    int32_t node = 0, best = -1;
    std::size_t best_end = 0;
    for (std::size_t j = i; j < limit; ++j) {
      node = child(node, static_cast<uint8_t>(text[j]));
      if (node < 0) break;
      int32_t token = nodes_[static_cast<std::size_t>(node)].token_index;
      if (token >= 0) {
        best = token;
        best_end = j + 1;
      }
    }
    if (best < 0) {
      ++i;
      continue;
    }
    if (i > start) out.push_back({text.substr(start, i - start), -1});
    out.push_back({text.substr(i, best_end - i), best});
    i = start = best_end;
  }
  if (start < n) out.push_back({text.substr(start), -1});
  if (!any_strip_) return;

  for (std::size_t k = 0; k < out.size(); ++k) {
    if (out[k].token_index < 0) continue;
    const AddedToken& token = tokens_[static_cast<std::size_t>(out[k].token_index)];
    if (token.lstrip && k > 0 && out[k - 1].token_index < 0)
      out[k - 1].text = js_trim_end(out[k - 1].text);
    if (token.rstrip && k + 1 < out.size() && out[k + 1].token_index < 0)
      out[k + 1].text = js_trim_start(out[k + 1].text);
  }
  std::erase_if(out, [](const TextSection& s) { return s.token_index < 0 && s.text.empty(); });
}

bool is_js_whitespace(char32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
    case 0xFEFF:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

std::string_view js_trim_start(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    int len = 0;
    if (!is_js_whitespace(decode_utf8_at(text, i, &len))) break;
    i += static_cast<std::size_t>(len);
  }
  return text.substr(i);
}

std::string_view js_trim_end(std::string_view text) {
  std::size_t end = text.size();
  while (end > 0) {
    std::size_t begin = end - 1;
    while (begin > 0 && (static_cast<uint8_t>(text[begin]) & 0xC0) == 0x80) --begin;
    int len = 0;
    if (!is_js_whitespace(decode_utf8_at(text, begin, &len))) break;
    end = begin;
  }
  return text.substr(0, end);
}

}  // namespace flint::text
