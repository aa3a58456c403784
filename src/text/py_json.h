// JSON text exactly as Python's json.dumps(value, ensure_ascii=False) writes it, which is what
// DeepSeek's reference encoder uses for tool schemas and tool-call arguments. The prompt must
// match it byte for byte, so nlohmann's own dump() (no spaces, different float format) is not
// usable for anything that reaches the model.
//
// Differences from nlohmann::dump(): separators are ", " and ": "; floats use Python's repr()
// (shortest round trip, exponent form outside 1e-4 <= |x| < 1e16, always a ".0" or exponent);
// non-ASCII text is written as UTF-8 bytes; control characters use lowercase \u00xx escapes.
// Key order is the object's iteration order, so use nlohmann::ordered_json (insertion order, like
// a Python dict).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace flint {

// Appends `text` as a JSON string literal (with the quotes). Cost: one pass over `text`.
void append_py_json_string(std::string& out, std::string_view text);

// Appends the escaped body of a JSON string literal (no quotes). A byte that is not part of
// well-formed UTF-8 becomes U+FFFD (Python strings cannot hold such bytes; this keeps the output
// valid JSON). Escaping a text in pieces gives the same bytes as escaping it whole as long as
// no piece ends inside a multi-byte sequence (see utf8_complete_prefix in marker_scan.h).
void append_py_json_escaped(std::string& out, std::string_view text);

// Python's repr() of a float ("1.0", "1e-05", "1e+16", "Infinity", "NaN").
std::string py_float_repr(double value);

// Parses JSON text; a discarded value (is_discarded()) when it is not valid JSON, including
// text with a NUL byte (nlohmann's parser would stop there and accept a valid prefix). Unlike
// Python's json.loads it rejects NaN and Infinity. Never throws for bad input.
nlohmann::ordered_json parse_json_text(std::string_view text);

// json.dumps(value, ensure_ascii=False). Throws flint::Error when nested deeper than 1000
// levels (Python raises RecursionError there too). Cost: linear in the output.
std::string py_json_dumps(const nlohmann::ordered_json& value);
void append_py_json(std::string& out, const nlohmann::ordered_json& value);

}  // namespace flint
