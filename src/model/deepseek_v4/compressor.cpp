#include "model/deepseek_v4/compressor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>
#include <limits>

#include "base/check.h"
#include "kernels/hadamard.h"
#include "kernels/kv_codec.h"
#include "kernels/norm.h"
#include "kernels/quant_round.h"
#include "kernels/rope.h"

namespace flint::dsv4 {

namespace {

// One entry from the pending rows. For dimension j the candidates are, with overlap, the
// previous block's rows at column j and the current block's rows at column head_dim + j;
// without overlap, the current block's rows at column j. Softmax over candidates' scores.
void pool_entry(const CompressorWeights& w, const CompressorState& s, float* out) {
  const int64_t r = w.ratio, d = w.head_dim, width = s.width;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  std::vector<float> scores(static_cast<size_t>(2 * r));
  for (int64_t j = 0; j < d; ++j) {
    int64_t count = 0;
    float m = neg_inf;
    auto score_at = [&](int64_t k) -> float {
      if (w.overlap) return k < r ? s.prev_score[k * width + j] : s.score[(k - r) * width + d + j];
      return s.score[k * width + j];
    };
    auto kv_at = [&](int64_t k) -> float {
      if (w.overlap) return k < r ? s.prev_kv[k * width + j] : s.kv[(k - r) * width + d + j];
      return s.kv[k * width + j];
    };
    count = w.overlap ? 2 * r : r;
    for (int64_t k = 0; k < count; ++k) m = std::max(m, score_at(k));
    float sum = 0.0f;
    for (int64_t k = 0; k < count; ++k) {
      float e = score_at(k) == neg_inf ? 0.0f : std::exp(score_at(k) - m);
      scores[static_cast<size_t>(k)] = e;
      sum += e;
    }
    float acc = 0.0f;
    for (int64_t k = 0; k < count; ++k) acc += kv_at(k) * (scores[static_cast<size_t>(k)] / sum);
    out[j] = acc;
  }
}

}  // namespace

void compress_tokens(const CompressorWeights& w, LayerKv& store, CompressorKind kind,
                     const float* kv, const float* gate, int64_t n, int64_t pos0,
                     const CompressorRope& rope, float norm_eps, QuantSimulation sim) {
  CompressorState& s = store.compressor(kind);
  const bool rotate = kind == CompressorKind::kIndex;
  const kernels::KvRowFormat format = rotate ? store.index_format() : store.kv_format();
  const int64_t interval = store.boundary_interval();
  const int64_t r = w.ratio, d = w.head_dim, width = s.width;
  FLINT_CHECK(width == (w.overlap ? 2 : 1) * d);
  std::vector<float> entry(static_cast<size_t>(d));
  std::vector<float> cos(static_cast<size_t>(rope.rope_dim / 2)), sin(cos.size());
  for (int64_t t = 0; t < n; ++t) {
    const int64_t pos = pos0 + t;
    const int64_t slot = pos % r;
    float* kv_row = s.kv.data() + slot * width;
    float* score_row = s.score.data() + slot * width;
    std::memcpy(kv_row, kv + t * width, static_cast<size_t>(width) * sizeof(float));
    for (int64_t j = 0; j < width; ++j)
      score_row[j] = gate[t * width + j] + w.ape[static_cast<size_t>(slot * width + j)];
    if ((pos + 1) % r != 0) continue;

    pool_entry(w, s, entry.data());
    if (w.overlap) {  // the completed block becomes the previous one
      s.prev_kv = s.kv;
      s.prev_score = s.score;
    }
    kernels::rms_norm(entry.data(), w.norm.data(), 1, d, norm_eps, entry.data());
    kernels::rope_cos_sin(*rope.inv_freq, pos + 1 - r, cos.data(), sin.data());
    kernels::apply_rope(entry.data() + d - rope.rope_dim, cos.data(), sin.data(), rope.rope_dim / 2,
                        false);
    if (rotate) {
      kernels::hadamard_transform(entry.data(), d, 1.0f / std::sqrt(static_cast<float>(d)));
      if (sim == QuantSimulation::kOfficial) kernels::round_fp4_blocks(entry.data(), d, 32);
    } else if (sim == QuantSimulation::kOfficial) {
      kernels::round_fp8_blocks(entry.data(), d - rope.rope_dim, 64);
    }
    kernels::round_kv_rows(format, entry.data(), 1);
    if (rotate) {
      store.append_index_keys(entry.data(), 1);
    } else {
      store.append_entries(entry.data(), 1);
    }
    if (interval > 0 && (pos + 1) % interval == 0) store.save_boundary(kind, pos + 1, s);
  }
}

void compressor_record(LayerKv& store, CompressorKind kind, const float* kv, const float* gate,
                       int64_t n, int64_t pos0, CompressorUndo& undo) {
  const CompressorState& s = store.compressor(kind);
  const int64_t width = s.width;
  undo = {};
  undo.recorded = true;
  undo.pos0 = pos0;
  undo.n = n;
  undo.count0 = kind == CompressorKind::kMain ? store.num_entries() : store.num_index_keys();
  for (int64_t t = 0; t < std::min(n, s.ratio); ++t) undo.slots.push_back((pos0 + t) % s.ratio);
  for (int64_t slot : undo.slots) {
    undo.kv.insert(undo.kv.end(), s.kv.begin() + slot * width, s.kv.begin() + (slot + 1) * width);
    undo.score.insert(undo.score.end(), s.score.begin() + slot * width,
                      s.score.begin() + (slot + 1) * width);
  }
  if (s.overlap()) {
    undo.prev_kv = s.prev_kv;
    undo.prev_score = s.prev_score;
  }
  undo.in_kv.assign(kv, kv + n * width);
  undo.in_gate.assign(gate, gate + n * width);
}

void compressor_rollback(const CompressorWeights& w, LayerKv& store, CompressorKind kind,
                         const CompressorUndo& undo, int64_t keep, const CompressorRope& rope,
                         float norm_eps, QuantSimulation sim) {
  if (!undo.recorded) return;
  FLINT_CHECK(keep >= 0 && keep <= undo.n);
  CompressorState& s = store.compressor(kind);
  const int64_t width = s.width;
  for (size_t i = 0; i < undo.slots.size(); ++i) {
    const auto at = static_cast<std::ptrdiff_t>(undo.slots[i] * width);
    const auto from = static_cast<std::ptrdiff_t>(i * static_cast<size_t>(width));
    std::copy(undo.kv.begin() + from, undo.kv.begin() + from + width, s.kv.begin() + at);
    std::copy(undo.score.begin() + from, undo.score.begin() + from + width, s.score.begin() + at);
  }
  if (s.overlap()) {
    s.prev_kv = undo.prev_kv;
    s.prev_score = undo.prev_score;
  }
  if (kind == CompressorKind::kMain) {
    store.truncate_entries(undo.count0);
  } else {
    store.truncate_index_keys(undo.count0);
  }
  compress_tokens(w, store, kind, undo.in_kv.data(), undo.in_gate.data(), keep, undo.pos0, rope,
                  norm_eps, sim);
}

}  // namespace flint::dsv4
