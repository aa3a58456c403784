// The entry points of serve_args.h: parse_serve_args declares every row of the flag table
// (serve_flag_table.cpp) on a FlagParser and validates the result; the help text, the
// markdown of docs/cli.md and the start-up lines are rendered from the same rows. The
// --speculative-config keys live in speculative_args.cpp.
#include "cli/serve_args.h"

#include <algorithm>
#include <cstdio>
#include <fstream>

#include <fmt/format.h>

#include "base/cpu_topology.h"
#include "base/strings.h"
#include "cli/flags.h"
#include "cli/serve_args_internal.h"

namespace flint::cli {

namespace {

using serve_internal::Json;
using serve_internal::Kind;
using serve_internal::Row;
using serve_internal::rows;
using serve_internal::Status;

// Replaces every "{}" in `text` by `value` (the texts hold JSON examples, so no fmt).
std::string fill(std::string_view text, std::string_view value) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '{' && i + 1 < text.size() && text[i + 1] == '}') {
      out += value;
      ++i;
    } else {
      out += text[i];
    }
  }
  return out;
}

const Row* find_row(std::string_view name) {
  for (const auto& row : rows()) {
    if (row.name == name) return &row;
  }
  return nullptr;
}

std::string status_note(const Row& row) {
  switch (row.status) {
    case Status::kApplied:
      return "";
    case Status::kRecorded:
      return fmt::format(" [recorded for the {}; not wired into flint serve yet]", row.component);
    case Status::kNotApplicable:
      return " [accepted; no effect on this machine]";
  }
  return "";
}

// The flint column of help and docs: "flint runs no Python" reads "flint: runs no Python".
std::string flint_column(const Row& row) {
  std::string text = fill(row.flint, row.value_name.empty() ? "it" : row.value_name);
  if (text.starts_with("flint ")) text.erase(0, 6);
  return text;
}

std::string row_help(const Row& row) {
  std::string flint = flint_column(row);
  std::string note = row.status == Status::kNotApplicable ? " [no effect here]"
                     : row.status == Status::kRecorded
                         ? fmt::format(" [{}; not wired in yet]", row.component)
                         : "";
  if (row.vllm.empty()) return fmt::format("flint only: {}.{}", flint, note);
  return fmt::format("{} flint: {}.{}", row.vllm, flint, note);
}

void note_given(ServeArgs& args, std::string_view name, std::string value) {
  for (auto& g : args.given) {
    if (g.name == name) {
      g.value = std::move(value);
      return;
    }
  }
  args.given.push_back({std::string(name), std::move(value)});
}

constexpr std::string_view kDescription =
    "Serve a DeepSeek-V4 checkpoint over an OpenAI-compatible HTTP API. The flags are those of "
    "`vllm serve`: each is implemented, or accepted with a start-up log line saying what it "
    "means here and why it does not apply on a CPU. Flags may use underscores "
    "(--max_model_len), --flag=value, --no-FLAG for switches; JSON flags also take "
    "--flag.KEY VALUE, where VALUE is read as JSON when it parses and as a string otherwise. "
    "Sizes accept 16k (16000) and 16K (16384).";

// Declares every row on `parser`; handlers write into `args`.
void declare(FlagParser& parser, ServeArgs& args) {
  std::string_view group;
  for (const Row& row : rows()) {
    if (row.group != group) {
      group = row.group;
      parser.group(std::string(group));
    }
    const Row* r = &row;
    std::string name(row.name);
    switch (row.kind) {
      case Kind::kSwitch:
        parser.add_custom(
            name, row_help(row), false,
            [&args, r](std::string_view v) {
              r->set(args, r->name, v);
              note_given(args, r->name, parse_bool(r->name, v) ? "true" : "false");
            },
            "", std::string(row.default_text));
        break;
      case Kind::kValue:
        parser.add_custom(
            name, row_help(row), true,
            [&args, r](std::string_view v) {
              r->set(args, r->name, v);
              note_given(args, r->name, std::string(v));
            },
            std::string(row.value_name), std::string(row.default_text));
        break;
      case Kind::kList:
        parser.add_list(
            name, row_help(row),
            [&args, r](std::vector<std::string> v) {
              std::string shown =
                  r->secret ? fmt::format("({} given, not shown)", v.size()) : join(v, " ");
              r->set_list(args, r->name, std::move(v));
              note_given(args, r->name, std::move(shown));
            },
            std::string(row.value_name), std::string(row.default_text));
        break;
      case Kind::kConfig:
        parser.add_json(
            name, row_help(row),
            [&args, r](const Json& update) {
              r->set_json(args, r->name, update);
              note_given(args, r->name, "");
            },
            std::string(row.value_name), std::string(row.default_text));
        break;
    }
    for (const auto& alias : split(row.aliases, ' ')) {
      if (!alias.empty()) parser.alias(alias, name);
    }
  }
  std::string keys;
  for (const auto& [name, text] : serve_internal::speculative_key_docs()) {
    keys += fmt::format("  {:<30} {}\n", name, text);
  }
  keys.pop_back();  // the section adds its own line break
  parser.add_help_section("--speculative-config keys", keys);
  parser.add_help_section("example (DeepSeek-V4-Flash-0731 with its DSpark draft)",
                          "  flint serve /models/DeepSeek-V4-Flash-0731 --max-model-len 524288 \\\n"
                          "    --kv-cache-dtype fp8 --block-size 256 --enable-prefix-caching \\\n"
                          "    --speculative-config.method dspark \\\n"
                          "    --speculative-config.model /models/DeepSeek-V4-Flash-0731 \\\n"
                          "    --speculative-config.num_speculative_tokens 5 \\\n"
                          "    --enable-auto-tool-choice --tool-call-parser deepseek_v4 "
                          "--reasoning-parser deepseek_v4");
}

