#include "text/tokenizer_files.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "text/tokenizer_json_reader.h"

namespace flint::text {

const std::string_view kDeepSeekV4TokenizerConfig = R"({
  "add_bos_token": false,
  "add_eos_token": false,
  "bos_token": {
    "__type": "AddedToken",
    "content": "<｜begin▁of▁sentence｜>",
    "lstrip": false,
    "normalized": true,
    "rstrip": false,
    "single_word": false
  },
  "clean_up_tokenization_spaces": false,
  "eos_token": {
    "__type": "AddedToken",
    "content": "<｜end▁of▁sentence｜>",
    "lstrip": false,
    "normalized": true,
    "rstrip": false,
    "single_word": false
  },
  "legacy": true,
  "model_max_length": 1048576,
  "pad_token": {
    "__type": "AddedToken",
    "content": "<｜end▁of▁sentence｜>",
    "lstrip": false,
    "normalized": true,
    "rstrip": false,
    "single_word": false
  },
  "sp_model_kwargs": {},
  "unk_token": null,
  "tokenizer_class": "PreTrainedTokenizerFast"
})";

namespace {

using nlohmann::json;

constexpr int32_t kV3LastAddedId = 128814;
constexpr int32_t kV4FirstNewId = 128815;
constexpr int32_t kV4VocabSize = 129280;

struct NewToken {
  int32_t id;
  std::string_view content;
  bool special;  // see docs/tokenizer.md for which flags are verified
};

// The named DeepSeek-V4 additions; ids 128847-129261 are the multimodal span placeholders.
constexpr NewToken kNamedTokens[] = {
    {128815, "<｜begin▁of▁repo▁name｜>", false},
    {128816, "<｜end▁of▁repo▁name｜>", false},
    {128817, "<｜begin▁of▁file▁name｜>", false},
    {128818, "<｜end▁of▁file▁name｜>", false},
    {128819, "<｜begin▁of▁file｜>", false},
    {128820, "<｜end▁of▁file｜>", false},
    {128821, "<think>", false},
    {128822, "</think>", false},
    {128823, "<｜place▁holder▁for▁copy｜>", true},
    {128824, "<｜place▁holder▁for▁pointer▁replace｜>", true},
    {128825, "｜DSML｜", false},
    {128826, "<｜begin▁sys｜>", false},
    {128827, "<｜end▁sys｜>", false},
    {128828, "<｜latest_reminder｜>", false},
    {128829, "<｜action｜>", false},
    {128830, "<｜query｜>", false},
    {128831, "<｜authority｜>", false},
    {128832, "<｜domain｜>", false},
    {128833, "<｜task｜>", false},
    {128834, "<｜political｜>", false},
    {128835, "<｜entity｜>", false},
    {128836, "<｜title｜>", false},
    {128837, "<｜safety｜>", false},
    {128838, "<｜answer｜>", false},
    {128839, "<｜search｜>", false},
    {128840, "<dsml:", false},
    {128841, "</dsml:", false},
    {128842, "<｜search▁begin｜>", false},
    {128843, "<｜search▁end｜>", false},
    {128844, "<｜extracted_url｜>", false},
    {128845, "<｜read_url｜>", false},
    {128846, "<｜end_of_query｜>", false},
    {129262, "<｜rl_image_pad｜>", true},
    {129263, "<｜rl_image_start｜>", true},
    {129264, "<｜image2｜>", false},
    {129265, "<｜/table>｜", false},  // sic: the released file spells it so
    {129266, "<｜table｜>", false},
    {129267, "<｜/td｜>", false},
    {129268, "<｜td｜>", false},
    {129269, "<｜/tr｜>", false},
    {129270, "<｜tr｜>", false},
    {129271, "<｜/polygon｜>", false},
    {129272, "<｜polygon｜>", false},
    {129273, "<｜/point｜>", false},
    {129274, "<｜point｜>", false},
    {129275, "<｜/box｜>", false},
    {129276, "<｜box｜>", false},
    {129277, "<｜/ref｜>", false},
    {129278, "<｜ref｜>", false},
    {129279, "<｜image｜>", true},
};
constexpr int32_t kFirstSpanId = 128847;  // <|place_holder_mm_span_0021|>
constexpr int32_t kLastSpanId = 129261;   // <|place_holder_mm_span_0435|>

std::string read_source(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error("cannot read {} (the DeepSeek-V3 tokenizer.json to derive V4's from)",
                path.string());
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return std::move(buffer).str();
}

json added_token(int32_t id, std::string_view content, bool special, bool normalized) {
  json token = json::object();
  token["id"] = id;
  token["content"] = content;
  token["single_word"] = false;
  token["lstrip"] = false;
  token["rstrip"] = false;
  token["normalized"] = normalized;
  token["special"] = special;
  return token;
}

// One added-token entry in tokenizer.json's usual field order.
std::string format_added(const json& t) {
  return fmt::format(
      "{{\"id\": {}, \"content\": {}, \"single_word\": {}, \"lstrip\": {}, \"rstrip\": {}, "
      "\"normalized\": {}, \"special\": {}}}",
      t["id"].dump(), t["content"].dump(), t["single_word"].dump(), t["lstrip"].dump(),
      t["rstrip"].dump(), t["normalized"].dump(), t["special"].dump());
}

// Writes the document with the key order of Hugging Face tokenizer.json files (nlohmann::json
// sorts keys), the vocabulary in id order and the merges as read, one entry per line.
std::string format_tokenizer_json(const json& root, const TokenizerJsonReader& reader) {
  std::string out = "{\n";
  bool first = true;
  auto key_line = [&](const std::string& key) {
    out += first ? "" : ",\n";
    first = false;
    out += fmt::format("  {}: ", json(key).dump());
  };
  std::vector<std::string> order = {"version",        "truncation", "padding",
                                    "added_tokens",   "normalizer", "pre_tokenizer",
                                    "post_processor", "decoder",    "model"};
  for (const auto& [key, value] : root.items()) {
    if (std::find(order.begin(), order.end(), key) == order.end()) order.push_back(key);
  }
  for (const std::string& key : order) {
    if (!root.contains(key)) continue;
    key_line(key);
    const json& value = root[key];
    if (key == "added_tokens") {
      out += "[\n";
      for (std::size_t i = 0; i < value.size(); ++i)
        out += fmt::format("    {}{}\n", format_added(value[i]), i + 1 < value.size() ? "," : "");
      out += "  ]";
    } else if (key == "model") {
      out += "{\n";
      std::vector<std::string> model_order = {"type",
                                              "dropout",
                                              "unk_token",
                                              "continuing_subword_prefix",
                                              "end_of_word_suffix",
                                              "fuse_unk",
                                              "byte_fallback",
                                              "ignore_merges"};
      for (const auto& [k, v] : value.items()) {
        if (k != "vocab" && k != "merges" &&
            std::find(model_order.begin(), model_order.end(), k) == model_order.end())
          model_order.push_back(k);
      }
      for (const std::string& k : model_order) {
        if (value.contains(k)) out += fmt::format("    {}: {},\n", json(k).dump(), value[k].dump());
      }
      std::vector<std::pair<int64_t, std::string_view>> vocab;
      vocab.reserve(reader.vocab.size());
      for (const auto& [token, id] : reader.vocab) vocab.emplace_back(id, token);
      std::sort(vocab.begin(), vocab.end());
      out += "    \"vocab\": {\n";
      for (std::size_t i = 0; i < vocab.size(); ++i) {
        out += fmt::format("      {}: {}{}\n", json(vocab[i].second).dump(), vocab[i].first,
                           i + 1 < vocab.size() ? "," : "");
      }
      out += "    },\n    \"merges\": [\n";
      for (std::size_t i = 0; i < reader.merges.size(); ++i) {
        const auto& m = reader.merges[i];
        std::string item = m.pair_form ? json::array({m.left, m.right}).dump()
                                       : json(m.left + " " + m.right).dump();
        out += fmt::format("      {}{}\n", item, i + 1 < reader.merges.size() ? "," : "");
      }
      out += "    ]\n  }";
    } else {
      out += value.dump();
    }
  }
  out += "\n}\n";
  return out;
}

void write_file(const std::filesystem::path& path, std::string_view content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  out.close();
  if (!out) throw Error("cannot write {}", path.string());
}

}  // namespace

