// Turning a DSML parameter value into the JSON the client expects, guided by the tool's JSON
// schema. DeepSeek-V4 writes string parameters raw (string="true") and everything else as JSON
// (string="false"); a model sometimes picks the wrong flag or writes "5" for an integer. The
// rules, in short:
// - string="true": a string, unless the schema does not allow strings; then the text is
//   converted to an allowed type ("5" -> 5, "true" -> true, "[1]" -> [1]) when it can be.
// - string="false": JSON. When it is not valid JSON, or is valid JSON of a type the schema
//   forbids while the schema allows strings, the raw text becomes a string.
// - Inside objects and arrays, string leaves are converted the same way where the schema of
//   that property (properties / items) forbids strings.
// - Values that still do not fit are kept as they are, with a warning; nothing is dropped.
// The schema subset understood: type (string or list), anyOf/oneOf (union), enum, const,
// properties, items. Everything else is ignored.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flint {

// What the string="..." attribute said.
enum class DsmlValueKind { kString, kJson, kUnspecified };

// The property schema of parameter `name` in a tool's parameters schema, or nullptr.
const nlohmann::ordered_json* property_schema(const nlohmann::ordered_json& parameters,
                                              std::string_view name);

// Whether a schema lets a value be a string (true for a null/absent or untyped schema).
bool schema_allows_string(const nlohmann::ordered_json* schema);

// The parameter value as JSON text for the arguments object. Keeps the model's own JSON text
// when it is valid and fits the schema (so big integers and number formats survive);
// otherwise serialises the converted value like Python's json.dumps. Appends human-readable
// notes to `warnings` naming `param`. Cost: linear in the value, plus a DOM parse only when a
// conversion is needed (nested conversion is skipped for values over 64 KiB).
std::string dsml_value_to_json(std::string_view raw, DsmlValueKind kind,
                               const nlohmann::ordered_json* schema, std::string_view param,
                               std::vector<std::string>& warnings);

}  // namespace flint
