// Private to src/cli: what the three files behind serve_args.h share. Not included outside
// src/cli; the API is serve_args.h.
//
//   serve_args.cpp        parse_serve_args and the other entry points: declares the rows on a
//                         FlagParser, validates the combination, renders help, markdown and
//                         the start-up lines, reads the machine's RAM and cores
//   serve_flag_table.cpp  rows(): one row per flag with its parser, vLLM meaning and what
//                         flint does with it
//   speculative_args.cpp  the --speculative-config keys: parsing, defaults, explanation
#pragma once

#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/flags.h"
#include "cli/serve_args.h"

namespace flint::cli::serve_internal {

using Json = nlohmann::json;

// parse_choice with the choices written in place: one_of(flag, text, {"fcfs", "priority"}).
inline std::string one_of(std::string_view flag, std::string_view text,
                          std::initializer_list<std::string_view> choices) {
  return parse_choice(flag, text,
                      std::span<const std::string_view>(choices.begin(), choices.size()));
}

// ---------------------------------------------------------------------------------------
// The flag table (serve_flag_table.cpp)

enum class Kind { kSwitch, kValue, kList, kConfig };
enum class Status {
  kApplied,        // flint acts on it now
  kRecorded,       // kept for a part of flint not wired into `flint serve` yet (component)
  kNotApplicable,  // accepted for vLLM compatibility; nothing to do on this machine
};

struct Row {
  std::string_view name;
  std::string_view aliases;  // other spellings, space-separated
  std::string_view group;
  Kind kind = Kind::kValue;
  std::string_view value_name;
  std::string_view default_text;
  std::string_view vllm;  // what the flag does in vLLM ("" for flint's own flags)
  Status status = Status::kRecorded;
  std::string_view component;  // the part of flint that will use it (kRecorded)
  std::string_view flint;      // what flint does with it; "{}" stands for the value
  // kSwitch gets "true"/"false"/the text after '='; kValue the value.
  void (*set)(ServeArgs&, std::string_view flag, std::string_view value) = nullptr;
  void (*set_list)(ServeArgs&, std::string_view flag, std::vector<std::string> values) = nullptr;
  // kConfig: each JSON update (whole or --name.KEY VALUE), and the object echoed in the log.
  void (*set_json)(ServeArgs&, std::string_view flag, const Json& update) = nullptr;
  const Json& (*shown)(const ServeArgs&) = nullptr;
  std::string (*explain)(const ServeArgs&, const MachineInfo&) = nullptr;  // replaces `flint`
  bool secret = false;                                                     // never echo the value
};

// Every serve flag once (no aliases as rows), the rows of a group adjacent. Built on first
// call (thread-safe static) and kept for the life of the program.
const std::vector<Row>& rows();

// ---------------------------------------------------------------------------------------
// --speculative-config (speculative_args.cpp)

// Applies one key of --speculative-config (dashes read as underscores) and records it in
// s.given; unknown keys and bad values throw UsageError naming the key.
void apply_spec_key(SpeculativeArgs& s, std::string_view raw_key, const Json& value);

// Fills defaults and checks the combination once every key is known; `served_model` is the
// MODEL directory a draft model must be the same as.
void resolve_speculative(SpeculativeArgs& s, const std::string& served_model);

// The start-up line of --speculative-config (the row's `explain`).
std::string explain_speculative(const ServeArgs& a, const MachineInfo&);

// Every key in table order with its help text ("accepted, no effect: WHY" for keys kept
// only for vLLM compatibility), for --help and the markdown table.
std::vector<std::pair<std::string_view, std::string>> speculative_key_docs();

}  // namespace flint::cli::serve_internal