void write_deepseek_v4_tokenizer_files(const std::filesystem::path& source_dir,
                                       const std::filesystem::path& out_dir) {
  const std::filesystem::path source = source_dir / "tokenizer.json";
  json root;
  TokenizerJsonReader reader(root);
  try {
    std::string text = read_source(source);
    json::sax_parse(text.begin(), text.end(), &reader);
  } catch (const json::exception& e) {
    throw Error("{} is not valid JSON: {}", source.string(), e.what());
  }
  auto unexpected = [&](std::string_view why) {
    return Error("{} is not the DeepSeek-V3 tokenizer.json flint derives V4's from: {}",
                 source.string(), why);
  };
  if (!root.is_object() || !root.contains("added_tokens") || !root["added_tokens"].is_array() ||
      !root.contains("model") || !root["model"].is_object() || !reader.vocab_seen ||
      !reader.merges_seen ||
      std::any_of(reader.merges.begin(), reader.merges.end(),
                  [](const auto& m) { return m.malformed; })) {
    throw unexpected("it lacks added_tokens or a well-formed model.vocab / model.merges");
  }
  std::set<int64_t> ids;
  json added = json::array();
  for (const json& token : root["added_tokens"]) {
    if (!token.is_object() || !token.contains("id") || !token["id"].is_number_integer())
      throw unexpected("an added token has no integer id");
    ids.insert(token["id"].get<int64_t>());
    added.push_back(token);
  }
  if (ids.size() != 818 || *ids.rbegin() != kV3LastAddedId || reader.vocab.size() != 128000) {
    throw unexpected(fmt::format(
        "expected 818 added tokens up to id {} and 128000 vocabulary "
        "entries, found {} up to id {} and {}",
        kV3LastAddedId, ids.size(), ids.empty() ? -1 : *ids.rbegin(), reader.vocab.size()));
  }
  std::vector<json> fresh;
  for (const NewToken& t : kNamedTokens)
    fresh.push_back(added_token(t.id, t.content, t.special, false));
  for (int32_t id = kFirstSpanId; id <= kLastSpanId; ++id) {
    fresh.push_back(added_token(
        id, fmt::format("<|place_holder_mm_span_{:04d}|>", id - kFirstSpanId + 21), true, false));
  }
  std::sort(fresh.begin(), fresh.end(), [](const json& a, const json& b) {
    return a["id"].get<int32_t>() < b["id"].get<int32_t>();
  });
  for (json& token : fresh) added.push_back(std::move(token));
  if (added.size() != 1283 || added.back()["id"].get<int32_t>() != kV4VocabSize - 1 ||
      kNamedTokens[0].id != kV4FirstNewId) {
    throw Error("internal error: the DeepSeek-V4 added-token table is inconsistent");
  }
  root["added_tokens"] = std::move(added);

  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) throw Error("cannot create {}: {}", out_dir.string(), ec.message());
  write_file(out_dir / "tokenizer.json", format_tokenizer_json(root, reader));
  // Byte for byte the released file (801 bytes, no final newline).
  write_file(out_dir / "tokenizer_config.json", kDeepSeekV4TokenizerConfig);
}

}  // namespace flint::text
