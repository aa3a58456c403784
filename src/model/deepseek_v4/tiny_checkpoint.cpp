#include "model/deepseek_v4/tiny_checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/rng.h"
#include "base/thread_pool.h"
#include "formats/bf16.h"
#include "formats/e8m0.h"
#include "formats/fp4.h"
#include "formats/fp8.h"
#include "formats/safetensors.h"
#include "model/deepseek_v4/params.h"

namespace flint::dsv4 {

namespace {

// One tensor to be written; `fill` produces its bytes from its own RNG.
struct PendingTensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;
};

uint64_t name_seed(uint64_t seed, const std::string& name) {
  uint64_t h = 1469598103934665603ull ^ (seed * 0x9E3779B97F4A7C15ull);
  for (unsigned char ch : name) h = (h ^ ch) * 1099511628211ull;
  return h;
}

// The standard deviation of a linear layer's random weight. Inputs of order one give outputs
// of order one (1/sqrt(in)); projections back into the residual streams are smaller, so that
// the streams do not grow layer by layer and a small numeric perturbation stays small.
double linear_std(const std::string& name, int64_t in) {
  double gain = 1.0;
  for (const char* out_proj : {"wo_b", ".w2"}) {
    if (name.ends_with(out_proj)) gain = 0.25;
  }
  if (name.ends_with("wo_a")) gain = 0.5;
  return gain / std::sqrt(static_cast<double>(in));
}

template <typename T>
std::vector<std::byte> as_bytes(const std::vector<T>& values) {
  std::vector<std::byte> out(values.size() * sizeof(T));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// Normal samples with both Box-Muller outputs used (twice as fast as Rng::normal).
void fill_normal(Rng& rng, std::vector<float>& v, double std) {
  for (size_t i = 0; i < v.size(); i += 2) {
    double u1 = std::max(rng.uniform(), 1e-300), u2 = rng.uniform();
    double r = std::sqrt(-2.0 * std::log(u1)) * std;
    v[i] = static_cast<float>(r * std::cos(6.283185307179586 * u2));
    if (i + 1 < v.size()) v[i + 1] = static_cast<float>(r * std::sin(6.283185307179586 * u2));
  }
}

// Random tensors for every visited parameter. Visiting records one job per parameter; run()
// executes them on the thread pool and returns the tensors in visit order. Each job draws
// from its own name-seeded generator, so a tensor's bytes never depend on which other
// tensors exist or on the thread count.
class Generator final : public ParamVisitor {
 public:
  explicit Generator(uint64_t seed) : seed_(seed) {}

  std::vector<PendingTensor> run() {
    std::vector<std::vector<PendingTensor>> results(jobs_.size());
    parallel_for(jobs_.size(), 1, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) jobs_[i](results[i]);
    });
    std::vector<PendingTensor> all;
    for (auto& r : results) {
      for (auto& t : r) all.push_back(std::move(t));
    }
    return all;
  }

  void linear(Linear&, const std::string& name, int64_t rows, int64_t cols, Storage storage,
              bool) override {
    if (!shared_owner.empty()) return;
    jobs_.push_back([=, this](std::vector<PendingTensor>& out) {
      make_linear(out, name, rows, cols, storage);
    });
  }
  void matrix(WeightMatrix&, const std::string& name, int64_t rows, int64_t cols,
              DType dtype) override {
    if (!shared_owner.empty()) return;
    jobs_.push_back(
        [=, this](std::vector<PendingTensor>& out) { make_matrix(out, name, rows, cols, dtype); });
  }
  void vector(Vec&, const std::string& name, const std::vector<int64_t>& shape,
              DType dtype) override {
    if (!shared_owner.empty()) return;
    jobs_.push_back(
        [=, this](std::vector<PendingTensor>& out) { make_vector(out, name, shape, dtype); });
  }
  void index_table(const int64_t*&, const std::string& name, int64_t rows, int64_t cols) override {
    if (!shared_owner.empty()) return;
    jobs_.push_back(
        [=, this](std::vector<PendingTensor>& out) { make_table(out, name, rows, cols); });
  }

  int64_t n_experts = 1;

 private:
  void make_linear(std::vector<PendingTensor>& out, const std::string& name, int64_t rows,
                   int64_t cols, Storage storage) const {
    Rng rng(name_seed(seed_, name));
    std::vector<float> w(static_cast<size_t>(rows * cols));
    fill_normal(rng, w, linear_std(name, cols));
    switch (storage) {
      case Storage::kF32:
        out.push_back({name + ".weight", DType::F32, {rows, cols}, as_bytes(w)});
        break;
      case Storage::kBF16:
        out.push_back({name + ".weight", DType::BF16, {rows, cols}, to_bf16(w)});
        break;
      case Storage::kFp8:
      case Storage::kFp8F32Scale:
        fp8(out, name, w, rows, cols, storage == Storage::kFp8F32Scale);
        break;
      case Storage::kFp4:
        fp4(out, name, w, rows, cols);
        break;
    }
  }

