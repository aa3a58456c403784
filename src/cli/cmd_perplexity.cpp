// `flint perplexity MODEL FILE`: the model's perplexity on a text (or a file of token ids),
// window by window from an empty context, as training programs report held-out loss.
#include <cmath>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/log.h"
#include "base/timer.h"
#include "cli/command.h"
#include "cli/flags.h"
#include "cli/ranks.h"
#include "cli/run_flags.h"
#include "cli/token_file.h"
#include "model/deepseek_v4/model.h"

namespace flint::cli {
namespace {

// -log softmax(row)[target], in double.
double nll(const float* row, int64_t vocab, int32_t target) {
  double max = row[0];
  for (int64_t v = 1; v < vocab; ++v) max = std::max(max, static_cast<double>(row[v]));
  double sum = 0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - max);
  return std::log(sum) + max - static_cast<double>(row[target]);
}

int run_perplexity(std::span<const std::string> args) {
  std::string model_dir, file, format = "text";
  int64_t context = 512, windows = 0;
  bool json = false;
  RunFlags run;
  ParallelFlags parallel;
  FlagParser parser(
      "perplexity MODEL FILE [flags]",
      "Prints the model's perplexity on FILE: windows of --context + 1 tokens, each run from "
      "an empty context, every token after the first of a window scored (the mean negative "
      "log-likelihood in nats, and its exp). All non-overlapping windows, or --windows N spread "
      "evenly as training programs sample held-out loss (window k starts at k * ((n - context "
      "- 1) / N)).");
  parser.positional("MODEL", "DeepSeek-V4 checkpoint directory", &model_dir);
  parser.positional("FILE", "the text (or token ids, --format) to score", &file);
  parser.add_string("--format",
                    "text (tokenized with the checkpoint's tokenizer, BOS first), u16 or i32 "
                    "(raw little-endian token ids, e.g. a training program's val.bin)",
                    &format);
  parser.add_int("--context", "tokens of context per window (each window scores this many)",
                 &context);
  parser.add_int("--windows", "score this many evenly spread windows (0: every whole window)",
                 &windows);
  parser.add_bool("--json", "print one JSON object instead of text", &json);
  parser.group("Run");
  run.add_to(parser);
  parser.group("Parallel");
  parallel.add_to(parser);
  if (!parser.parse(args)) return kExitOk;
  if (context < 1) throw UsageError("--context must be at least 1");
  if (windows < 0) throw UsageError("--windows must be >= 0");
  const QuantSimulation sim = run.apply();

  Ranks ranks =
      Ranks::start(parallel.tensor_parallel_size, static_cast<double>(parallel.collective_timeout));
  auto model = ranks.load_model(model_dir, parallel.expert_parallel,
                                engine::DebugFault::parse_optional(parallel.debug_fault));
  const dsv4::Config& config = model->config();
  const std::vector<int32_t> ids = read_token_file(model_dir, file, format, config);
  const auto n = static_cast<int64_t>(ids.size());
  if (n < context + 1) {
    throw Error("{}: {} tokens, fewer than one window of --context {} + 1", file, n, context);
  }
  std::vector<int64_t> starts;
  if (windows == 0) {
    for (int64_t s = 0; s + context + 1 <= n; s += context) starts.push_back(s);
  } else {
    const int64_t step = std::max<int64_t>(1, (n - context - 1) / windows);
    for (int64_t k = 0; k < windows; ++k) starts.push_back(k * step);
  }

  Stopwatch watch;
  const int64_t V = config.vocab_size;
  double total = 0;
  int64_t scored = 0;
  for (int64_t s : starts) {
    dsv4::SequenceState state = model->new_sequence();
    const std::span<const int32_t> window =
        std::span<const int32_t>(ids).subspan(static_cast<size_t>(s), static_cast<size_t>(context));
    dsv4::ForwardRequest req{&state, window, true};
    const std::vector<float> logits = model->forward({&req, 1}, sim);
    for (int64_t t = 0; t < context; ++t)
      total += nll(&logits[static_cast<size_t>(t * V)], V, ids[static_cast<size_t>(s + t + 1)]);
    scored += context;
  }
  const double seconds = watch.seconds();
  if (!ranks.leader()) return kExitOk;
  const double mean = total / static_cast<double>(scored);
  if (json) {
    fmt::print("{}\n", nlohmann::json{{"tokens", n},
                                      {"windows", starts.size()},
                                      {"context", context},
                                      {"scored", scored},
                                      {"mean_nll", mean},
                                      {"perplexity", std::exp(mean)},
                                      {"seconds", seconds}}
                           .dump());
  } else {
    fmt::print(
        "{} tokens scored in {} windows of {}: mean negative log-likelihood {:.6f} nats, "
        "perplexity {:.4f}\n",
        scored, starts.size(), context, mean, std::exp(mean));
  }
  spdlog::info("{} tokens in {:.2f} s ({:.1f} tokens/s)", scored, seconds,
               static_cast<double>(scored) / seconds);
  return kExitOk;
}

}  // namespace

FLINT_COMMAND("perplexity", "the model's perplexity on a text or token file, window by window",
              run_perplexity);

}  // namespace flint::cli