void validate(ServeArgs& args) {
  const auto& s = args.scheduler;
  if (s.max_num_seqs && s.max_num_batched_tokens && *s.max_num_batched_tokens < *s.max_num_seqs) {
    throw UsageError("--max-num-batched-tokens ({}) must be at least --max-num-seqs ({})",
                     *s.max_num_batched_tokens, *s.max_num_seqs);
  }
  if (!s.enable_chunked_prefill && s.max_num_batched_tokens && args.model.max_model_len &&
      *s.max_num_batched_tokens < *args.model.max_model_len) {
    throw UsageError(
        "--max-num-batched-tokens ({}) is smaller than --max-model-len ({}) with "
        "chunked prefill off: long prompts could never run; raise it or drop "
        "--no-enable-chunked-prefill",
        *s.max_num_batched_tokens, *args.model.max_model_len);
  }
  if (s.max_long_partial_prefills > s.max_num_partial_prefills) {
    throw UsageError(
        "--max-long-partial-prefills ({}) must not exceed --max-num-partial-prefills "
        "({})",
        s.max_long_partial_prefills, s.max_num_partial_prefills);
  }
  if (args.server.enable_auto_tool_choice && !args.server.tool_call_parser) {
    args.server.tool_call_parser = "deepseek_v4";
  }
  serve_internal::resolve_speculative(args.speculative, args.model.path);
}

}  // namespace

std::string_view to_string(KvCacheDtype dtype) {
  switch (dtype) {
    case KvCacheDtype::kAuto:
      return "auto";
    case KvCacheDtype::kFp8E4m3:
      return "fp8_e4m3";
    case KvCacheDtype::kBf16:
      return "bf16";
  }
  return "?";
}

std::string_view to_string(SpecMethod method) {
  switch (method) {
    case SpecMethod::kNone:
      return "none";
    case SpecMethod::kAuto:
      return "auto";
    case SpecMethod::kDSpark:
      return "dspark";
    case SpecMethod::kMtp:
      return "mtp";
    case SpecMethod::kNgram:
      return "ngram";
  }
  return "?";
}

MachineInfo read_machine_info() {
  MachineInfo info;
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string rest;
  while (meminfo >> key >> kib) {
    std::getline(meminfo, rest);
    if (key == "MemTotal:") info.ram_bytes = kib * 1024;
    if (key == "MemAvailable:") info.available_bytes = kib * 1024;
  }
  // A container may see the host's RAM in /proc/meminfo; its cgroup limit is what counts.
  for (const char* path :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream limit_file(path);
    int64_t limit = 0;
    if (limit_file >> limit && limit > 0 && (info.ram_bytes == 0 || limit < info.ram_bytes)) {
      info.ram_bytes = limit;
    }
  }
  info.cores = default_thread_count();
  return info;
}

int64_t effective_threads(const ServeArgs& args, const MachineInfo& machine) {
  return args.flint.threads > 0 ? args.flint.threads : std::max<int64_t>(1, machine.cores);
}

int64_t memory_budget_bytes(const ServeArgs& args, const MachineInfo& machine) {
  return static_cast<int64_t>(args.cache.gpu_memory_utilization *
                              static_cast<double>(machine.ram_bytes));
}