  void make_matrix(std::vector<PendingTensor>& out, const std::string& name, int64_t rows,
                   int64_t cols, DType dtype) const {
    Rng rng(name_seed(seed_, name));
    double std = 1.0;
    if (name == "head.weight")
      std = 1.5 / std::sqrt(static_cast<double>(cols));
    else if (name.find("hc_") != std::string::npos)
      std = 0.1 / std::sqrt(static_cast<double>(cols));
    else if (name.ends_with("gate.weight") || name.find("markov") != std::string::npos ||
             name.find("confidence") != std::string::npos) {
      std = 1.0 / std::sqrt(static_cast<double>(cols));
    }
    std::vector<float> w(static_cast<size_t>(rows * cols));
    fill_normal(rng, w, std);
    out.push_back({name, dtype, {rows, cols}, dtype == DType::F32 ? as_bytes(w) : to_bf16(w)});
  }

  void make_vector(std::vector<PendingTensor>& out, const std::string& name,
                   const std::vector<int64_t>& shape, DType dtype) const {
    Rng rng(name_seed(seed_, name));
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    if (name.ends_with("norm.weight")) {
      for (auto& x : v) x = static_cast<float>(0.8 + 0.4 * rng.uniform());
    } else if (name.ends_with("_scale")) {  // hyper-connection scales
      for (auto& x : v) x = static_cast<float>(0.5 + rng.uniform());
    } else if (name.ends_with("_base")) {
      for (auto& x : v) x = static_cast<float>(rng.normal() * 0.7);
    } else if (name.ends_with("gate.bias")) {
      for (auto& x : v) x = static_cast<float>(rng.normal() * 0.1);
    } else if (name.ends_with("ape")) {
      for (auto& x : v) x = static_cast<float>(rng.normal() * 0.5);
    } else {  // attn_sink
      for (auto& x : v) x = static_cast<float>(rng.normal());
    }
    out.push_back({name, dtype, shape, dtype == DType::F32 ? as_bytes(v) : to_bf16(v)});
  }

  // Each token routes to `cols` distinct experts out of n_experts.
  void make_table(std::vector<PendingTensor>& out, const std::string& name, int64_t rows,
                  int64_t cols) const {
    Rng rng(name_seed(seed_, name));
    std::vector<int64_t> table(static_cast<size_t>(rows * cols));
    std::vector<int64_t> pick;
    for (int64_t r = 0; r < rows; ++r) {
      pick.clear();
      while (static_cast<int64_t>(pick.size()) < cols) {
        auto e = static_cast<int64_t>(rng.below(static_cast<uint64_t>(n_experts)));
        if (std::find(pick.begin(), pick.end(), e) == pick.end()) pick.push_back(e);
      }
      std::copy(pick.begin(), pick.end(), table.begin() + r * cols);
    }
    out.push_back({name, DType::I64, {rows, cols}, as_bytes(table)});
  }

  static std::vector<std::byte> to_bf16(const std::vector<float>& v) {
    std::vector<uint16_t> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = float_to_bf16(v[i]);
    return as_bytes(out);
  }

  // FP8 E4M3 with one scale per 128x128 block: a power of two (E8M0) as in the official
  // checkpoints, or an arbitrary float32 (the -Base experts).
  static void fp8(std::vector<PendingTensor>& out, const std::string& name,
                  const std::vector<float>& w, int64_t rows, int64_t cols, bool f32_scale) {
    int64_t br = (rows + 127) / 128, bc = (cols + 127) / 128;
    std::vector<uint8_t> q(w.size());
    std::vector<float> scale_f(static_cast<size_t>(br * bc));
    std::vector<uint8_t> scale_e(static_cast<size_t>(br * bc));
    for (int64_t i = 0; i < br; ++i) {
      for (int64_t j = 0; j < bc; ++j) {
        float amax = 0.f;
        for (int64_t r = i * 128; r < std::min(rows, i * 128 + 128); ++r) {
          for (int64_t c = j * 128; c < std::min(cols, j * 128 + 128); ++c) {
            amax = std::max(amax, std::fabs(w[static_cast<size_t>(r * cols + c)]));
          }
        }
        amax = std::max(amax, 1e-12f);
        float s;
        if (f32_scale) {
          s = amax / 448.0f;
          scale_f[static_cast<size_t>(i * bc + j)] = s;
        } else {
          uint8_t e = float_to_e8m0_ceil(amax / 448.0f);
          scale_e[static_cast<size_t>(i * bc + j)] = e;
          s = e8m0_to_float(e);
        }
        for (int64_t r = i * 128; r < std::min(rows, i * 128 + 128); ++r) {
          for (int64_t c = j * 128; c < std::min(cols, j * 128 + 128); ++c) {
            size_t k = static_cast<size_t>(r * cols + c);
            q[k] = float_to_fp8_e4m3(w[k] / s);
          }
        }
      }
    }
    out.push_back({name + ".weight", DType::F8_E4M3, {rows, cols}, as_bytes(q)});
    if (f32_scale)
      out.push_back({name + ".scale", DType::F32, {br, bc}, as_bytes(scale_f)});
    else
      out.push_back({name + ".scale", DType::F8_E8M0, {br, bc}, as_bytes(scale_e)});
  }

