#include "model/deepseek_v4/attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "base/page_cache.h"
#include "base/thread_pool.h"
#include "kernels/dot.h"
#include "kernels/hadamard.h"
#include "kernels/kv_codec.h"
#include "kernels/norm.h"
#include "kernels/quant_round.h"
#include "kernels/rope.h"
#include "kernels/softmax.h"
#include "kernels/topk.h"
#include "model/deepseek_v4/compressor.h"

namespace flint::dsv4 {

LayerRope layer_rope(const Config& c, int64_t compress_ratio) {
  LayerRope rope;
  if (compress_ratio > 0 && c.rope_scaling) {
    const RopeScaling& y = *c.rope_scaling;
    rope.inv_freq =
        kernels::yarn_inv_freq(c.qk_rope_head_dim, c.compress_rope_theta, y.factor,
                               y.original_max_position_embeddings, y.beta_fast, y.beta_slow);
  } else {
    rope.inv_freq = kernels::rope_inv_freq(
        c.qk_rope_head_dim, compress_ratio > 0 ? c.compress_rope_theta : c.rope_theta);
  }
  return rope;
}

namespace {

// read(i, n, out + i * width) for ranges of rows [0, count) on every thread: the store
// decodes each row it reads, and a decode step finds the rows and `out` out of cache (the
// weights streamed through since): a window of 127 fp8 rows took 20-28 us per layer on
// the bench preset (12-05), while the pool would otherwise wait.
template <class Read>
void in_row_ranges(int64_t count, int64_t width, float* out, const Read& read) {
  if (count <= 0) return;
  parallel_for(static_cast<size_t>(count), 16, [&](size_t b, size_t e) {
    read(static_cast<int64_t>(b), static_cast<int64_t>(e - b),
         out + static_cast<int64_t>(b) * width);
  });
}

// Rotates the last rope_dim dims of `rows` vectors (stride `stride`, vector width `dim`) at
// positions pos0 + i / per_position.
void rope_rows(float* x, int64_t rows, int64_t per_position, int64_t stride, int64_t dim,
               int64_t rope_dim, int64_t pos0, const LayerRope& rope, bool inverse) {
  std::vector<float> cos(static_cast<size_t>(rope_dim / 2)), sin(cos.size());
  int64_t last_pos = -1;
  for (int64_t i = 0; i < rows; ++i) {
    int64_t pos = pos0 + i / per_position;
    if (pos != last_pos) {
      kernels::rope_cos_sin(rope.inv_freq, pos, cos.data(), sin.data());
      last_pos = pos;
    }
    kernels::apply_rope(x + i * stride + dim - rope_dim, cos.data(), sin.data(), rope_dim / 2,
                        inverse);
  }
}

// RoPE and rounding of normalised KV rows [n, head_dim] at positions pos0..: the KV's
// non-rope dims were trained through FP8 (blocks of 64); then the store's format, so a
// chunk uses its rows as the store keeps them and a later chunk reading them back
// computes exactly what this one does.
void finish_kv_rows(const Config& c, const LayerRope& rope, const LayerKv& store, float* kv,
                    int64_t n, int64_t pos0, QuantSimulation sim) {
  const int64_t hd = c.head_dim, rd = c.qk_rope_head_dim;
  rope_rows(kv, n, 1, hd, hd, rd, pos0, rope, false);
  if (sim == QuantSimulation::kOfficial) {
    for (int64_t t = 0; t < n; ++t) kernels::round_fp8_blocks(kv + t * hd, hd - rd, 64);
  }
  kernels::round_kv_rows(store.kv_format(), kv, n);
}

// Everything computed for all rows of the batch before the per-sequence attention.
struct Projections {
  PageCachedVector<float> qr;            // [N, q_lora_rank], normalised low-rank query
  PageCachedVector<float> q;             // [N, heads, head_dim]
  PageCachedVector<float> kv;            // [N, head_dim]
  PageCachedVector<float> ckv, cgate;    // [N, width] compressor projections
  PageCachedVector<float> iq;            // [N, index_heads, index_head_dim]
  PageCachedVector<float> iw;            // [N, index_heads]
  PageCachedVector<float> ickv, icgate;  // [N, 2 * index_head_dim]
};

std::atomic<int64_t> g_index_score_block_floats{int64_t{16} << 20};
// Keys per pass of the indexer's dot products (each (head, key) dot has the same bits
// however the keys are split: kernels/dot.h).
constexpr int64_t kIndexKeysPerPass = 64;

// Whether attention_forward may run its segments concurrently: at least as many as threads,
// all short (decode and verification steps; a long prefill chunk beside them would leave
// the other threads idle), each with its own sequence state, and no collectives.
bool segments_in_parallel(std::span<const Segment> segments, const Comm* comm) {
  constexpr int64_t kShort = 16;
  if (comm_size(comm) > 1 || segments.size() < thread_pool().size() || segments.size() < 2)
    return false;
  std::vector<const LayerKv*> states;
  for (const Segment& seg : segments) {
    if (seg.n > kShort) return false;
    states.push_back(seg.state);
  }
  std::sort(states.begin(), states.end());
  return std::adjacent_find(states.begin(), states.end()) == states.end();
}

}  // namespace

int64_t index_score_block_floats() { return g_index_score_block_floats.load(); }
void set_index_score_block_floats(int64_t floats) {
  g_index_score_block_floats.store(std::max<int64_t>(1, floats));
}

void attention_forward(const AttentionWeights& w, const Config& c, const LayerRope& rope,
                       std::span<const Segment> segments, const float* x, int64_t N, float* out,
                       QuantSimulation sim, Comm* comm) {
  // Under tensor parallelism the weights hold this rank's heads, groups and indexer heads
  // (shard.h); their shapes say how many.
  const int64_t hd = c.head_dim, rd = c.qk_rope_head_dim;
  const int64_t heads = w.wq_b.out_features() / hd;
  const int64_t win = c.sliding_window, ratio = w.compress_ratio;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const bool official = sim == QuantSimulation::kOfficial;
  Projections p;

  // 1. Token-parallel projections of the whole batch: those of x in one parallel region
  // (x rounded once), then those of the normalised low-rank query.
  p.qr.resize(static_cast<size_t>(N * c.q_lora_rank));
  p.kv.resize(static_cast<size_t>(N * hd));
  std::vector<LinearCall> calls{{&w.wq_a, x, N, p.qr.data()}, {&w.wkv, x, N, p.kv.data()}};
  if (ratio > 0) {
    const CompressorWeights& cw = *w.compressor;
    p.ckv.resize(static_cast<size_t>(N * cw.wkv.out_features()));
    p.cgate.resize(p.ckv.size());
    calls.push_back({&cw.wkv, x, N, p.ckv.data()});
    calls.push_back({&cw.wgate, x, N, p.cgate.data()});
  }
  const int64_t ihd = c.index_head_dim;
  const int64_t ih = w.indexer ? w.indexer->weights_proj.out_features() : 0;
  if (w.indexer) {
    const IndexerWeights& iw = *w.indexer;
    p.iw.resize(static_cast<size_t>(N * ih));
    p.ickv.resize(static_cast<size_t>(N * iw.compressor.wkv.out_features()));
    p.icgate.resize(p.ickv.size());
    calls.push_back({&iw.weights_proj, x, N, p.iw.data()});
    calls.push_back({&iw.compressor.wkv, x, N, p.ickv.data()});
    calls.push_back({&iw.compressor.wgate, x, N, p.icgate.data()});
  }
  forward_many(calls, sim);
  kernels::rms_norm(p.qr.data(), w.q_norm.data(), N, c.q_lora_rank, eps, p.qr.data());
  kernels::rms_norm(p.kv.data(), w.kv_norm.data(), N, hd, eps, p.kv.data());
  p.q.resize(static_cast<size_t>(N * heads * hd));
  calls = {{&w.wq_b, p.qr.data(), N, p.q.data()}};
  if (w.indexer) {
    p.iq.resize(static_cast<size_t>(N * ih * ihd));
    calls.push_back({&w.indexer->wq_b, p.qr.data(), N, p.iq.data()});
  }
  forward_many(calls, sim);
  kernels::rms_norm(p.q.data(), nullptr, N * heads, hd, eps, p.q.data());
  if (w.indexer) {
    const float wscale =
        1.0f / std::sqrt(static_cast<float>(ihd)) / std::sqrt(static_cast<float>(c.index_n_heads));
    for (auto& v : p.iw) v *= wscale;
  }

  // 2. Position-dependent parts, per segment: RoPE, KV rounding, compressors.
  const int64_t ckv_width = ratio > 0 ? w.compressor->wkv.out_features() : 0;
  const int64_t ickv_width = w.indexer ? w.indexer->compressor.wkv.out_features() : 0;
  PageCachedVector<float> o(static_cast<size_t>(N * heads * hd), 0.0f);
  auto attend = [&](const Segment& seg) {
    LayerKv& st = *seg.state;
    float* q = p.q.data() + seg.row * heads * hd;
    float* kv = p.kv.data() + seg.row * hd;
    rope_rows(q, seg.n * heads, heads, hd, hd, rd, seg.pos0, rope, false);
    finish_kv_rows(c, rope, st, kv, seg.n, seg.pos0, sim);
    CompressorRope crope{&rope.inv_freq, rd};
    FLINT_CHECK(!seg.block || ratio == 0, "draft blocks run on window-only layers");
    if (ratio > 0) {
      const float* ckv = p.ckv.data() + seg.row * ckv_width;
      const float* cgate = p.cgate.data() + seg.row * ckv_width;
      if (seg.undo)
        compressor_record(st, CompressorKind::kMain, ckv, cgate, seg.n, seg.pos0, seg.undo->main);
      compress_tokens(*w.compressor, st, CompressorKind::kMain, ckv, cgate, seg.n, seg.pos0, crope,
                      eps, sim);
    }
    if (w.indexer) {
      float* iq = p.iq.data() + seg.row * ih * ihd;
      rope_rows(iq, seg.n * ih, ih, ihd, ihd, rd, seg.pos0, rope, false);
      parallel_for(static_cast<size_t>(seg.n * ih), 16, [&](size_t b, size_t e) {
        for (auto k = static_cast<int64_t>(b); k < static_cast<int64_t>(e); ++k) {
          kernels::hadamard_transform(iq + k * ihd, ihd, 1.0f / std::sqrt(static_cast<float>(ihd)));
          if (official) kernels::round_fp4_blocks(iq + k * ihd, ihd, 32);
        }
      });
      const float* ickv = p.ickv.data() + seg.row * ickv_width;
      const float* icgate = p.icgate.data() + seg.row * ickv_width;
      if (seg.undo)
        compressor_record(st, CompressorKind::kIndex, ickv, icgate, seg.n, seg.pos0,
                          seg.undo->index);
      compress_tokens(w.indexer->compressor, st, CompressorKind::kIndex, ickv, icgate, seg.n,
                      seg.pos0, crope, eps, sim);
    }

    // 3. Keys visible to the chunk: the window history before pos0 (from the store), then
    // the chunk's own rows. local[i] holds position first_pos + i.
    const int64_t first_pos = std::max<int64_t>(0, seg.pos0 - win + 1);
    const int64_t n_local = seg.pos0 + seg.n - first_pos;
    // Every row is written below: grown, never cleared (zeroing the window's 256 KB per
    // sequence and layer was 1.3% of a 16-sequence decode step).
    thread_local std::vector<float> local_rows;
    if (local_rows.size() < static_cast<size_t>(n_local * hd))
      local_rows.resize(static_cast<size_t>(n_local * hd));
    float* const local = local_rows.data();
    in_row_ranges(seg.pos0 - first_pos, hd, local, [&](int64_t i, int64_t n, float* rows) {
      st.read_window(first_pos + i, n, rows);
    });
    std::memcpy(local + (seg.pos0 - first_pos) * hd, kv,
                static_cast<size_t>(seg.n * hd) * sizeof(float));

    // 4. Compressed entries each token sees: all complete ones (ratio 128) or the indexer's
    // top-k of them (ratio 4). Entry e is complete for the token at pos iff e < (pos+1)/ratio.
    std::vector<std::vector<int32_t>> selected(static_cast<size_t>(seg.n));
    const int64_t max_visible = ratio > 0 ? (seg.pos0 + seg.n) / ratio : 0;
    std::vector<float> index_keys;
    if (w.indexer && max_visible > 0) {
      index_keys.resize(static_cast<size_t>(max_visible * c.index_head_dim));
      in_row_ranges(max_visible, c.index_head_dim, index_keys.data(),
                    [&](int64_t i, int64_t n, float* rows) { st.read_index_keys(i, n, rows); });
    }
    if (ratio > 0 && !w.indexer) {
      for (int64_t t = 0; t < seg.n; ++t) {
        auto& sel = selected[static_cast<size_t>(t)];
        sel.resize(static_cast<size_t>((seg.pos0 + t + 1) / ratio));
        for (size_t k = 0; k < sel.size(); ++k) sel[k] = static_cast<int32_t>(k);
      }
    } else if (w.indexer) {
      // Index scores of every (token, visible entry), summed over this rank's indexer heads
      // (then over the ranks'), then each token's top-k. The scores of a whole chunk grow
      // with its tokens times its position (a 2,048-token chunk at position 1M: 2 GiB), so
      // they are computed for blocks of tokens whose scores fit index_score_block_floats().
      // Token t sees (pos0 + t + 1) / ratio entries: its scores start at first[t - t0].
      std::vector<const float*> key_rows(static_cast<size_t>(max_visible));
      for (int64_t k = 0; k < max_visible; ++k)
        key_rows[static_cast<size_t>(k)] = index_keys.data() + k * ihd;
      const int64_t block = std::clamp<int64_t>(
          index_score_block_floats() / std::max<int64_t>(1, max_visible), 1, seg.n);
      std::vector<int64_t> first(static_cast<size_t>(block + 1), 0);
      std::vector<float> scores;
      for (int64_t t0 = 0; t0 < seg.n; t0 += block) {
        const int64_t tn = std::min(block, seg.n - t0);
        for (int64_t t = 0; t < tn; ++t)
          first[static_cast<size_t>(t + 1)] =
              first[static_cast<size_t>(t)] + (seg.pos0 + t0 + t + 1) / ratio;
        scores.resize(static_cast<size_t>(first[static_cast<size_t>(tn)]));
        parallel_for(static_cast<size_t>(tn), 1, [&](size_t b, size_t e) {
          // Dots of kIndexKeysPerPass keys for all heads at a time (16 KB for V4's 64 heads,
          // in L1), not of every visible key (64 MiB per thread at position 1M).
          std::vector<float> dots(static_cast<size_t>(ih * kIndexKeysPerPass));  // [ih, keys]
          for (size_t t = b; t < e; ++t) {
            const int64_t visible = first[t + 1] - first[t];
            const int64_t row = seg.row + t0 + static_cast<int64_t>(t);
            const float* iq = p.iq.data() + row * ih * ihd;
            const float* iw = p.iw.data() + row * ih;
            float* st_t = scores.data() + first[t];
            for (int64_t k0 = 0; k0 < visible; k0 += kIndexKeysPerPass) {
              const int64_t kn = std::min(kIndexKeysPerPass, visible - k0);
              kernels::head_dots(iq, ih, key_rows.data() + k0, kn, ihd, dots.data(), kn);
              for (int64_t k = 0; k < kn; ++k) {
                float s = 0.0f;
                for (int64_t h = 0; h < ih; ++h)
                  s += std::max(0.0f, dots[static_cast<size_t>(h * kn + k)]) * iw[h];
                st_t[k0 + k] = s;
              }
            }
          }
        });
        // Every rank runs the same blocks (they depend on the chunk only), so the reductions
        // pair up.
        if (comm_size(comm) > 1 && !scores.empty())
          comm->all_reduce_sum(scores.data(), scores.size(), "indexer scores");
        parallel_for(static_cast<size_t>(tn), 1, [&](size_t b, size_t e) {
          for (size_t t = b; t < e; ++t) {
            kernels::topk(scores.data() + first[t], first[t + 1] - first[t], c.index_topk,
                          selected[static_cast<size_t>(t0) + t]);
          }
        });
      }
    }
    // The entries any token of the chunk selected, read once: slot[e] is entry e's row in
    // `entries` (or -1).
    std::vector<int32_t> slot(static_cast<size_t>(max_visible), -1), wanted;
    for (const auto& sel : selected) {
      for (int32_t e : sel) {
        if (slot[static_cast<size_t>(e)] < 0) {
          slot[static_cast<size_t>(e)] = static_cast<int32_t>(wanted.size());
          wanted.push_back(e);
        }
      }
    }
    thread_local std::vector<float> entry_rows;  // as local_rows: every row is written
    if (entry_rows.size() < wanted.size() * static_cast<size_t>(hd))
      entry_rows.resize(wanted.size() * static_cast<size_t>(hd));
    float* const entries = entry_rows.data();
    in_row_ranges(static_cast<int64_t>(wanted.size()), hd, entries,
                  [&](int64_t i, int64_t n, float* rows) {
                    st.read_entries(std::span<const int32_t>(wanted).subspan(
                                        static_cast<size_t>(i), static_cast<size_t>(n)),
                                    rows);
                  });

    // 5. Attention per token, its heads together (they share the keys): window rows then
    // selected entries; softmax with sink per head; the output is the weighted sum of the
    // same vectors (K = V), then inverse RoPE. With fewer tokens than threads (decode), a
    // token's heads are split into groups so that every thread has work.
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const auto threads = static_cast<int64_t>(thread_pool().size());
    const int64_t groups = seg.n >= threads ? 1 : std::min(heads, (threads + seg.n - 1) / seg.n);
    const int64_t group_heads = (heads + groups - 1) / groups;
    parallel_for(static_cast<size_t>(seg.n * groups), 1, [&](size_t b, size_t e) {
      std::vector<float> scores;  // [group heads, keys]
      std::vector<const float*> keys;
      for (size_t item = b; item < e; ++item) {
        const int64_t t = static_cast<int64_t>(item) / groups,
                      h0 = static_cast<int64_t>(item) % groups * group_heads,
                      hn = std::min(group_heads, heads - h0);
        if (hn <= 0) continue;
        const int64_t pos = seg.pos0 + t;
        // A draft block sees all of itself; otherwise a token sees up to itself.
        const int64_t last = seg.block ? seg.pos0 + seg.n - 1 : pos;
        keys.clear();
        for (int64_t kp = std::max(first_pos, pos - win + 1); kp <= last; ++kp) {
          keys.push_back(local + (kp - first_pos) * hd);
        }
        for (int32_t entry : selected[static_cast<size_t>(t)])
          keys.push_back(entries + slot[static_cast<size_t>(entry)] * hd);
        const auto nk = static_cast<int64_t>(keys.size());
        scores.resize(static_cast<size_t>(hn * nk));
        kernels::head_dots(q + (t * heads + h0) * hd, hn, keys.data(), nk, hd, scores.data(), nk);
        for (int64_t h = 0; h < hn; ++h) {
          float* sh = scores.data() + h * nk;
          for (int64_t k = 0; k < nk; ++k) sh[k] *= scale;
          kernels::softmax_with_sink(sh, nk, w.attn_sink[static_cast<size_t>(h0 + h)]);
        }
        kernels::head_weighted_sums(scores.data(), nk, hn, keys.data(), nk, hd,
                                    o.data() + ((seg.row + t) * heads + h0) * hd);
      }
    });
    rope_rows(o.data() + seg.row * heads * hd, seg.n * heads, heads, hd, hd, rd, seg.pos0, rope,
              true);

    // 6. Store the chunk's rows (the store keeps what its window needs).
    if (!seg.block) st.write_window(seg.pos0, seg.n, kv);
  };
  // Segments one after another, each spreading its work over the pool, or (decode: many
  // short segments) one segment per thread at a time: a 16-sequence decode step opened
  // about 10 small parallel regions per segment and layer, and the pool idled in the serial
  // parts between them (RoPE, KV rounding, compressors, top-k). Each segment computes the
  // same bits either way (its parallel regions then run inline: thread_pool.h). Collectives
  // (tensor parallelism) keep the segment order, so they rule it out.
  if (segments_in_parallel(segments, comm)) {
    parallel_for(segments.size(), 1, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) attend(segments[i]);
    });
  } else {
    for (const Segment& seg : segments) attend(seg);
  }

  // 7. Grouped low-rank output: group g's heads through wo_a's rows of group g (the groups'
  // products in one parallel region), then wo_b.
  const int64_t rank = c.o_lora_rank, groups = w.wo_a.out_features() / rank,
                group_in = heads * hd / groups;
  PageCachedVector<float> group_x(static_cast<size_t>(groups * N * group_in));
  PageCachedVector<float> group_y(static_cast<size_t>(groups * N * rank));
  PageCachedVector<float> low(static_cast<size_t>(N * groups * rank));
  std::vector<Linear> parts;
  parts.reserve(static_cast<size_t>(groups));  // calls point at its elements
  calls.clear();
  for (int64_t g = 0; g < groups; ++g) {
    float* gx = &group_x[static_cast<size_t>(g * N * group_in)];
    for (int64_t t = 0; t < N; ++t) {
      std::memcpy(gx + t * group_in, &o[static_cast<size_t>(t * heads * hd + g * group_in)],
                  static_cast<size_t>(group_in) * sizeof(float));
    }
    parts.push_back({w.wo_a.weight.row_slice(g * rank, (g + 1) * rank), w.wo_a.quantize_input});
    calls.push_back({&parts.back(), gx, N, &group_y[static_cast<size_t>(g * N * rank)]});
  }
  forward_many(calls, sim);
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t t = 0; t < N; ++t) {
      std::memcpy(&low[static_cast<size_t>(t * groups * rank + g * rank)],
                  &group_y[static_cast<size_t>((g * N + t) * rank)],
                  static_cast<size_t>(rank) * sizeof(float));
    }
  }
  w.wo_b.forward(low.data(), N, out, sim);
  if (comm_size(comm) > 1)
    comm->all_reduce_sum(out, static_cast<size_t>(N * c.hidden_size), "attention output");
}

void attention_rollback(const AttentionWeights& w, const Config& c, const LayerRope& rope,
                        LayerKv& store, const LayerUndo& undo, int64_t keep, QuantSimulation sim) {
  const float eps = static_cast<float>(c.rms_norm_eps);
  const CompressorRope crope{&rope.inv_freq, c.qk_rope_head_dim};
  if (w.compressor) {
    compressor_rollback(*w.compressor, store, CompressorKind::kMain, undo.main, keep, crope, eps,
                        sim);
  }
  if (w.indexer) {
    compressor_rollback(w.indexer->compressor, store, CompressorKind::kIndex, undo.index, keep,
                        crope, eps, sim);
  }
}

void attention_kv_rows(const AttentionWeights& w, const Config& c, const LayerRope& rope,
                       const LayerKv& store, const float* x, int64_t n, int64_t pos0, float* out,
                       QuantSimulation sim) {
  w.wkv.forward(x, n, out, sim);
  kernels::rms_norm(out, w.kv_norm.data(), n, c.head_dim, static_cast<float>(c.rms_norm_eps), out);
  finish_kv_rows(c, rope, store, out, n, pos0, sim);
}

}  // namespace flint::dsv4
