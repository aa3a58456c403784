#include "text/py_json.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "base/error.h"

namespace flint {
namespace {

constexpr int kMaxDepth = 1000;

void append_value(std::string& out, const nlohmann::ordered_json& value, int depth) {
  using Type = nlohmann::ordered_json::value_t;
  if (depth > kMaxDepth) throw Error("JSON value nested deeper than {} levels", kMaxDepth);
  switch (value.type()) {
    case Type::null:
    case Type::discarded:
      out += "null";
      return;
    case Type::boolean:
      out += value.get<bool>() ? "true" : "false";
      return;
    case Type::number_integer:
      out += std::to_string(value.get<int64_t>());
      return;
    case Type::number_unsigned:
      out += std::to_string(value.get<uint64_t>());
      return;
    case Type::number_float:
      out += py_float_repr(value.get<double>());
      return;
    case Type::string:
      append_py_json_string(out, value.get_ref<const std::string&>());
      return;
    case Type::binary:
      throw Error("binary values have no JSON form");
    case Type::array: {
      out += '[';
      bool first = true;
      for (const auto& item : value) {
        if (!first) out += ", ";
        first = false;
        append_value(out, item, depth + 1);
      }
      out += ']';
      return;
    }
    case Type::object: {
      out += '{';
      bool first = true;
      for (auto it = value.begin(); it != value.end(); ++it) {
        if (!first) out += ", ";
        first = false;
        append_py_json_string(out, it.key());
        out += ": ";
        append_value(out, it.value(), depth + 1);
      }
      out += '}';
      return;
    }
  }
}

}  // namespace

// Length of the well-formed UTF-8 sequence starting at text[i] (Unicode table 3-7: no
// overlong forms, no surrogates, nothing above U+10FFFF), or 0 if the byte there starts none.
std::size_t utf8_sequence_length(std::string_view text, std::size_t i) {
  const auto b0 = static_cast<unsigned char>(text[i]);
  std::size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3;
    if (b0 == 0xE0) low = 0xA0;
    if (b0 == 0xED) high = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4;
    if (b0 == 0xF0) low = 0x90;
    if (b0 == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (std::size_t k = 1; k < length; ++k) {
    const auto b = static_cast<unsigned char>(text[i + k]);
    if (k == 1 ? (b < low || b > high) : (b < 0x80 || b > 0xBF)) return 0;
  }
  return length;
}

void append_py_json_escaped(std::string& out, std::string_view text) {
  std::size_t run = 0;  // start of the current run of bytes that need no escape
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const std::size_t length = utf8_sequence_length(text, i);
      if (length > 0) {
        i += length - 1;
        continue;
      }
      out.append(text.substr(run, i - run));
      out += "\xEF\xBF\xBD";  // U+FFFD for a byte that is not UTF-8
      run = i + 1;
      continue;
    }
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(text.substr(run, i - run));
    run = i + 1;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default: {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      }
    }
  }
  out.append(text.substr(run));
}

void append_py_json_string(std::string& out, std::string_view text) {
  out.reserve(out.size() + text.size() + 2);
  out += '"';
  append_py_json_escaped(out, text);
  out += '"';
}

std::string py_float_repr(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  // Shortest digits that round-trip, as "d.ddde+XX"; Python's repr uses the same digits.
  char buf[64];
  auto result = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<std::size_t>(result.ptr - buf));
  std::string out;
  if (!sci.empty() && sci[0] == '-') {
    out += '-';
    sci.remove_prefix(1);
  }
  const std::size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos)) {
    if (c != '.') digits += c;
  }
  int exponent = 0;
  std::from_chars(sci.data() + e_pos + (sci[e_pos + 1] == '+' ? 2 : 1), sci.data() + sci.size(),
                  exponent);
  // decpt: where the decimal point goes relative to the first digit (value = 0.DIGITS x 10^decpt).
  const int decpt = exponent + 1;
  const int n = static_cast<int>(digits.size());
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0.";
      out.append(static_cast<std::size_t>(-decpt), '0');
      out += digits;
    } else if (decpt >= n) {
      out += digits;
      out.append(static_cast<std::size_t>(decpt - n), '0');
      out += ".0";
    } else {
      out += digits.substr(0, static_cast<std::size_t>(decpt));
      out += '.';
      out += digits.substr(static_cast<std::size_t>(decpt));
    }
    return out;
  }
  out += digits[0];
  if (n > 1) {
    out += '.';
    out += digits.substr(1);
  }
  char exp_buf[16];
  std::snprintf(exp_buf, sizeof exp_buf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  out += exp_buf;
  return out;
}

void append_py_json(std::string& out, const nlohmann::ordered_json& value) {
  append_value(out, value, 0);
}

nlohmann::ordered_json parse_json_text(std::string_view text) {
  if (text.find('\0') != std::string_view::npos) {
    return nlohmann::ordered_json(nlohmann::ordered_json::value_t::discarded);
  }
  return nlohmann::ordered_json::parse(text.begin(), text.end(), nullptr,
                                       /*allow_exceptions=*/false);
}

std::string py_json_dumps(const nlohmann::ordered_json& value) {
  std::string out;
  append_value(out, value, 0);
  return out;
}

}  // namespace flint
