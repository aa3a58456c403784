#include "base/strings.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "base/error.h"

namespace flint {

std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    std::size_t end = text.find(separator, start);
    parts.emplace_back(text.substr(start, end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return parts;
}

std::string join(std::span<const std::string> parts, std::string_view separator) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += separator;
    out += parts[i];
  }
  return out;
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.starts_with(prefix);
}
bool ends_with(std::string_view text, std::string_view suffix) { return text.ends_with(suffix); }

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string closest_match(std::string_view word, std::span<const std::string> candidates) {
  std::size_t best = static_cast<std::size_t>(-1);
  std::string best_word;
  for (const auto& candidate : candidates) {
    std::size_t d = edit_distance(word, candidate);
    if (d < best) {
      best = d;
      best_word = candidate;
    }
  }
  std::size_t limit = std::max<std::size_t>(2, word.size() / 3);
  return best <= limit ? best_word : std::string();
}

std::vector<int64_t> parse_int_list(std::string_view text, std::string_view what) {
  std::vector<int64_t> values;
  auto trimmed = [](std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
  };
  if (trimmed(text).empty()) return values;
  for (const auto& part : split(text, ',')) {
    std::string_view item = trimmed(part);
    int64_t value = 0;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size()) {
      throw Error("{}: '{}' is not an integer (expected a comma-separated list like 0,15,27)", what,
                  item);
    }
    values.push_back(value);
  }
  return values;
}

std::string format_bytes(double bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024.0 && unit < 4) {
    bytes /= 1024.0;
    ++unit;
  }
  if (unit == 0) return fmt::format("{:.0f} B", bytes);
  return fmt::format("{:.2f} {}", bytes, kUnits[unit]);
}

}  // namespace flint
