#include "text/json_schema_coerce.h"

#include <cmath>
#include <cstdint>

#include <fmt/format.h>

#include "text/marker_scan.h"
#include "text/py_json.h"

namespace flint {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::size_t kMaxNestedCoerceBytes = 64 * 1024;
constexpr int kMaxSchemaDepth = 32;

// JSON types a schema allows, as bits; kAny when it says nothing.
enum TypeBit : unsigned {
  kString = 1,
  kInteger = 2,
  kNumber = 4,
  kBoolean = 8,
  kNull = 16,
  kObject = 32,
  kArray = 64,
};
constexpr unsigned kAny = 127;

unsigned type_bit(std::string_view name) {
  if (name == "string") return kString;
  if (name == "integer") return kInteger;
  if (name == "number") return kNumber;
  if (name == "boolean") return kBoolean;
  if (name == "null") return kNull;
  if (name == "object") return kObject;
  if (name == "array") return kArray;
  return kAny;  // unknown type names: do not constrain
}

unsigned value_bit(const Json& value) {
  switch (value.type()) {
    case Json::value_t::string:
      return kString;
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return kInteger;
    case Json::value_t::number_float:
      return kNumber;
    case Json::value_t::boolean:
      return kBoolean;
    case Json::value_t::null:
      return kNull;
    case Json::value_t::object:
      return kObject;
    case Json::value_t::array:
      return kArray;
    default:
      return kAny;
  }
}

unsigned allowed_types(const Json* schema, int depth = 0) {
  if (schema == nullptr || !schema->is_object() || depth > kMaxSchemaDepth) return kAny;
  if (auto it = schema->find("type"); it != schema->end()) {
    if (it->is_string()) return type_bit(it->get_ref<const std::string&>());
    if (it->is_array()) {
      unsigned bits = 0;
      for (const auto& t : *it)
        bits |= t.is_string() ? type_bit(t.get_ref<const std::string&>()) : kAny;
      return bits == 0 ? kAny : bits;
    }
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    if (auto it = schema->find(key); it != schema->end() && it->is_array() && !it->empty()) {
      unsigned bits = 0;
      for (const auto& branch : *it) bits |= allowed_types(&branch, depth + 1);
      return bits;
    }
  }
  if (auto it = schema->find("enum"); it != schema->end() && it->is_array() && !it->empty()) {
    unsigned bits = 0;
    for (const auto& v : *it)
      bits |= value_bit(v) == kInteger ? (kInteger | kNumber) : value_bit(v);
    return bits;
  }
  if (auto it = schema->find("const"); it != schema->end()) return value_bit(*it);
  if (schema->contains("properties")) return kObject;
  if (schema->contains("items")) return kArray;
  return kAny;
}

bool fits(const Json& value, unsigned allowed) {
  const unsigned bit = value_bit(value);
  if (allowed & bit) return true;
  if (bit == kInteger && (allowed & kNumber)) return true;
  if (bit == kNumber && (allowed & kInteger)) {  // 5.0 passes as an integer
    const double d = value.get<double>();
    return std::isfinite(d) && d == std::floor(d);
  }
  return false;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && is_ascii_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_ascii_space(text.back())) text.remove_suffix(1);
  return text;
}

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i] >= 'A' && a[i] <= 'Z' ? static_cast<char>(a[i] + 32) : a[i];
    if (x != b[i]) return false;
  }
  return true;
}

Json parse_json(std::string_view text) { return parse_json_text(text); }

bool coerce_nested(Json& value, const Json* schema, int depth);

// object[key], or nullptr when `object` is not an object or has no such key.
const Json* member_of(const Json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  for (const auto& [k, v] : object.items()) {
    if (k == key) return &v;
  }
  return nullptr;
}

// A schema's "properties" object, or nullptr.
const Json* property_map(const Json& schema) {
  const Json* props = member_of(schema, "properties");
  return props != nullptr && props->is_object() ? props : nullptr;
}

