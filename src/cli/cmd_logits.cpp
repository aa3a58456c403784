// `flint logits MODEL --token-ids 0,15,27 --output FILE.npy`: float32 logits [n, vocab] for
// every position, in one prefill call or (--incremental) one token per call.
#include <fmt/format.h>

#include "base/log.h"
#include "base/strings.h"
#include "base/timer.h"
#include "cli/command.h"
#include "cli/flags.h"
#include "cli/ranks.h"
#include "cli/run_flags.h"
#include "formats/npy.h"
#include "formats/npz.h"
#include "model/deepseek_v4/model.h"

namespace flint::cli {
namespace {

int run_logits(std::span<const std::string> args) {
  std::string model_dir, token_ids, output, dump;
  bool incremental = false;
  int64_t chunk = 0;
  RunFlags run;
  ParallelFlags parallel;
  FlagParser parser(
      "logits MODEL --token-ids IDS --output FILE.npy [flags]",
      "Computes the logits of every position of a token sequence and writes them as a float32 "
      "NumPy "
      "array of shape [n_tokens, vocab]. Used to check flint against reference implementations.");
  parser.positional("MODEL", "DeepSeek-V4 checkpoint directory", &model_dir);
  parser.add_string("--token-ids", "comma-separated token ids, e.g. 0,15,27", &token_ids);
  parser.add_string("--output", "the .npy file to write", &output);
  parser.add_bool("--incremental", "one forward call per token instead of one prefill call",
                  &incremental);
  parser.add_int("--chunk", "prefill in chunks of this many tokens (0: one call)", &chunk);
  parser.add_string(
      "--dump",
      "also write the hidden streams to this .npz: L{i}.streams_in (each layer's input) and "
      "final_streams, [n, hc_mult, hidden] each, and logits (for layer-by-layer comparisons)",
      &dump);
  run.add_to(parser);
  parser.group("Parallel");
  parallel.add_to(parser);
  if (!parser.parse(args)) return kExitOk;
  if (output.empty()) throw UsageError("--output FILE.npy is required");
  std::vector<int64_t> ids64 = parse_int_list(token_ids, "--token-ids");
  if (ids64.empty()) throw UsageError("--token-ids must name at least one token");
  if (chunk < 0) throw UsageError("--chunk must be >= 0");
  QuantSimulation sim = run.apply();

  // Every rank runs the same calls on its part of the weights; rank 0 writes the files.
  Ranks ranks = Ranks::start(parallel.tensor_parallel_size,
                             static_cast<double>(parallel.collective_timeout));
  auto model = ranks.load_model(model_dir, parallel.expert_parallel,
                                engine::DebugFault::parse_optional(parallel.debug_fault));
  const int64_t vocab = model->config().vocab_size;
  std::vector<int32_t> ids;
  for (int64_t id : ids64) {
    if (id < 0 || id >= vocab)
      throw Error("--token-ids: {} is outside the vocabulary [0, {})", id, vocab);
    ids.push_back(static_cast<int32_t>(id));
  }
  const int64_t n = static_cast<int64_t>(ids.size());
  int64_t step = incremental ? 1 : (chunk > 0 ? chunk : n);
  Stopwatch watch;
  dsv4::SequenceState state = model->new_sequence();
  std::vector<float> logits;
  logits.reserve(static_cast<size_t>(n * vocab));
  dsv4::ForwardTrace trace, all;  // `all` concatenates the calls' traces in sequence order
  for (int64_t begin = 0; begin < n; begin += step) {
    int64_t len = std::min(step, n - begin);
    auto tokens =
        std::span<const int32_t>(ids).subspan(static_cast<size_t>(begin), static_cast<size_t>(len));
    dsv4::ForwardRequest req{&state, tokens, true};
    std::vector<float> part = model->forward({&req, 1}, sim, dump.empty() ? nullptr : &trace);
    logits.insert(logits.end(), part.begin(), part.end());
    if (!dump.empty()) {
      all.streams_in.resize(trace.streams_in.size());
      for (size_t l = 0; l < trace.streams_in.size(); ++l) {
        all.streams_in[l].insert(all.streams_in[l].end(), trace.streams_in[l].begin(),
                                 trace.streams_in[l].end());
      }
      all.final_streams.insert(all.final_streams.end(), trace.final_streams.begin(),
                               trace.final_streams.end());
    }
  }
  double seconds = watch.seconds();
  if (!ranks.leader()) return kExitOk;
  int64_t shape[2] = {n, vocab};
  write_npy_f32(output, shape, logits);
  if (!dump.empty()) {
    const dsv4::Config& c = model->config();
    std::vector<int64_t> stream_shape = {n, c.hc_mult, c.hidden_size};
    std::vector<NpzEntry> entries;
    for (size_t l = 0; l < all.streams_in.size(); ++l) {
      entries.push_back(
          {fmt::format("L{}.streams_in", l), NpyArray{stream_shape, std::move(all.streams_in[l])}});
    }
    entries.push_back({"final_streams", NpyArray{stream_shape, std::move(all.final_streams)}});
    entries.push_back({"logits", NpyArray{{n, vocab}, std::move(logits)}});
    write_npz_f32(dump, entries);
  }
  spdlog::info("{} tokens in {:.2f} s ({:.1f} tokens/s, {}), logits written to {}", n, seconds,
               static_cast<double>(n) / seconds, incremental ? "incremental" : "prefill", output);
  return kExitOk;
}

}  // namespace

FLINT_COMMAND("logits", "write the logits of every position of a token sequence (.npy)",
              run_logits);

}  // namespace flint::cli
