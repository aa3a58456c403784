// Building a Tokenizer from tokenizer.json and tokenizer_config.json.
//
// Every field that changes how text is tokenized is either understood or rejected with an
// error naming the file and field: a tokenizer flint cannot reproduce exactly must not load.

#include <array>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/log.h"
#include "text/tokenizer.h"
#include "text/tokenizer_impl.h"
#include "text/tokenizer_json_reader.h"

namespace flint::text {

namespace {

using nlohmann::json;

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw Error("cannot read {}: {}", path.string(),
                std::filesystem::exists(path) ? "permission denied or not a file" : "no such file");
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return std::move(buffer).str();
}

json parse(std::string_view text, const std::string& file) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw Error("{} is not valid JSON: {}", file, e.what());
  }
}

// "field" in `object`, or nullptr (absent or null).
const json* optional_field(const json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

bool bool_field(const json& object, const char* key, bool fallback, const std::string& what) {
  const json* value = optional_field(object, key);
  if (value == nullptr) return fallback;
  if (!value->is_boolean()) throw Error("{} field {} must be true or false", what, key);
  return value->get<bool>();
}

// A token named in tokenizer_config.json: a string or {"__type": "AddedToken", "content": ...}.
std::optional<std::string> token_content(const json& config, const char* key,
                                         const std::string& file) {
  const json* value = optional_field(config, key);
  if (value == nullptr) return std::nullopt;
  if (value->is_string()) return value->get<std::string>();
  if (value->is_object() && value->contains("content") && (*value)["content"].is_string())
    return (*value)["content"].get<std::string>();
  throw Error("{} field {} must be a string or an object with a \"content\" string", file, key);
}

struct Loader {
  std::string json_file;    // "<dir>/tokenizer.json", for messages
  std::string config_file;  // "<dir>/tokenizer_config.json"
  Tokenizer::Impl& m;

  [[noreturn]] void fail_json(std::string_view field, std::string_view why) const {
    throw Error("{} field {}: {}", json_file, field, why);
  }

  void check_normalizer(const json& root) const {
    const json* normalizer = optional_field(root, "normalizer");
    if (normalizer == nullptr) return;
    if (normalizer->is_object() && normalizer->value("type", "") == "Sequence" &&
        normalizer->contains("normalizers") && (*normalizer)["normalizers"].is_array() &&
        (*normalizer)["normalizers"].empty()) {
      return;
    }
    fail_json("normalizer", fmt::format("{} is not supported (only null or an empty Sequence)",
                                        normalizer->dump()));
  }

  void check_post_processor(const json& root) const {
    const json* post = optional_field(root, "post_processor");
    if (post == nullptr) return;
    // ByteLevel post-processing only adjusts offsets; it adds no tokens.
    if (post->is_object() && post->value("type", "") == "ByteLevel") return;
    fail_json("post_processor",
              fmt::format("type {} is not supported (only ByteLevel or null; BOS/EOS come from "
                          "tokenizer_config.json add_bos_token / add_eos_token)",
                          post->is_object() ? post->value("type", "?") : post->dump()));
  }

  void check_decoder(const json& root) const {
    const json* decoder = optional_field(root, "decoder");
    if (decoder == nullptr || !decoder->is_object() || decoder->value("type", "") != "ByteLevel") {
      fail_json("decoder", fmt::format("{} is not supported (only ByteLevel)",
                                       decoder ? decoder->dump() : "null"));
    }
  }

  const json& check_model(const json& root) const {
    const json* model = optional_field(root, "model");
    if (model == nullptr || !model->is_object()) fail_json("model", "missing or not an object");
    if (model->value("type", "BPE") != "BPE")
      fail_json("model.type",
                fmt::format("\"{}\" is not supported (only BPE)", model->value("type", "")));
    auto reject_if = [&](const char* key, bool bad, std::string_view why) {
      if (bad) fail_json(fmt::format("model.{}", key), why);
    };
    const json* dropout = optional_field(*model, "dropout");
    reject_if("dropout", dropout && !(dropout->is_number() && dropout->get<double>() == 0.0),
              "BPE dropout is not supported");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      const json* value = optional_field(*model, key);
      reject_if(key, value && !(value->is_string() && value->get<std::string>().empty()),
                "is not supported (must be null)");
    }
    reject_if("byte_fallback", bool_field(*model, "byte_fallback", false, json_file + " model"),
              "byte fallback is not supported");
    reject_if("ignore_merges", bool_field(*model, "ignore_merges", false, json_file + " model"),
              "ignore_merges is not supported");
    return *model;
  }

  void load_vocab(const TokenizerJsonReader& reader, int32_t* max_id) {
    if (!reader.vocab_seen) fail_json("model.vocab", "missing or not an object");
    if (!reader.vocab_error.empty())
      fail_json("model.vocab", fmt::format("id of \"{}\" is not an integer", reader.vocab_error));
    m.ids.reserve(reader.vocab.size() + 2048);
    for (const auto& [spelling, id] : reader.vocab) {
      if (id < 0 || id > INT32_MAX)
        fail_json("model.vocab", fmt::format("id of \"{}\" is not a valid id", spelling));
      m.ids[spelling] = static_cast<int32_t>(id);
      *max_id = std::max(*max_id, static_cast<int32_t>(id));
    }
  }

  std::vector<AddedToken> load_added(const json& root, int32_t* max_id) const {
    std::vector<AddedToken> added;
    const json* list = optional_field(root, "added_tokens");
    if (list == nullptr) return added;
    if (!list->is_array()) fail_json("added_tokens", "must be an array");
    for (std::size_t i = 0; i < list->size(); ++i) {
      const json& item = (*list)[i];
      std::string what = fmt::format("added_tokens[{}]", i);
      if (!item.is_object() || !item.contains("id") || !item["id"].is_number_integer() ||
          !item.contains("content") || !item["content"].is_string()) {
        fail_json(what, "needs an integer \"id\" and a string \"content\"");
      }
      AddedToken token;
      token.id = item["id"].get<int32_t>();
      token.content = item["content"].get<std::string>();
      if (token.id < 0) fail_json(what + ".id", "must not be negative");
      if (token.content.empty()) fail_json(what + ".content", "must not be empty");
      std::string flags_what = json_file + " " + what;
      token.special = bool_field(item, "special", false, flags_what);
      token.lstrip = bool_field(item, "lstrip", false, flags_what);
      token.rstrip = bool_field(item, "rstrip", false, flags_what);
      token.normalized = bool_field(item, "normalized", false, flags_what);
      if (bool_field(item, "single_word", false, flags_what))
        fail_json(what + ".single_word", "true is not supported");
      *max_id = std::max(*max_id, token.id);
      added.push_back(std::move(token));
    }
    return added;
  }

  int32_t id_of(std::string_view spelling, std::string_view field) const {
    auto it = m.ids.find(spelling);
    if (it == m.ids.end())
      fail_json(field, fmt::format("\"{}\" is not in the vocabulary", spelling));
    return it->second;
  }

  std::vector<BpeMerge> load_merges(const TokenizerJsonReader& reader) const {
    if (!reader.merges_seen) fail_json("model.merges", "missing or not an array");
    std::vector<BpeMerge> result;
    result.reserve(reader.merges.size());
    std::string joined;
    for (std::size_t i = 0; i < reader.merges.size(); ++i) {
      const TokenizerJsonReader::Merge& merge = reader.merges[i];
      std::string field = fmt::format("model.merges[{}]", i);
      if (merge.malformed) fail_json(field, "must be \"a b\" or [\"a\", \"b\"]");
      joined.assign(merge.left);
      joined.append(merge.right);
      result.push_back({id_of(merge.left, field), id_of(merge.right, field), id_of(joined, field)});
    }
    return result;
  }

  void build_tables(const std::vector<AddedToken>& added, int32_t max_id) {
    const auto size = static_cast<std::size_t>(max_id) + 1;
    m.spelling.assign(size, std::string());
    m.bytes.assign(size, std::string());
    m.flags.assign(size, 0);
    const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::get();
    for (const auto& [spelling, id] : m.ids) {
      auto index = static_cast<std::size_t>(id);
      if (m.flags[index] & Tokenizer::Impl::kValid)
        fail_json("model.vocab", fmt::format("id {} is used twice", id));
      m.flags[index] = Tokenizer::Impl::kValid;
      m.spelling[index] = spelling;
      if (auto decoded = alphabet.decode(spelling)) {
        if (is_valid_utf8(*decoded)) m.flags[index] |= Tokenizer::Impl::kWholeUtf8;
        m.bytes[index] = std::move(*decoded);
      }
    }
    for (const AddedToken& token : added) {
      auto index = static_cast<std::size_t>(token.id);
      m.ids[token.content] = token.id;
      m.spelling[index] = token.content;
      m.bytes[index] = token.content;
      m.flags[index] = Tokenizer::Impl::kValid | Tokenizer::Impl::kAdded |
                       (token.special ? Tokenizer::Impl::kSpecial : 0);
    }
    // Every byte-level token must spell bytes; the reference would decode others to garbage.
    for (std::size_t id = 0; id < size; ++id) {
      if ((m.flags[id] & Tokenizer::Impl::kValid) && !(m.flags[id] & Tokenizer::Impl::kAdded) &&
          m.bytes[id].empty()) {
        fail_json("model.vocab", fmt::format("token \"{}\" (id {}) is not spelled in the "
                                             "byte-level alphabet and is not an added token",
                                             m.spelling[id], id));
      }
    }
  }

  std::array<int32_t, 256> byte_ids() const {
    std::array<int32_t, 256> ids{};
    const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::get();
    for (int b = 0; b < 256; ++b) {
      std::string spelling;
      append_utf8(spelling, alphabet.code_point(static_cast<uint8_t>(b)));
      auto it = m.ids.find(spelling);
      if (it == m.ids.end())
        fail_json("model.vocab",
                  fmt::format("has no token for byte 0x{:02X} (\"{}\")", b, spelling));
      ids[static_cast<std::size_t>(b)] = it->second;
    }
    return ids;
  }

  void load_config(const json& config) {
    const std::string& file = config_file;
    if (!config.is_object()) throw Error("{} must contain a JSON object", file);
    m.add_bos = bool_field(config, "add_bos_token", false, file);
    m.add_eos = bool_field(config, "add_eos_token", false, file);
    m.clean_up_spaces = bool_field(config, "clean_up_tokenization_spaces", true, file);
    if (bool_field(config, "remove_space", false, file))
      throw Error("{} field remove_space: true is not supported", file);
    if (bool_field(config, "do_lowercase_and_remove_accent", false, file))
      throw Error("{} field do_lowercase_and_remove_accent: true is not supported", file);
    // LlamaTokenizer with legacy = false swaps in a Metaspace pre-tokenizer.
    std::string cls = config.value("tokenizer_class", "");
    if ((cls == "LlamaTokenizer" || cls == "LlamaTokenizerFast") &&
        !bool_field(config, "legacy", true, file)) {
      throw Error("{} field legacy: false is not supported for {}", file, cls);
    }
    if (const json* length = optional_field(config, "model_max_length")) {
      if (!length->is_number()) throw Error("{} field model_max_length must be a number", file);
      double value = length->get<double>();
      m.model_max_length = value >= 9.2e18 ? INT64_MAX : static_cast<int64_t>(value);
    }
    auto resolve = [&](const char* key, bool required) {
      auto content = token_content(config, key, file);
      if (!content) {
        if (required) throw Error("{} sets add_{} but field {} is missing", file, key, key);
        return Tokenizer::kNoToken;
      }
      auto it = m.ids.find(*content);
      if (it == m.ids.end()) {
        throw Error("{} field {}: \"{}\" is not a token of tokenizer.json", file, key, *content);
      }
      return it->second;
    };
    m.bos = resolve("bos_token", m.add_bos);
    m.eos = resolve("eos_token", m.add_eos);
    if (const json* extra = optional_field(config, "additional_special_tokens")) {
      if (!extra->is_array())
        throw Error("{} field additional_special_tokens must be an array", file);
      for (std::size_t i = 0; i < extra->size(); ++i) {
        const json& item = (*extra)[i];
        std::string content =
            item.is_string() ? item.get<std::string>() : item.value("content", "");
        auto it = m.ids.find(content);
        if (it != m.ids.end())
          m.flags[static_cast<std::size_t>(it->second)] |= Tokenizer::Impl::kSpecial;
      }
    }
  }
};

}  // namespace

