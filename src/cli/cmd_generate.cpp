// `flint generate MODEL (--token-ids IDS | --prompt TEXT) -n N`: prefill, then decode N
// tokens; prints the continuation and the prefill and decode speeds.
#include <cstdio>

#include <fmt/format.h>

#include "base/log.h"
#include "base/strings.h"
#include "base/timer.h"
#include "cli/command.h"
#include "cli/flags.h"
#include "cli/run_flags.h"
#include "engine/sampler.h"
#include "model/deepseek_v4/model.h"
#include "text/tokenizer.h"

namespace flint::cli {
namespace {

int run_generate(std::span<const std::string> args) {
  std::string model_dir, token_ids, prompt;
  int64_t max_tokens = 32;
  double temperature = 0.0, top_p = 1.0;
  int64_t top_k = 0, seed = 0;
  bool print_ids = false, ignore_eos = false, no_bos = false;
  RunFlags run;
  FlagParser parser(
      "generate MODEL (--token-ids IDS | --prompt TEXT) [-n N] [flags]",
      "Generates a continuation of a prompt with one sequence: a prefill call, then one decode "
      "call "
      "per token. Prints the continuation on stdout and the prefill and decode speeds on stderr.");
  parser.positional("MODEL", "DeepSeek-V4 checkpoint directory", &model_dir);
  parser.add_string("--token-ids", "the prompt as comma-separated token ids", &token_ids);
  parser.add_string("--prompt",
                    "the prompt as text (tokenized with the checkpoint's tokenizer; BOS prepended)",
                    &prompt);
  parser.add_int("-n", "tokens to generate", &max_tokens);
  parser.add_int("--max-tokens", "same as -n", &max_tokens);
  parser.add_double("--temperature", "0 = greedy", &temperature);
  parser.add_double("--top-p", "nucleus sampling mass in (0, 1]", &top_p);
  parser.add_int("--top-k", "keep the k most likely tokens (0 = all)", &top_k);
  parser.add_int("--seed", "sampling seed", &seed);
  parser.add_bool("--print-ids", "print the generated token ids instead of text", &print_ids);
  parser.add_bool("--ignore-eos", "keep generating after the end-of-sentence token", &ignore_eos);
  parser.add_bool("--no-bos", "do not prepend BOS to --prompt", &no_bos);
  run.add_to(parser);
  if (!parser.parse(args)) return kExitOk;
  if (token_ids.empty() == prompt.empty())
    throw UsageError("give exactly one of --token-ids and --prompt");
  if (max_tokens < 0) throw UsageError("-n must be >= 0");
  QuantSimulation sim = run.apply();
  SamplingParams sampling{temperature, top_p, top_k, 0.0, static_cast<uint64_t>(seed)};
  try {
    validate(sampling);
  } catch (const Error& e) {
    throw UsageError("{}", e.what());
  }

  auto model = dsv4::load_model(model_dir);
  const dsv4::Config& config = model->config();
  std::optional<text::Tokenizer> tokenizer;
  if (!prompt.empty() || !print_ids) tokenizer = text::Tokenizer::load(model_dir);

  std::vector<int32_t> ids;
  if (!prompt.empty()) {
    ids = tokenizer->encode(prompt, true);
    if (!no_bos && (ids.empty() || ids[0] != config.bos_token_id))
      ids.insert(ids.begin(), static_cast<int32_t>(config.bos_token_id));
  } else {
    for (int64_t id : parse_int_list(token_ids, "--token-ids")) {
      if (id < 0 || id >= config.vocab_size)
        throw Error("--token-ids: {} is outside the vocabulary", id);
      ids.push_back(static_cast<int32_t>(id));
    }
  }
  if (ids.empty()) throw UsageError("the prompt is empty");

  Sampler sampler(sampling);
  dsv4::SequenceState state = model->new_sequence();
  Stopwatch watch;
  dsv4::ForwardRequest req{&state, ids, false};
  std::vector<float> logits = model->forward({&req, 1}, sim);
  double prefill_seconds = watch.seconds();

  std::optional<text::StreamDecoder> stream;
  if (!print_ids) stream.emplace(*tokenizer);
  std::vector<int32_t> generated;
  watch.restart();
  for (int64_t i = 0; i < max_tokens; ++i) {
    int32_t next = sampler.sample(logits);
    generated.push_back(next);
    if (print_ids) {
      fmt::print("{}{}", i == 0 ? "" : ",", next);
    } else {
      fmt::print("{}", stream->push(next));
    }
    std::fflush(stdout);
    bool eos = std::find(config.eos_token_ids.begin(), config.eos_token_ids.end(), next) !=
               config.eos_token_ids.end();
    if ((eos && !ignore_eos) || i + 1 == max_tokens) break;
    dsv4::ForwardRequest step{&state, {&generated.back(), 1}, false};
    logits = model->forward({&step, 1}, sim);
  }
  if (stream) fmt::print("{}", stream->flush());
  fmt::print("\n");
  double decode_seconds = watch.seconds();
  spdlog::info(
      "prefill: {} tokens in {:.3f} s ({:.1f} tokens/s); decode: {} tokens in {:.3f} s ({:.1f} "
      "tokens/s)",
      ids.size(), prefill_seconds, static_cast<double>(ids.size()) / prefill_seconds,
      generated.size(), decode_seconds,
      generated.size() > 1 ? static_cast<double>(generated.size() - 1) / decode_seconds : 0.0);
  return kExitOk;
}

}  // namespace

FLINT_COMMAND("generate", "generate a continuation of a prompt and report tokens/s", run_generate);

}  // namespace flint::cli
