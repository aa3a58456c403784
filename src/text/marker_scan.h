// Helpers for streaming parsers that look for fixed markers in text arriving in pieces.
//
// The one rule that keeps a streaming parser's output independent of how the text is cut:
// never decide on a position whose outcome could still change with more text. A suffix that
// is the beginning of a marker is held back until it either completes the marker or cannot.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

namespace flint {

struct MarkerHit {
  std::size_t pos = 0;  // where the marker (or the held-back partial marker) begins
  int marker = -1;      // index into `markers` of the marker at pos; -1 when none was found
};

// The earliest position in text[from:] where a marker starts, with markers tried in list
// order at each position. When a marker's proper prefix runs to the end of `text` before any
// full match (or ahead of a full match listed later at the same position), returns
// {start of that prefix, -1}: the caller must wait for more text. Without either, returns
// {text.size(), -1}. Cost: O(|text| x |markers|) worst case, O(|text|) when text has few
// first characters of markers.
MarkerHit find_first_marker(std::string_view text, std::span<const std::string_view> markers,
                            std::size_t from = 0);

enum class TagMatch { kNone, kPartial, kFull };

// Whether `text` begins with `tag` (kFull), is a proper prefix of it (kPartial) or neither.
TagMatch match_tag(std::string_view text, std::string_view tag);

// The longest prefix of `text` that does not end inside an incomplete UTF-8 sequence (a lead
// byte followed by fewer continuation bytes than it announces). Invalid bytes are not held.
std::size_t utf8_complete_prefix(std::string_view text);

inline bool is_ascii_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

}  // namespace flint
