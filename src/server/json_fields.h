// Typed access to the fields of a JSON request body, parsed once at the HTTP edge.
//
// Every getter names the field's JSON path in its ApiError (400), so a client learns which
// field is wrong: "temperature: expected a number, got string". null counts as absent (OpenAI's
// clients send explicit nulls for unset options). Bodies are nlohmann::ordered_json: key order
// matters where JSON reaches the prompt (tool schemas), see text/chat_types.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace flint::server {

using Json = nlohmann::ordered_json;

// The request body as a JSON object; ApiError 400 if it is not valid JSON or not an object.
Json parse_body(std::string_view body);

// "a.b", "a[3]": paths for messages.
std::string join_path(std::string_view parent, std::string_view key);
std::string join_path(std::string_view parent, std::size_t index);

// The field `key` of `object` (a JSON object), nullptr when absent or null.
const Json* field(const Json& object, std::string_view key);

std::optional<std::string> get_string(const Json& object, std::string_view key,
                                      std::string_view path = {});
std::optional<bool> get_bool(const Json& object, std::string_view key, std::string_view path = {});
// Integers: a JSON integer, or a float with an integral value (2.0); else ApiError.
std::optional<int64_t> get_int(const Json& object, std::string_view key,
                               std::string_view path = {});
std::optional<double> get_number(const Json& object, std::string_view key,
                                 std::string_view path = {});
// A string or a list of strings ("stop": "x" or ["x", "y"]).
std::optional<std::vector<std::string>> get_string_or_list(const Json& object,
                                                           std::string_view key,
                                                           std::string_view path = {});
// An object / array, or nullptr when absent or null; ApiError for another type.
const Json* get_object(const Json& object, std::string_view key, std::string_view path = {});
const Json* get_array(const Json& object, std::string_view key, std::string_view path = {});

// "string", "number", "object", ... for messages.
std::string_view json_type_name(const Json& value);

// Compact JSON text for a response body or an SSE event. Text that is not valid UTF-8 (a
// token's bytes in logprobs) is written with U+FFFD instead of failing.
std::string dump_json(const Json& value);

}  // namespace flint::server