  // MXFP4: E2M1 pairs per byte, one power-of-two scale per 32 columns.
  static void fp4(std::vector<PendingTensor>& out, const std::string& name,
                  const std::vector<float>& w, int64_t rows, int64_t cols) {
    std::vector<uint8_t> packed(static_cast<size_t>(rows * cols / 2));
    std::vector<uint8_t> scales(static_cast<size_t>(rows * cols / 32));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t b = 0; b < cols / 32; ++b) {
        const float* block = &w[static_cast<size_t>(r * cols + b * 32)];
        float amax = 1e-12f;
        for (int k = 0; k < 32; ++k) amax = std::max(amax, std::fabs(block[k]));
        uint8_t e = float_to_e8m0_ceil(amax / 6.0f);
        float s = e8m0_to_float(e);
        scales[static_cast<size_t>(r * (cols / 32) + b)] = e;
        for (int k = 0; k < 32; k += 2) {
          packed[static_cast<size_t>((r * cols + b * 32 + k) / 2)] =
              pack_fp4(float_to_fp4_e2m1(block[k] / s), float_to_fp4_e2m1(block[k + 1] / s));
        }
      }
    }
    out.push_back({name + ".weight", DType::I8, {rows, cols / 2}, as_bytes(packed)});
    out.push_back({name + ".scale", DType::F8_E8M0, {rows, cols / 32}, as_bytes(scales)});
  }

  uint64_t seed_;
  // Shared tensors (the drafts' view of embed/head) are skipped: their owner writes them.
  std::vector<std::function<void(std::vector<PendingTensor>&)>> jobs_;
};

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw Error("cannot write {}", path.string());
}

}  // namespace

TinyCheckpointResult write_tiny_checkpoint(const std::filesystem::path& dir, const Config& preset,
                                           const TinyCheckpointOptions& options) {
  Config config = preset;
  if (options.expert_dtype) config.expert_dtype = *options.expert_dtype;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error("cannot create {}: {}", dir.string(), ec.message());

  Generator gen(options.seed);
  gen.n_experts = config.n_routed_experts;
  TargetWeights target;
  visit_target(gen, target, config);
  if (config.dspark) {
    DSparkWeights draft;
    visit_dspark(gen, draft, config);
  } else {
    for (int64_t i = 0; i < config.num_nextn_predict_layers; ++i) {
      MtpWeights mtp;
      visit_mtp(gen, mtp, config, i);
    }
  }
  std::vector<PendingTensor> tensors = gen.run();

  // Shards of roughly equal size, in visit order, like the official checkpoints.
  uint64_t total = 0;
  for (const auto& t : tensors) total += t.bytes.size();
  int64_t shards = std::max<int64_t>(1, options.shards);
  uint64_t per_shard = total / static_cast<uint64_t>(shards) + 1;
  std::vector<std::vector<TensorToWrite>> files(static_cast<size_t>(shards));
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  uint64_t running = 0;
  for (const auto& t : tensors) {
    auto shard = static_cast<size_t>(
        std::min<uint64_t>(running / per_shard, static_cast<uint64_t>(shards - 1)));
    running += t.bytes.size();
    files[shard].push_back({t.name, t.dtype, t.shape, t.bytes});
    weight_map[t.name] = fmt::format("model-{:05d}-of-{:05d}.safetensors", shard + 1, shards);
  }
  for (size_t s = 0; s < files.size(); ++s) {
    write_safetensors(dir / fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, shards),
                      files[s], {{"format", "pt"}});
  }
  nlohmann::ordered_json index;
  index["metadata"] = {{"total_size", total}};
  index["weight_map"] = weight_map;
  write_text(dir / "model.safetensors.index.json", index.dump(2) + "\n");
  write_text(dir / "config.json", config_to_json(config).dump(2) + "\n");
  return {config, tensors.size(), total};
}

}  // namespace flint::dsv4
