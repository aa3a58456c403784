#include "kernels/matmul.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/check.h"
#include "base/thread_pool.h"
#include "kernels/dot.h"
#include "kernels/matmul_isa.h"

namespace flint::kernels {

namespace {

// The reference variant: rows dequantised to float32 by the format's own definition
// (WeightMatrix::dequantize_rows), then dot products.
void scalar_rows(const WeightMatrix& w, const float* x, int64_t n, int64_t r0, int64_t r1,
                 float* y) {
  constexpr int64_t kRows = 32;
  thread_local std::vector<float> buf;
  buf.resize(static_cast<size_t>(kRows * w.cols));
  for (int64_t b = r0; b < r1; b += kRows) {
    const int64_t e = std::min(r1, b + kRows);
    w.dequantize_rows(b, e, buf.data());
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t r = b; r < e; ++r)
        y[i * w.rows + r] = dot(buf.data() + (r - b) * w.cols, x + i * w.cols, w.cols);
    }
  }
}

int64_t no_scratch(const WeightMatrix&, int64_t) { return 0; }
const void* same_x(const WeightMatrix&, const float* x, int64_t, void*) { return x; }
void scalar_rows_any(const WeightMatrix& w, const void* x, int64_t n, int64_t r0, int64_t r1,
                     float* y) {
  scalar_rows(w, static_cast<const float*>(x), n, r0, r1, y);
}
bool every_format(const WeightMatrix&) { return true; }

// The variants this build and CPU can run, best first; the scalar one is always there.
std::vector<const detail::MatmulIsa*> available_isas() {
  std::vector<const detail::MatmulIsa*> isas;
  for (const detail::MatmulIsa* isa : {detail::matmul_isa_avx512_bf16(), detail::matmul_isa_amx(),
                                       detail::matmul_isa_avx512(), detail::matmul_isa_avx2()})
    if (isa != nullptr) isas.push_back(isa);
  isas.push_back(&detail::matmul_isa_scalar());
  return isas;
}

// The variant for calls declaring x bf16-exact, the one for the other calls on the weights
// `split` supports (null: none), and the one for all others.
struct Active {
  const detail::MatmulIsa* exact;
  const detail::MatmulIsa* split;
  const detail::MatmulIsa* general;
};

Active select(const detail::MatmulIsa* isa) {
  if (!isa->bf16_inputs) return {isa, nullptr, isa};
  for (const detail::MatmulIsa* other : available_isas())
    if (!other->bf16_inputs) return {isa, isa->split_x, other};
  return {isa, isa->split_x, &detail::matmul_isa_scalar()};
}

// The default: the first variant that is not opt-in.
const detail::MatmulIsa* default_isa() {
  for (const detail::MatmulIsa* isa : available_isas())
    if (!isa->opt_in) return isa;
  return &detail::matmul_isa_scalar();
}

Active& active_isa() {
  static Active active = select(default_isa());
  return active;
}

// Rows per unit of work: enough weight bytes (>= 64 KB) that the pool's per-chunk cost stays
// small next to the streaming, in whole 16-row tiles for the tiled path. The decode path
// (n <= kDirectMaxN) reads groups of 4 rows, and a matrix of at most 4 such units per
// thread is cut into one unit per thread instead: the hyper-connections' 24 x 4096 float32
// went as 16 + 8 rows, one thread streaming twice the other's share, and as 4-row units the
// threads took turns, each prefetching the rows the other would read next.
// A variant with tiles of its own (amx: 16 rows) gets whole tiles, as many per unit as
// make 64 KB, or one unit per thread for matrices of at most 4 such units per thread.
int64_t rows_per_unit(const WeightMatrix& w, int64_t n, const detail::MatmulIsa& isa) {
  const uint64_t row_bytes = std::max<uint64_t>(1, w.nbytes() / static_cast<uint64_t>(w.rows));
  const int64_t rows = std::max<int64_t>(1, static_cast<int64_t>((64u << 10) / row_bytes));
  if (isa.unit_rows > 0) {
    const int64_t tile = isa.unit_rows, threads = static_cast<int64_t>(thread_pool().size());
    const int64_t tiles = (rows + tile - 1) / tile;
    const int64_t all = (w.rows + tile - 1) / tile;
    const int64_t unit = all <= 4 * threads * tiles ? (all + threads - 1) / threads : tiles;
    return std::max<int64_t>(1, unit) * tile;
  }
  if (n > detail::kDirectMaxN) return std::max<int64_t>(16, (rows + 15) / 16 * 16);
  const auto threads = static_cast<int64_t>(thread_pool().size());
  const int64_t unit = w.rows <= 4 * threads * rows ? (w.rows + threads - 1) / threads : rows;
  return std::max<int64_t>(4, (unit + 3) / 4 * 4);
}

}  // namespace

