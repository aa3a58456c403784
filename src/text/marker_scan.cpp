#include "text/marker_scan.h"

namespace flint {

TagMatch match_tag(std::string_view text, std::string_view tag) {
  if (text.size() >= tag.size()) return text.starts_with(tag) ? TagMatch::kFull : TagMatch::kNone;
  return tag.starts_with(text) ? TagMatch::kPartial : TagMatch::kNone;
}

MarkerHit find_first_marker(std::string_view text, std::span<const std::string_view> markers,
                            std::size_t from) {
  // A 256-bit set of the markers' first bytes lets most positions be skipped at once.
  bool first_byte[256] = {};
  for (auto marker : markers) {
    if (!marker.empty()) first_byte[static_cast<unsigned char>(marker[0])] = true;
  }
  for (std::size_t i = from; i < text.size(); ++i) {
    if (!first_byte[static_cast<unsigned char>(text[i])]) continue;
    const std::string_view rest = text.substr(i);
    for (std::size_t m = 0; m < markers.size(); ++m) {
      switch (match_tag(rest, markers[m])) {
        case TagMatch::kFull:
          return {i, static_cast<int>(m)};
        case TagMatch::kPartial:
          return {i, -1};
        case TagMatch::kNone:
          break;
      }
    }
  }
  return {text.size(), -1};
}

std::size_t utf8_complete_prefix(std::string_view text) {
  // Look back at most 3 bytes for the lead byte of the last sequence.
  const std::size_t n = text.size();
  for (std::size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(text[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    std::size_t need = 0;
    if ((c & 0xE0) == 0xC0)
      need = 2;
    else if ((c & 0xF0) == 0xE0)
      need = 3;
    else if ((c & 0xF8) == 0xF0)
      need = 4;
    else
      return n;  // ASCII or an invalid byte: nothing to hold
    return back < need ? n - back : n;
  }
  return n;
}

}  // namespace flint
