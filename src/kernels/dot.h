// Dot products in float32 with one fixed summation order, and the per-head forms attention
// needs when several query heads share their keys (DeepSeek-V4's single KV head; the
// indexer's per-entry key): each key row is read once for all heads, and the heads' chains
// run side by side instead of one latency-bound chain at a time.
//
// The order, which every function here keeps: dot(a, b, n) runs 16 partial sums, lane j
// adding a[i] * b[i] (one fused multiply-add) for i = j mod 16 in ascending i; then the
// even lanes are added in order, the odd lanes likewise, and the two sums last. head_dots
// gives each (head, key) exactly the bits of dot(), whatever the number of heads or keys.
#pragma once

#include <cstdint>

namespace flint::kernels {

float dot(const float* a, const float* b, int64_t n);

// out[h * ldo + k] = dot(q + h * dim, keys[k], dim) for h < heads, k < count.
// q [heads, dim] row-major; keys: count pointers to rows of dim floats.
void head_dots(const float* q, int64_t heads, const float* const* keys, int64_t count, int64_t dim,
               float* out, int64_t ldo);

// out[h * dim + d] += w[h * ldw + k] * rows[k][d] for k = 0 .. count-1 in that order (one
// fused multiply-add per term), for h < heads, d < dim: the same chain per (h, d) as a loop
// over keys, with each row read once for all heads.
void head_weighted_sums(const float* w, int64_t ldw, int64_t heads, const float* const* rows,
                        int64_t count, int64_t dim, float* out);

}  // namespace flint::kernels
