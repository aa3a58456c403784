// Random DeepSeek-V4 checkpoints in the official layout, for tests, demos and benchmarks
// (`flint make-tiny`). Weights are random but scaled so that activations stay of order one
// and logits are not degenerate; output projections are kept small so that a tiny numeric
// perturbation stays tiny (needed to compare implementations on random weights).
// Deterministic: the same preset and seed give the same bytes on every machine.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/deepseek_v4/config.h"

namespace flint::dsv4 {

// "tiny": every layer kind with small dims; "tiny-dspark": tiny plus Flash-0731's DSpark
// stages; "bench": about 1.3 GB of the same structure for speed work. Throws flint::Error
// for an unknown name, listing the known ones.
Config tiny_preset(std::string_view name);
std::vector<std::string> tiny_preset_names();

struct TinyCheckpointOptions {
  uint64_t seed = 1;
  std::optional<ExpertDType> expert_dtype;  // override the preset (fp8: the -Base layout)
  int64_t shards = 2;                       // safetensors files, with an index
};

struct TinyCheckpointResult {
  Config config;
  uint64_t tensors = 0;
  uint64_t bytes = 0;
};

// Writes config.json and the shards + model.safetensors.index.json into `dir` (created).
// The tokenizer files are written by the caller (text layer).
TinyCheckpointResult write_tiny_checkpoint(const std::filesystem::path& dir, const Config& config,
                                           const TinyCheckpointOptions& options);

}  // namespace flint::dsv4
