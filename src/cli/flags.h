// A small table-driven command-line parser shared by every flint command.
//
// Each command declares its positionals and flags with a help line; parse() fills the
// caller's variables. Accepted forms (the ones `vllm serve` accepts):
//   `--name value`, `--name=value`, underscores for dashes (`--max_model_len`);
//   switches `--name`, `--name=true|false`, `--no-name`;
//   aliases (`-tp 8`), and for a two-character alias the value attached (`-O3`);
//   lists (`--api-key a b c`, like argparse's nargs='+': the first value is taken as is,
//   later ones up to the next argument that looks like a flag);
//   JSON flags in vLLM's two forms, `--name '{"key": 1}'` and `--name.key 1` (see add_json);
//   prefix families (`--speculative-config.KEY value`: the part after the first '.' is
//   passed to the handler verbatim, underscores kept);
//   `--` ends the flags; `-h` / `--help` prints help(); `--help=WORD` prints only the
//   flags or group matching WORD.
// A flag that takes a value takes the next argument even when it starts with '-', as
// getopt does (`--text "- item"`, `--seed -1`, `--stop --`); only a value-taking flag at
// the end of the line is "expects a value". Switches never take the next argument (write
// `--name=false`). An unknown flag is a UsageError that suggests the closest declared
// one. help() renders the table, so the documentation cannot drift from what is parsed.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/error.h"

namespace flint::cli {

// A mistake on the command line; commands exit with kExitUsage for it.
class UsageError : public Error {
 public:
  using Error::Error;
};

class FlagParser {
 public:
  // `usage` is the synopsis after "flint", e.g. "inspect MODEL [flags]".
  FlagParser(std::string usage, std::string description);

  void positional(std::string name, std::string help, std::string* out, bool required = true);

  // Starts a titled group: flags and prefixes declared afterwards are listed under `title`
  // in help(), and `--help=TITLE` shows only them. Flags declared before any group are
  // listed under "flags".
  void group(std::string title);

  void add_string(std::string name, std::string help, std::string* out);
  void add_int(std::string name, std::string help, int64_t* out);
  void add_double(std::string name, std::string help, double* out);
  void add_bool(std::string name, std::string help, bool* out);
  void add_optional_int(std::string name, std::string help, std::optional<int64_t>* out);
  void add_optional_double(std::string name, std::string help, std::optional<double>* out);
  void add_optional_string(std::string name, std::string help, std::optional<std::string>* out);
  // A flag handled by `handler`, which receives the value and throws UsageError (or
  // flint::Error) if it is bad. `takes_value` false makes it a switch: the handler gets
  // "true", "false" (from --no-name) or the text after '=' (check it with parse_bool).
  // `default_text` is shown in help() when not empty.
  void add_custom(std::string name, std::string help, bool takes_value,
                  std::function<void(std::string_view value)> handler,
                  std::string value_name = "VALUE", std::string default_text = "");
  // A flag taking one or more values (argparse nargs='+'): `--name a b` consumes the next
  // argument (whatever it looks like) and every following one that is not a flag;
  // `--name=a` gives one value. Given twice, the
  // handler runs twice (the caller decides whether to replace or append).
  void add_list(std::string name, std::string help,
                std::function<void(std::vector<std::string> values)> handler,
                std::string value_name = "VALUE", std::string default_text = "");
  // A JSON flag, as vLLM reads them: `--name JSON` gives the handler the parsed JSON (any
  // type; check it, e.g. with merge_json_object); `--name.a.b VALUE` gives it the object
  // {"a": {"b": parse_json_flag_value(VALUE)}}. Invalid JSON text is a UsageError. Both
  // forms may be repeated and mixed; the handler sees them in command-line order.
  void add_json(std::string name, std::string help,
                std::function<void(const nlohmann::json& update)> handler,
                std::string value_name = "JSON", std::string default_text = "");
  // A family of flags sharing a prefix, e.g. "--speculative-config." for
  // "--speculative-config.method": handler(suffix, value) for any suffix.
  void add_prefix(std::string prefix, std::string help,
                  std::function<void(std::string_view suffix, std::string_view value)> handler);
  // Another spelling of the declared flag `name`, e.g. alias("-tp", "--tensor-parallel-size").
  void alias(std::string alias, std::string name);
  // Appends a free-form section to help() (examples, notes).
  void add_help_section(std::string title, std::string text);

