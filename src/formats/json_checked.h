// JSON parsing for the files flint reads at its edges (safetensors headers, checkpoint
// indexes), with the one check nlohmann::json does not make: duplicate object keys.
// nlohmann keeps one of two equal keys silently; a checkpoint naming a tensor twice must
// be an error instead.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace flint {

struct CheckedJson {
  nlohmann::json value;
  // Keys from the root to the first key that appeared twice in its object (the last
  // element is that key); empty when every object's keys are distinct. Array levels
  // appear as "[]".
  std::vector<std::string> duplicate_path;
  // The keys of the root object in the order they appear in the text (nlohmann::json
  // sorts them). Empty when the root is not an object.
  std::vector<std::string> root_keys;
};

// Parses `text` (which must be exactly one JSON value, surrounding whitespace allowed).
// Throws flint::Error "<label>: <what> is not valid JSON: <reason>" on a syntax error or
// invalid UTF-8. Cost: like nlohmann::json::parse, O(|text| * log(keys per object)).
CheckedJson parse_json_checked(std::string_view text, const std::string& label,
                               std::string_view what);

// `text` with control characters replaced by '?', for quoting names from files in messages.
std::string printable(std::string_view text);

}  // namespace flint
