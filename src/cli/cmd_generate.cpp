// `flint generate MODEL (--prompt TEXT... | --token-ids IDS... | --prompts-file FILE)`: a
// thin client of the engine. Every prompt is one request; they run as one batch (continuous
// batching, chunked prefill, prefix caching, the sampling flags); outputs are printed in
// prompt order, a single prompt's as it is generated. Speeds and engine statistics go to
// stderr.
#include <cstdio>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "base/log.h"
#include "base/strings.h"
#include "base/timer.h"
#include "cli/command.h"
#include "cli/engine_flags.h"
#include "cli/flags.h"
#include "cli/ranks.h"
#include "cli/run_flags.h"
#include "engine/engine.h"
#include "formats/checkpoint.h"
#include "model/deepseek_v4/model.h"
#include "text/stop_strings.h"
#include "text/tokenizer.h"

namespace flint::cli {
namespace {

struct Prompt {
  std::string label;  // where it came from, for messages
  std::string text;   // empty for token ids
  std::vector<int32_t> ids;
};

std::vector<Prompt> read_prompts(const std::vector<std::string>& texts,
                                 const std::vector<std::string>& id_lists,
                                 const std::string& file) {
  std::vector<Prompt> prompts;
  for (size_t i = 0; i < texts.size(); ++i) {
    if (texts[i].empty()) throw UsageError("--prompt number {} is empty", i + 1);
    prompts.push_back({fmt::format("--prompt {}", i + 1), texts[i], {}});
  }
  for (size_t i = 0; i < id_lists.size(); ++i) {
    Prompt p{fmt::format("--token-ids {}", i + 1), "", {}};
    for (int64_t id : parse_int_list(id_lists[i], "--token-ids"))
      p.ids.push_back(static_cast<int32_t>(id));
    if (p.ids.empty()) throw UsageError("--token-ids number {} is empty", i + 1);
    prompts.push_back(std::move(p));
  }
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) throw UsageError("--prompts-file: cannot read '{}'", file);
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      if (line.empty()) continue;  // blank lines separate nothing
      prompts.push_back({fmt::format("{}:{}", file, n), line, {}});
    }
  }
  if (prompts.empty()) {
    throw UsageError("give a prompt: --prompt TEXT, --token-ids IDS or --prompts-file FILE");
  }
  return prompts;
}

// One sample's text: decoded incrementally, stop strings held back and applied.
struct Output {
  std::optional<text::StreamDecoder> decoder;
  std::optional<text::StopStrings> stops;
  std::string text;
  std::vector<int32_t> ids;
  std::vector<int32_t> all_ids;  // every generated id, stop strings or not
  std::string finish;
  bool stopped = false;
};