  // Parses `args` (without program and command names). Returns false when help was asked
  // for (the help text is already printed on stdout). Throws UsageError on mistakes.
  bool parse(std::span<const std::string> args);

  std::string help() const;
  // The part of help() matching `keyword` (vLLM's --help=KEYWORD): a group whose title
  // matches, else every flag whose name contains it; "all" gives help().
  std::string help_matching(std::string_view keyword) const;
  // Every declared flag name (without aliases and prefixes), for suggestions and tests.
  std::vector<std::string> flag_names() const;
  // True if the flag was given on the command line (after parse); `name` is the declared
  // name (an alias or a `--json-flag.KEY` counts as its flag), or for a prefix family the
  // full dotted name.
  bool was_set(std::string_view name) const;
  // The flags given, in command-line order, as declared names (repeats kept).
  const std::vector<std::string>& given() const { return seen_; }

 private:
  enum class Arity { kSwitch, kOne, kList };
  struct Flag {
    std::string name;
    std::string help;
    std::string value_name;  // empty for switches
    Arity arity = Arity::kOne;
    std::function<void(std::string_view)> set;
    std::function<void(std::vector<std::string>)> set_list;
    std::string default_text;
    std::vector<std::string> aliases;
    std::size_t group = 0;
    std::size_t order = 0;  // declaration order among flags and prefixes, for help()
  };
  struct Positional {
    std::string name;
    std::string help;
    std::string* out;
    bool required;
  };
  struct Prefix {
    std::string prefix;
    std::string help;
    std::function<void(std::string_view, std::string_view)> handler;
    std::size_t group = 0;
    std::size_t order = 0;
    std::string owner;  // the JSON flag it belongs to (add_json), reported by given()
  };
  struct Section {
    std::string title;
    std::string text;
  };

  Flag* find(std::string_view name);
  void add_flag(Flag flag);
  std::string render_flag(const Flag& flag) const;
  std::string render_prefix(const Prefix& prefix) const;
  std::string render_group(std::size_t group) const;
  [[noreturn]] void unknown_flag(const std::string& name) const;

  std::string usage_;
  std::string description_;
  std::vector<Flag> flags_;
  std::vector<Positional> positionals_;
  std::vector<Prefix> prefixes_;
  std::vector<Section> sections_;
  std::vector<std::string> groups_{""};  // index 0: flags declared before any group()
  std::vector<std::string> seen_;
  std::size_t declared_ = 0;
};

// Value parsers shared by the commands; each throws UsageError naming `flag`.
int64_t parse_int(std::string_view flag, std::string_view text);
// An integer with vLLM's human-readable suffixes: k, m, g, t multiply by powers of 1000
// and allow decimals (25.6k = 25600); K, M, G, T by powers of 1024 (1K = 1024, 8G).
int64_t parse_human_int(std::string_view flag, std::string_view text);
double parse_double(std::string_view flag, std::string_view text);
// true/1/yes/on or false/0/no/off.
bool parse_bool(std::string_view flag, std::string_view text);
// `text` itself when it is one of `choices`; otherwise a UsageError listing the choices and
// suggesting the closest.
std::string parse_choice(std::string_view flag, std::string_view text,
                         std::span<const std::string_view> choices);
// vLLM's reading of a `--name.key VALUE` value: JSON when it parses (5, true, [1], "x"),
// else a human-readable integer (16k), else the text itself.
nlohmann::json parse_json_flag_value(std::string_view text);
// Merges the JSON object `update` into `target` (nested objects key by key, anything else
// replaced). A non-object `update` is a UsageError naming `flag`.
void merge_json_object(nlohmann::json& target, std::string_view flag, const nlohmann::json& update);

}  // namespace flint::cli