Tokenizer Tokenizer::from_json(std::string_view tokenizer_json,
                               std::string_view tokenizer_config_json, std::string_view source) {
  auto impl = std::make_unique<Impl>();
  Loader loader{fmt::format("{}/tokenizer.json", source),
                fmt::format("{}/tokenizer_config.json", source), *impl};
  json root;
  TokenizerJsonReader reader(root);
  try {
    json::sax_parse(tokenizer_json.begin(), tokenizer_json.end(), &reader);
  } catch (const json::exception& e) {
    throw Error("{} is not valid JSON: {}", loader.json_file, e.what());
  }
  json config = parse(tokenizer_config_json, loader.config_file);
  if (!root.is_object()) throw Error("{} must contain a JSON object", loader.json_file);

  loader.check_normalizer(root);
  loader.check_post_processor(root);
  loader.check_decoder(root);
  for (const char* key : {"truncation", "padding"}) {
    if (optional_field(root, key) != nullptr) {
      spdlog::warn("{} field {} is set; flint ignores it, as the reference tokenizer does",
                   loader.json_file, key);
    }
  }
  loader.check_model(root);
  int32_t max_id = -1;
  loader.load_vocab(reader, &max_id);
  std::vector<AddedToken> added = loader.load_added(root, &max_id);
  if (max_id < 0) loader.fail_json("model.vocab", "is empty");
  loader.build_tables(added, max_id);
  impl->bpe = BpeModel(loader.byte_ids(), loader.load_merges(reader));
  const json* pre = optional_field(root, "pre_tokenizer");
  impl->pre_tokenizer =
      PreTokenizer::from_json(pre ? *pre : json(), loader.json_file + " field pre_tokenizer");
  impl->added = AddedTokenMatcher(std::move(added));
  loader.load_config(config);
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::load(const std::filesystem::path& model_dir) {
  std::string tokenizer_json = read_file(model_dir / "tokenizer.json");
  std::string config_json = read_file(model_dir / "tokenizer_config.json");
  return from_json(tokenizer_json, config_json, model_dir.string());
}

}  // namespace flint::text
