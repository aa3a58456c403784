// Small string helpers shared by the command line, config and loader.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace flint {

std::vector<std::string> split(std::string_view text, char separator);
std::string join(std::span<const std::string> parts, std::string_view separator);
bool starts_with(std::string_view text, std::string_view prefix);
bool ends_with(std::string_view text, std::string_view suffix);

// Levenshtein distance (insert, delete, substitute each cost 1). O(|a| * |b|).
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word` by edit distance, or "" when none is close enough
// (distance above max(2, |word| / 3)). Used for "did you mean" suggestions.
std::string closest_match(std::string_view word, std::span<const std::string> candidates);

// Parses "0,15,27" (spaces allowed, empty list allowed) into integers; throws flint::Error
// naming `what` and the bad item.
std::vector<int64_t> parse_int_list(std::string_view text, std::string_view what);

// "1.50 GiB", "12.0 MiB", "512 B".
std::string format_bytes(double bytes);

}  // namespace flint