int run_generate(std::span<const std::string> args) {
  std::string model_dir, prompts_file;
  std::vector<std::string> texts, id_lists;
  bool print_ids = false, no_bos = false, print_drafts = false;
  RunFlags run;
  ParallelFlags parallel;
  EngineFlags engine_flags;
  SamplingFlags sampling;
  sampling.params.temperature = 0.0;
  sampling.params.max_tokens = 32;
  engine_flags.max_model_len = 4096;
  FlagParser parser(
      "generate MODEL (--prompt TEXT... | --token-ids IDS... | --prompts-file FILE) [flags]",
      "Generates continuations of prompts with the engine, all prompts as one batch, and prints "
      "them in prompt order (a single prompt's while it is generated). Speeds and engine "
      "statistics go to stderr. Greedy by default (--temperature 0).");
  parser.positional("MODEL", "DeepSeek-V4 checkpoint directory", &model_dir);
  parser.add_list(
      "--prompt", "prompts as text (tokenized with the checkpoint's tokenizer; BOS prepended)",
      [&](std::vector<std::string> v) { texts.insert(texts.end(), v.begin(), v.end()); }, "TEXT");
  parser.add_list(
      "--token-ids", "prompts as comma-separated token ids",
      [&](std::vector<std::string> v) { id_lists.insert(id_lists.end(), v.begin(), v.end()); },
      "IDS");
  parser.add_string("--prompts-file", "a file with one prompt per line", &prompts_file);
  parser.add_bool("--print-ids", "print the generated token ids instead of text", &print_ids);
  parser.add_bool("--no-bos", "do not prepend BOS to text prompts", &no_bos);
  parser.add_bool("--print-drafts",
                  "speculative decoding: print each verified draft as a JSON line on stdout "
                  "(context, anchor, drafts, confidence, accepted), then each sample's tokens; "
                  "the text goes to stderr",
                  &print_drafts);
  sampling.add_to(parser);
  engine_flags.add_to(parser);
  parser.group("Run");
  run.add_to(parser);
  parser.group("Parallel");
  parallel.add_to(parser);
  if (!parser.parse(args)) return kExitOk;
  engine_flags.resolve_speculative(model_dir);
  const engine::DebugFault fault = engine::DebugFault::parse_optional(parallel.debug_fault);
  std::vector<Prompt> prompts = read_prompts(texts, id_lists, prompts_file);
  QuantSimulation sim = run.apply();

  Ranks ranks =
      Ranks::start(parallel.tensor_parallel_size, static_cast<double>(parallel.collective_timeout));
  auto model = ranks.load_model(model_dir, parallel.expert_parallel, fault);
  const dsv4::Config& config = model->config();
  std::optional<text::Tokenizer> tokenizer;
  bool any_text =
      std::any_of(prompts.begin(), prompts.end(), [](const Prompt& p) { return !p.text.empty(); });
  if (any_text || !print_ids) tokenizer = text::Tokenizer::load(model_dir);
  for (Prompt& p : prompts) {
    if (p.text.empty()) continue;
    p.ids = tokenizer->encode(p.text, true);
    if (!no_bos && (p.ids.empty() || p.ids[0] != config.bos_token_id))
      p.ids.insert(p.ids.begin(), static_cast<int32_t>(config.bos_token_id));
  }

  engine::EngineConfig ec =
      engine_flags.config(config, static_cast<int64_t>(Checkpoint::open(model_dir).total_bytes()));
  ec.quant_simulation = sim;
  ec.record_drafts = print_drafts;
  ec.debug_fault = fault;
  if (!ranks.leader()) {  // rank 0 schedules and samples; this rank runs its steps
    engine::follow_rank0(*model, ec, *ranks.comm(), fault);
    return kExitOk;
  }
  if (print_drafts && !ec.speculative.enabled()) {
    throw UsageError("--print-drafts needs --speculative-config (a method and draft tokens)");
  }
  std::FILE* text_out = print_drafts ? stderr : stdout;
  engine::Engine engine(*model, ec);
  const int64_t n = sampling.params.n;
  const bool stream = prompts.size() == 1 && n == 1;
  std::map<std::pair<size_t, int32_t>, Output> outputs;
  std::vector<std::shared_ptr<engine::OutputQueue>> queues;
  Stopwatch watch;
  for (size_t i = 0; i < prompts.size(); ++i) {
    engine::EngineRequest r;
    r.id = std::to_string(i);
    r.prompt = prompts[i].ids;
    r.sampling = sampling.params;
    try {
      queues.push_back(engine.submit(std::move(r)));
    } catch (const Error& e) {
      throw Error("{}: {}", prompts[i].label, e.what());
    }
  }
  int64_t generated = 0, cached = 0, prompt_tokens = 0;
  for (size_t i = 0; i < queues.size(); ++i) {
    engine::RequestOutput ev;
    while (queues[i]->pop(ev)) {
      if (ev.finish == engine::FinishReason::kError)
        throw Error("{}: {}", prompts[i].label, ev.error);
      Output& out = outputs[{i, ev.sample}];
      if (!print_ids && !out.decoder) {
        out.decoder.emplace(*tokenizer, sampling.params.skip_special_tokens);
        out.stops.emplace(sampling.params.stop, sampling.params.include_stop_str_in_output);
      }
      for (const engine::DraftRecord& d : ev.drafts) {
        fmt::print("{}\n", nlohmann::json{{"prompt", i},
                                          {"sample", ev.sample},
                                          {"context", d.context},
                                          {"anchor", d.anchor},
                                          {"drafts", d.tokens},
                                          {"confidence", d.confidence},
                                          {"accepted", d.accepted}}
                               .dump());
      }
      out.all_ids.insert(out.all_ids.end(), ev.tokens.begin(), ev.tokens.end());
      std::string piece;
      for (int32_t t : ev.tokens) {
        if (out.stopped) break;
        out.ids.push_back(t);
        if (print_ids) {
          piece += fmt::format("{}{}", out.ids.size() == 1 ? "" : ",", t);
          continue;
        }
        piece += out.stops->push(out.decoder->push(t));
        if (out.stops->matched()) {
          out.stopped = true;
          out.finish = "stop";
          // One sample: stop the request (the engine may have run a step further; ignored).
          if (n == 1) engine.abort(ev.request_id);
        }
      }
      if (ev.finish != engine::FinishReason::kNone && !out.stopped) {
        if (!print_ids) {
          piece += out.stops->push(out.decoder->flush());
          piece += out.stops->flush();
        }
        out.finish = engine::finish_reason_name(ev.finish);
      }
      out.text += piece;
      if (stream) {
        fmt::print(text_out, "{}", piece);
        std::fflush(text_out);
      }
      if (ev.request_finished) {
        prompt_tokens += ev.usage.prompt_tokens;
        generated += ev.usage.completion_tokens;
        cached += ev.usage.cached_prompt_tokens;
      }
    }
  }
  const double seconds = watch.seconds();
  if (stream) {
    fmt::print(text_out, "\n");
  } else {
    for (auto& [key, out] : outputs) {
      fmt::print(text_out, "--- {}{} ({}) ---\n{}\n", prompts[key.first].label,
                 n > 1 ? fmt::format(", sample {}", key.second + 1) : "", out.finish, out.text);
    }
  }
  if (print_drafts) {
    for (auto& [key, out] : outputs) {
      std::vector<int32_t> all = prompts[key.first].ids;
      all.insert(all.end(), out.all_ids.begin(), out.all_ids.end());
      fmt::print(
          "{}\n",
          nlohmann::json{{"prompt", key.first}, {"sample", key.second}, {"tokens", all}}.dump());
    }
  }
  const engine::EngineStats s = engine.stats();
  spdlog::info(
      "{} prompt(s): {} prompt tokens ({} from the prefix cache{}), {} generated in {:.3f} s "
      "({:.1f} tokens/s overall); {} engine steps, {:.1f} tokens per step, {} preemptions",
      prompts.size(), prompt_tokens, cached,
      s.kv.disk ? fmt::format(", {} of them from disk", s.kv.disk_hit_tokens) : "", generated,
      seconds, static_cast<double>(prompt_tokens - cached + generated) / seconds, s.steps,
      s.steps ? static_cast<double>(s.step_tokens) / static_cast<double>(s.steps) : 0.0,
      s.preemptions);
  if (ec.speculative.enabled()) spdlog::info("{}", describe_speculation(s));
  return kExitOk;
}

}  // namespace

FLINT_COMMAND("generate", "generate continuations of prompts with the engine and report tokens/s",
              run_generate);

}  // namespace flint::cli