namespace detail {
const MatmulIsa& matmul_isa_scalar() {
  static const MatmulIsa isa{"scalar",         &no_scratch,   &same_x,
                             &scalar_rows_any, &every_format, false};
  return isa;
}
}  // namespace detail

void matmul_many(std::span<const MatmulTask> tasks) {
  const Active active = active_isa();
  struct Unit {
    int32_t task;
    int64_t r0, r1;
  };
  thread_local std::vector<Unit> units;
  thread_local std::vector<std::byte> scratch;
  thread_local std::vector<const void*> xs;
  thread_local std::vector<const detail::MatmulIsa*> isas;
  units.clear();
  xs.assign(tasks.size(), nullptr);
  isas.resize(tasks.size());
  // Scratch regions start 64-byte aligned (the allocation itself is padded to align).
  auto padded = [](int64_t bytes) { return static_cast<size_t>((bytes + 63) / 64 * 64); };
  size_t scratch_size = 64;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const MatmulTask& t = tasks[i];
    FLINT_CHECK(t.w != nullptr && t.n >= 0);
    const bool exact = t.x_bf16_exact && active.exact->supports(*t.w);
    const bool split = !exact && active.split != nullptr && active.split->supports(*t.w);
    isas[i] = exact ? active.exact : split ? active.split : active.general;
    scratch_size += padded(isas[i]->scratch_bytes(*t.w, t.n));
  }
  if (scratch.size() < scratch_size) scratch.resize(scratch_size);
  const auto base = reinterpret_cast<uintptr_t>(scratch.data());
  size_t offset = static_cast<size_t>((64 - base % 64) % 64);
  // The last task that converted its x: the experts of a decode token share one input,
  // which was converted once per expert (4.8 us of a 14-weight call).
  const MatmulTask* last = nullptr;
  const void* last_x = nullptr;
  const detail::MatmulIsa* last_isa = nullptr;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const MatmulTask& t = tasks[i];
    if (t.n == 0 || t.w->rows == 0) continue;
    if (last != nullptr && last->x == t.x && last->n == t.n && last->w->cols == t.w->cols &&
        last->w->format == t.w->format && last_isa == isas[i]) {
      xs[i] = last_x;  // the same conversion of the same input
    } else {
      xs[i] = isas[i]->prepare_x(*t.w, t.x, t.n, scratch.data() + offset);
      offset += padded(isas[i]->scratch_bytes(*t.w, t.n));
      last = &t;
      last_x = xs[i];
      last_isa = isas[i];
    }
    const int64_t step = rows_per_unit(*t.w, t.n, *isas[i]);
    for (int64_t r = 0; r < t.w->rows; r += step)
      units.push_back({static_cast<int32_t>(i), r, std::min(t.w->rows, r + step)});
  }
  if (units.empty()) return;
  // The pool's threads read the caller's copies.
  const std::vector<Unit>& todo = units;
  const std::vector<const void*>& prepared = xs;
  const std::vector<const detail::MatmulIsa*>& chosen = isas;
  parallel_for(todo.size(), 1, [&](size_t u0, size_t u1) {
    for (size_t u = u0; u < u1; ++u) {
      const Unit& unit = todo[u];
      const auto task = static_cast<size_t>(unit.task);
      const MatmulTask& t = tasks[task];
      chosen[task]->rows(*t.w, prepared[task], t.n, unit.r0, unit.r1, t.y);
    }
  });
}

void matmul(const WeightMatrix& w, const float* x, int64_t n, float* y, bool x_bf16_exact) {
  if (n <= 0 || w.rows == 0) return;
  const MatmulTask task{&w, x, n, y, x_bf16_exact};
  matmul_many({&task, 1});
}

std::vector<std::string_view> matmul_isas() {
  std::vector<std::string_view> names;
  for (const detail::MatmulIsa* isa : available_isas()) names.push_back(isa->name);
  return names;
}

bool set_matmul_isa(std::string_view name) {
  if (name.empty()) {
    active_isa() = select(default_isa());
    return true;
  }
  for (const detail::MatmulIsa* isa : available_isas()) {
    if (name == isa->name) {
      active_isa() = select(isa);
      return true;
    }
  }
  return false;
}

std::string_view matmul_isa() { return active_isa().exact->name; }

}  // namespace flint::kernels
