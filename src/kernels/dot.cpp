#include "kernels/dot.h"

#include <cstring>

namespace flint::kernels {

namespace {

// 16 float lanes as one value: one vector register on AVX-512, two on AVX2. Written out
// rather than left to the vectoriser, which turns K > 1 chains into transposes and separate
// multiplies and adds (other bits).
typedef float Lanes __attribute__((vector_size(64)));

Lanes load(const float* p) {
  Lanes v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// K dot products against one b (dot.h's order): lane j of acc[k] is one chain, and
// acc + a * b is contracted to a fused multiply-add (-ffp-contract=fast, GCC's default),
// as in the scalar tail.
template <int K>
void dots(const float* const* a, const float* b, int64_t n, float* out, int64_t ldo) {
  Lanes acc[K] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const Lanes bv = load(b + i);
#pragma GCC unroll 16
    for (int k = 0; k < K; ++k) acc[k] += load(a[k] + i) * bv;
  }
  for (; i < n; ++i) {
    for (int k = 0; k < K; ++k) acc[k][i & 15] += a[k][i] * b[i];
  }
  for (int k = 0; k < K; ++k) {
    float s0 = 0.f, s1 = 0.f;
    for (int j = 0; j < 16; j += 2) {
      s0 += acc[k][j];
      s1 += acc[k][j + 1];
    }
    out[k * ldo] = s0 + s1;
  }
}

// Heads [h0, h0 + H) of head_dots, key by key.
template <int H>
void head_dots_group(const float* q, int64_t h0, const float* const* keys, int64_t count,
                     int64_t dim, float* out, int64_t ldo) {
  const float* rows[H];
  for (int k = 0; k < H; ++k) rows[k] = q + (h0 + k) * dim;
  for (int64_t e = 0; e < count; ++e) dots<H>(rows, keys[e], dim, out + h0 * ldo + e, ldo);
}

// Heads [h0, h0 + H) of head_weighted_sums in slices of 32 columns: 2H vector accumulators
// held over all keys, each row slice loaded once and each weight broadcast once per key.
template <int H>
void weighted_sums_group(const float* w, int64_t ldw, int64_t h0, const float* const* rows,
                         int64_t count, int64_t dim, float* out) {
  constexpr int64_t kCols = 32;
  int64_t d0 = 0;
  for (; d0 + kCols <= dim; d0 += kCols) {
    Lanes acc[H][2];
    for (int h = 0; h < H; ++h)
      for (int j = 0; j < 2; ++j) acc[h][j] = load(out + (h0 + h) * dim + d0 + 16 * j);
    for (int64_t k = 0; k < count; ++k) {
      const Lanes r0 = load(rows[k] + d0), r1 = load(rows[k] + d0 + 16);
#pragma GCC unroll 8
      for (int h = 0; h < H; ++h) {
        const float wk = w[(h0 + h) * ldw + k];
        acc[h][0] += wk * r0;
        acc[h][1] += wk * r1;
      }
    }
    for (int h = 0; h < H; ++h)
      for (int j = 0; j < 2; ++j)
        std::memcpy(out + (h0 + h) * dim + d0 + 16 * j, &acc[h][j], sizeof(Lanes));
  }
  for (int64_t h = h0; h < h0 + H; ++h) {  // columns past the last slice
    float* oh = out + h * dim;
    for (int64_t k = 0; k < count; ++k) {
      const float wk = w[h * ldw + k];
      const float* row = rows[k];
      for (int64_t d = d0; d < dim; ++d) oh[d] += wk * row[d];
    }
  }
}

}  // namespace

float dot(const float* a, const float* b, int64_t n) {
  float out;
  dots<1>(&a, b, n, &out, 1);
  return out;
}

// Groups of 8 heads (enough chains in flight to cover the multiply-add latency), then 4, 2, 1.
void head_dots(const float* q, int64_t heads, const float* const* keys, int64_t count, int64_t dim,
               float* out, int64_t ldo) {
  int64_t h = 0;
  for (; h + 8 <= heads; h += 8) head_dots_group<8>(q, h, keys, count, dim, out, ldo);
  if (h + 4 <= heads) head_dots_group<4>(q, h, keys, count, dim, out, ldo), h += 4;
  if (h + 2 <= heads) head_dots_group<2>(q, h, keys, count, dim, out, ldo), h += 2;
  if (h < heads) head_dots_group<1>(q, h, keys, count, dim, out, ldo);
}

void head_weighted_sums(const float* w, int64_t ldw, int64_t heads, const float* const* rows,
                        int64_t count, int64_t dim, float* out) {
  int64_t h = 0;
  for (; h + 8 <= heads; h += 8) weighted_sums_group<8>(w, ldw, h, rows, count, dim, out);
  if (h + 4 <= heads) weighted_sums_group<4>(w, ldw, h, rows, count, dim, out), h += 4;
  if (h + 2 <= heads) weighted_sums_group<2>(w, ldw, h, rows, count, dim, out), h += 2;
  if (h < heads) weighted_sums_group<1>(w, ldw, h, rows, count, dim, out);
}

}  // namespace flint::kernels
