#include "server/json_fields.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "server/api_error.h"
#include "text/py_json.h"

namespace flint::server {

namespace {

std::string path_of(std::string_view path, std::string_view key) {
  return path.empty() ? std::string(key) : join_path(path, key);
}

[[noreturn]] void wrong_type(std::string_view path, std::string_view key, std::string_view want,
                             const Json& got) {
  const std::string p = path_of(path, key);
  throw ApiError(400, p, "{}: expected {}, got {}", p, want, json_type_name(got));
}

}  // namespace

Json parse_body(std::string_view body) {
  Json value = parse_json_text(body);
  if (value.is_discarded()) {
    throw ApiError(400, "", "the request body is not valid JSON");
  }
  if (!value.is_object()) {
    throw ApiError(400, "", "the request body must be a JSON object, got {}", json_type_name(value));
  }
  return value;
}

std::string join_path(std::string_view parent, std::string_view key) {
  return parent.empty() ? std::string(key) : fmt::format("{}.{}", parent, key);
}

std::string join_path(std::string_view parent, std::size_t index) {
  return fmt::format("{}[{}]", parent, index);
}

const Json* field(const Json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<std::string> get_string(const Json& object, std::string_view key,
                                      std::string_view path) {
  const Json* v = field(object, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) wrong_type(path, key, "a string", *v);
  return v->get<std::string>();
}

std::optional<bool> get_bool(const Json& object, std::string_view key, std::string_view path) {
  const Json* v = field(object, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) wrong_type(path, key, "a boolean", *v);
  return v->get<bool>();
}

std::optional<int64_t> get_int(const Json& object, std::string_view key, std::string_view path) {
  const Json* v = field(object, key);
  if (v == nullptr) return std::nullopt;
  if (v->is_number_integer()) {
    if (v->is_number_unsigned() &&
        v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      const std::string p = path_of(path, key);
      throw ApiError(400, p, "{}: {} is too large", p, v->get<uint64_t>());
    }
    return v->get<int64_t>();
  }
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e18) {
      return static_cast<int64_t>(d);
    }
  }
  wrong_type(path, key, "an integer", *v);
}

std::optional<double> get_number(const Json& object, std::string_view key,
                                 std::string_view path) {
  const Json* v = field(object, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) wrong_type(path, key, "a number", *v);
  return v->get<double>();
}

std::optional<std::vector<std::string>> get_string_or_list(const Json& object,
                                                           std::string_view key,
                                                           std::string_view path) {
  const Json* v = field(object, key);
  if (v == nullptr) return std::nullopt;
  if (v->is_string()) return std::vector<std::string>{v->get<std::string>()};
  if (!v->is_array()) wrong_type(path, key, "a string or a list of strings", *v);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string()) {
      const std::string p = join_path(path_of(path, key), i);
      throw ApiError(400, p, "{}: expected a string, got {}", p, json_type_name((*v)[i]));
    }
    out.push_back((*v)[i].get<std::string>());
  }
  return out;
}

const Json* get_object(const Json& object, std::string_view key, std::string_view path) {
  const Json* v = field(object, key);
  if (v != nullptr && !v->is_object()) wrong_type(path, key, "an object", *v);
  return v;
}

const Json* get_array(const Json& object, std::string_view key, std::string_view path) {
  const Json* v = field(object, key);
  if (v != nullptr && !v->is_array()) wrong_type(path, key, "an array", *v);
  return v;
}

std::string_view json_type_name(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::boolean:
      return "boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return "integer";
    case Json::value_t::number_float:
      return "number";
    case Json::value_t::string:
      return "string";
    case Json::value_t::array:
      return "array";
    case Json::value_t::object:
      return "object";
    default:
      return "an unsupported value";
  }
}

std::string dump_json(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace flint::server