// The text read as a value of one of the non-string types `schema` allows (objects and arrays
// converted inside too); nullopt if none fits.
std::optional<Json> convert_text(std::string_view text, const Json* schema, int depth = 0) {
  const unsigned allowed = allowed_types(schema);
  text = trim(text);
  if (text.empty()) return std::nullopt;
  if (allowed & kBoolean) {
    if (equals_ignoring_case(text, "true")) return Json(true);
    if (equals_ignoring_case(text, "false")) return Json(false);
  }
  if ((allowed & kNull) && (text == "null" || text == "None")) return Json(nullptr);
  if (allowed & (kInteger | kNumber | kObject | kArray)) {
    Json value = parse_json(text);
    if (!value.is_discarded() && !value.is_string() && fits(value, allowed & ~kString)) {
      if (text.size() <= kMaxNestedCoerceBytes) coerce_nested(value, schema, depth + 1);
      return value;
    }
  }
  return std::nullopt;
}

// Converts string leaves to the types their schemas ask for, in place. True if anything changed.
bool coerce_nested(Json& value, const Json* schema, int depth) {
  if (schema == nullptr || !schema->is_object() || depth > kMaxSchemaDepth) return false;
  const unsigned allowed = allowed_types(schema);
  if (value.is_string()) {
    if (allowed & kString) return false;
    if (auto converted = convert_text(value.get_ref<const std::string&>(), schema, depth)) {
      value = std::move(*converted);
      return true;
    }
    return false;
  }
  bool changed = false;
  if (value.is_object()) {
    const Json* props = property_map(*schema);
    if (props == nullptr) return false;
    for (auto it = value.begin(); it != value.end(); ++it) {
      if (const Json* child = member_of(*props, it.key())) {
        changed = coerce_nested(it.value(), child, depth + 1) || changed;
      }
    }
  } else if (value.is_array()) {
    auto items = schema->find("items");
    if (items == schema->end() || !items->is_object()) return false;
    for (auto& item : value) changed = coerce_nested(item, &*items, depth + 1) || changed;
  }
  return changed;
}

// py_json_dumps, falling back to `fallback` for values nested too deeply to serialise.
std::string dumps_or(const Json& value, std::string_view fallback) {
  try {
    return py_json_dumps(value);
  } catch (const std::exception&) {
    return std::string(fallback);
  }
}

std::string json_string(std::string_view text) {
  std::string out;
  append_py_json_string(out, text);
  return out;
}

}  // namespace

const Json* property_schema(const Json& parameters, std::string_view name) {
  const Json* props = property_map(parameters);
  return props == nullptr ? nullptr : member_of(*props, name);
}

bool schema_allows_string(const Json* schema) { return (allowed_types(schema) & kString) != 0; }

std::string dsml_value_to_json(std::string_view raw, DsmlValueKind kind, const Json* schema,
                               std::string_view param, std::vector<std::string>& warnings) {
  const unsigned allowed = allowed_types(schema);
  const bool has_schema = allowed != kAny;

  if (kind == DsmlValueKind::kString) {
    if (allowed & kString) return json_string(raw);
    if (auto converted = convert_text(raw, schema)) return dumps_or(*converted, json_string(raw));
    warnings.push_back(fmt::format(
        "parameter '{}': string value does not match the schema; kept as a string", param));
    return json_string(raw);
  }

  const std::string_view text = trim(raw);
  Json value = parse_json(text);
  if (value.is_discarded()) {
    if (has_schema && !(allowed & kString)) {
      if (auto converted = convert_text(text, schema)) return dumps_or(*converted, text);
    }
    if (kind == DsmlValueKind::kJson && !(has_schema && (allowed & kString))) {
      warnings.push_back(fmt::format(
          "parameter '{}': string=\"false\" value is not valid JSON; kept as a string", param));
    }
    return json_string(raw);
  }
  if (!has_schema) return std::string(text);
  if (!fits(value, allowed)) {
    if (allowed & kString) return json_string(raw);  // e.g. an unquoted number for a string
    if (value.is_string()) {
      if (auto converted = convert_text(value.get_ref<const std::string&>(), schema)) {
        return dumps_or(*converted, text);
      }
    }
    warnings.push_back(
        fmt::format("parameter '{}': value does not match the schema; kept as written", param));
    return std::string(text);
  }
  if ((value.is_object() || value.is_array()) && text.size() <= kMaxNestedCoerceBytes &&
      coerce_nested(value, schema, 0)) {
    return dumps_or(value, text);
  }
  return std::string(text);
}

}  // namespace flint