ServeArgs parse_serve_args(std::span<const std::string> argv, std::string_view command,
                           std::string_view description) {
  ServeArgs args;
  for (const auto& arg : argv) {
    if (arg == "--help=markdown") {
      std::fputs(serve_flags_markdown().c_str(), stdout);
      args.help = true;
      return args;
    }
  }
  std::string positional_model;
  FlagParser parser(fmt::format("{} MODEL [flags]", command),
                    std::string(description.empty() ? kDescription : description));
  parser.positional("MODEL",
                    "the checkpoint directory (config.json, *.safetensors, tokenizer.json)",
                    &positional_model, /*required=*/false);
  declare(parser, args);
  if (!parser.parse(argv)) {
    ServeArgs help;
    help.help = true;
    return help;
  }
  if (!positional_model.empty()) {
    if (!args.model.path.empty() && args.model.path != positional_model) {
      throw UsageError("two models given: '{}' and --model '{}'", positional_model,
                       args.model.path);
    }
    args.model.path = positional_model;
  }
  if (args.model.path.empty()) {
    throw UsageError("missing MODEL, the checkpoint directory (usage: flint {} MODEL [flags])",
                     command);
  }
  validate(args);
  return args;
}

std::vector<std::string> explain_serve_args(const ServeArgs& args, const MachineInfo& machine) {
  std::vector<std::string> lines;
  for (const GivenFlag& given : args.given) {
    const Row* row = find_row(given.name);
    if (row == nullptr) continue;  // not reachable: every given flag comes from the table
    std::string shown;
    std::string text = row->explain ? row->explain(args, machine) : fill(row->flint, given.value);
    switch (row->kind) {
      case Kind::kSwitch:
        if (given.value == "false") {
          shown = "=false";
          text = "off; when on, " + text;
        }
        break;
      case Kind::kValue:
      case Kind::kList:
        shown = " " + given.value;
        break;
      case Kind::kConfig:
        shown = " " + row->shown(args).dump();
        break;
    }
    lines.push_back(fmt::format("{}{}: {}{}", row->name, shown, text, status_note(*row)));
  }
  return lines;
}

std::string serve_help() {
  ServeArgs args;
  std::string model;
  FlagParser parser("serve MODEL [flags]", std::string(kDescription));
  parser.positional("MODEL",
                    "the checkpoint directory (config.json, *.safetensors, tokenizer.json)", &model,
                    false);
  declare(parser, args);
  return parser.help();
}

std::vector<std::string> serve_flag_names() {
  std::vector<std::string> names;
  for (const auto& row : rows()) names.emplace_back(row.name);
  return names;
}

std::string serve_flags_markdown() {
  std::string out;
  std::string_view group;
  for (const Row& row : rows()) {
    if (row.group != group) {
      group = row.group;
      out += fmt::format("\n### {}\n\n| flag | vLLM | flint |\n|---|---|---|\n", group);
    }
    std::string flag = fmt::format("`{}`", row.name);
    for (const auto& alias : split(row.aliases, ' ')) {
      if (!alias.empty()) flag += fmt::format(", `{}`", alias);
    }
    if (!row.value_name.empty()) flag += fmt::format(" {}", row.value_name);
    if (row.kind == Kind::kConfig) flag += fmt::format(", `{}.KEY` VALUE", row.name);
    if (!row.default_text.empty()) flag += fmt::format(" (default {})", row.default_text);
    std::string flint = flint_column(row);
    std::string note =
        row.status == Status::kNotApplicable ? " **No effect here.**"
        : row.status == Status::kRecorded
            ? fmt::format(" *(Recorded for the {}; not wired into `flint serve` yet.)*",
                          row.component)
            : "";
    out += fmt::format("| {} | {} | {}.{} |\n", flag, row.vllm.empty() ? "(flint only)" : row.vllm,
                       flint, note);
  }
  out += "\n### `--speculative-config` keys\n\n| key | flint |\n|---|---|\n";
  for (const auto& [name, text] : serve_internal::speculative_key_docs()) {
    out += fmt::format("| `{}` | {} |\n", name, text);
  }
  std::string escaped;
  for (char c : out) {
    if (c == '|' && !escaped.empty() && escaped.back() != '\n' && escaped.back() != ' ' &&
        escaped.back() != '-') {
      escaped += "\\|";  // a '|' inside a cell, e.g. "auto|vllm|DIR"
    } else {
      escaped += c;
    }
  }
  return escaped;
}

}  // namespace flint::cli
