// `flint tokenize MODEL --text T` and `flint detokenize MODEL --token-ids 1,2,3`: the
// checkpoint's tokenizer on the command line, for checking prompts and token ids by hand and
// for scripts (stdout carries only the result).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <span>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "base/error.h"
#include "base/strings.h"
#include "cli/command.h"
#include "cli/flags.h"
#include "text/tokenizer.h"

namespace flint::cli {

namespace {

text::Tokenizer load_tokenizer(const std::string& model) {
  std::filesystem::path dir(model);
  if (!std::filesystem::is_directory(dir)) {
    throw UsageError(
        "MODEL '{}' is not a directory (expected a checkpoint holding "
        "tokenizer.json and tokenizer_config.json)",
        model);
  }
  return text::Tokenizer::load(dir);
}

std::string read_text_file(const std::string& path, const char* flag) {
  if (path == "-") {
    std::ostringstream buffer;
    buffer << std::cin.rdbuf();
    return std::move(buffer).str();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("{}: cannot read {}", flag, path);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return std::move(buffer).str();
}

int run_tokenize(std::span<const std::string> args) {
  std::string model;
  std::optional<std::string> text, text_file;
  bool add_special_tokens = true;
  FlagParser parser("tokenize MODEL (--text T | --text-file F) [flags]",
                    "Prints the token ids of a text as a JSON array on one line. BOS/EOS are "
                    "added as the checkpoint's tokenizer_config.json says (DeepSeek-V4: none).");
  parser.positional("MODEL", "checkpoint directory holding tokenizer.json", &model);
  parser.add_optional_string("--text", "the text to tokenize", &text);
  parser.add_optional_string("--text-file",
                             "read the text from this file ('-' for stdin); invalid UTF-8 "
                             "becomes U+FFFD",
                             &text_file);
  parser.add_bool("--add-special-tokens",
                  "add BOS/EOS as tokenizer_config.json says (--no-add-special-tokens: never)",
                  &add_special_tokens);
  parser.add_help_section("example",
                          "flint tokenize ./DeepSeek-V4-Flash --text 'Hello!'\n"
                          "[19923,3]");
  if (!parser.parse(args)) return kExitOk;
  if (text.has_value() == text_file.has_value()) {
    throw UsageError("give exactly one of --text and --text-file");
  }
  std::string input = text ? *text : read_text_file(*text_file, "--text-file");
  text::Tokenizer tokenizer = load_tokenizer(model);
  std::vector<int32_t> ids = tokenizer.encode(input, add_special_tokens);
  std::string line = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) line += ',';
    line += std::to_string(ids[i]);
  }
  line += "]\n";
  std::fwrite(line.data(), 1, line.size(), stdout);
  return kExitOk;
}

int run_detokenize(std::span<const std::string> args) {
  std::string model;
  std::string token_ids;
  std::optional<std::string> token_ids_file;
  bool skip_special_tokens = false;
  FlagParser parser("detokenize MODEL (--token-ids 1,2,3 | --token-ids-file F) [flags]",
                    "Prints exactly the text the token ids decode to (no newline added).");
  parser.positional("MODEL", "checkpoint directory holding tokenizer.json", &model);
  parser.add_string("--token-ids", "comma-separated token ids", &token_ids);
  parser.add_optional_string("--token-ids-file",
                             "read the ids from this file ('-' for stdin): separated by commas, "
                             "white space or a JSON array's brackets (what `tokenize` prints); "
                             "for more ids than a command line holds",
                             &token_ids_file);
  parser.add_bool("--skip-special-tokens", "leave out special tokens such as BOS and EOS",
                  &skip_special_tokens);
  if (!parser.parse(args)) return kExitOk;
  if (parser.was_set("--token-ids") == token_ids_file.has_value())
    throw UsageError("give exactly one of --token-ids and --token-ids-file");
  const char* flag = token_ids_file ? "--token-ids-file" : "--token-ids";
  if (token_ids_file) {
    token_ids.clear();
    for (char c : read_text_file(*token_ids_file, flag)) {
      const bool part = (c >= '0' && c <= '9') || c == '-';
      if (part) {
        token_ids += c;
      } else if (!token_ids.empty() && token_ids.back() != ',') {
        token_ids += ',';
      }
    }
    if (!token_ids.empty() && token_ids.back() == ',') token_ids.pop_back();
  }
  std::vector<int32_t> ids;
  for (int64_t id : parse_int_list(token_ids, flag)) {
    if (id < 0 || id > INT32_MAX) throw UsageError("{}: {} is not a token id", flag, id);
    ids.push_back(static_cast<int32_t>(id));
  }
  text::Tokenizer tokenizer = load_tokenizer(model);
  std::string decoded = tokenizer.decode(ids, skip_special_tokens);
  std::fwrite(decoded.data(), 1, decoded.size(), stdout);
  std::fflush(stdout);
  return kExitOk;
}

}  // namespace

FLINT_COMMAND("tokenize", "print the token ids of a text (JSON array)", run_tokenize);
FLINT_COMMAND("detokenize", "print the text of token ids", run_detokenize);

}  // namespace flint::cli
