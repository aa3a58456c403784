#include "text/pre_tokenizer.h"

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "base/error.h"

namespace flint::text {

namespace {

using nlohmann::json;

// The pattern of transformers.js's ByteLevel pre-tokenizer when use_regex is true.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::string escape_literal(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (std::string_view("\\^$.|?*+()[]{}/-").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

const json& member(const json& object, const char* key, const std::string& what) {
  auto it = object.find(key);
  if (it == object.end()) throw Error("{} has no field \"{}\"", what, key);
  return *it;
}

bool flag(const json& object, const char* key, bool fallback, const std::string& what) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) throw Error("{}.{} must be true or false", what, key);
  return it->get<bool>();
}

std::string type_of(const json& config, const std::string& what) {
  if (!config.is_object()) throw Error("{} must be an object", what);
  const json& type = member(config, "type", what);
  if (!type.is_string()) throw Error("{}.type must be a string", what);
  return type.get<std::string>();
}

}  // namespace

PreTokenizer PreTokenizer::from_json(const json& config, std::string_view what_view) {
  std::string what(what_view);
  PreTokenizer result;
  if (config.is_null()) {
    throw Error(
        "{} is null; flint supports only byte-level BPE, which needs a ByteLevel "
        "pre-tokenizer",
        what);
  }
  std::string type = type_of(config, what);
  if (type == "ByteLevel") {
    result.add_byte_level(config, what);
    return result;
  }
  if (type != "Sequence") {
    throw Error("{}.type is \"{}\"; supported: Sequence (of Split ... ByteLevel), ByteLevel", what,
                type);
  }
  const json& list = member(config, "pretokenizers", what);
  if (!list.is_array() || list.empty())
    throw Error("{}.pretokenizers must be a non-empty array", what);
  for (std::size_t i = 0; i < list.size(); ++i) {
    std::string item_what = fmt::format("{}.pretokenizers[{}]", what, i);
    std::string item_type = type_of(list[i], item_what);
    bool last = i + 1 == list.size();
    if (item_type == "Split") {
      result.add_split(list[i], item_what);
    } else if (item_type == "ByteLevel" && last) {
      result.add_byte_level(list[i], item_what);
    } else if (item_type == "ByteLevel") {
      throw Error("{}: a ByteLevel pre-tokenizer must come last in the sequence", item_what);
    } else {
      throw Error("{}.type is \"{}\"; supported in a sequence: Split, ByteLevel (last)", item_what,
                  item_type);
    }
  }
  if (list.back().value("type", "") != "ByteLevel") {
    throw Error(
        "{}: the sequence must end with a ByteLevel pre-tokenizer (flint supports "
        "byte-level BPE only)",
        what);
  }
  return result;
}

void PreTokenizer::add_split(const json& config, const std::string& what) {
  const json& pattern = member(config, "pattern", what);
  std::string pattern_what = what + ".pattern";
  std::string js;
  if (pattern.is_object() && pattern.contains("Regex") && pattern["Regex"].is_string()) {
    js = pattern["Regex"].get<std::string>();
  } else if (pattern.is_object() && pattern.contains("String") && pattern["String"].is_string()) {
    js = escape_literal(pattern["String"].get<std::string>());
  } else {
    throw Error("{} must be {{\"Regex\": string}} or {{\"String\": string}}", pattern_what);
  }
  const json& behavior = member(config, "behavior", what);
  if (!behavior.is_string() || behavior.get<std::string>() != "Isolated") {
    throw Error("{}.behavior is {}; only \"Isolated\" is supported", what, behavior.dump());
  }
  if (flag(config, "invert", false, what)) {
    throw Error("{}.invert is true; only false is supported", what);
  }
  splits_.emplace_back(js, pattern_what);
}

void PreTokenizer::add_byte_level(const json& config, const std::string& what) {
  if (flag(config, "add_prefix_space", false, what)) {
    throw Error("{}.add_prefix_space is true; only false is supported", what);
  }
  if (flag(config, "use_regex", true, what)) byte_level_.emplace_back(kGpt2Pattern, what);
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& out) const {
  if (text.empty()) return;
  thread_local std::vector<std::string_view> current, next;
  current.assign(1, text);
  for (const JsRegex& regex : splits_) {
    next.clear();
    for (std::string_view piece : current) {
      std::size_t previous = 0;
      regex.for_each_match(piece, [&](std::size_t begin, std::size_t end) {
        if (begin > previous) next.push_back(piece.substr(previous, begin - previous));
        if (end > begin) next.push_back(piece.substr(begin, end - begin));
        previous = end;
      });
      if (previous < piece.size()) next.push_back(piece.substr(previous));
    }
    current.swap(next);
  }
  if (byte_level_.empty()) {
    out.insert(out.end(), current.begin(), current.end());
    return;
  }
  for (std::string_view piece : current) {
    byte_level_[0].for_each_match(piece, [&](std::size_t begin, std::size_t end) {
      if (end > begin) out.push_back(piece.substr(begin, end - begin));
    });
  }
}

}  // namespace flint::text
