// The state of a draft that reads the target's hidden rows (MTP, DSpark): the draft's own
// window KV plus the committed positions whose draft rows are not computed yet. Rows are
// computed only when the sequence drafts, in one batched pass over what is pending (at
// most a window of positions), so a sequence that does not draft (in its prompt, or
// paused by adaptive verification) costs a copy of its inputs, not a draft layer.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/check.h"
#include "engine/speculative/proposer.h"
#include "model/deepseek_v4/model.h"

namespace flint::engine {

struct PendingWindowState final : DraftState {
  std::unique_ptr<dsv4::SequenceState> kv;
  // Positions kv->length() .. + pending(): their inputs, row_floats each, and (for drafts
  // that read one, MTP's x_{p+1}) a token each.
  int64_t row_floats = 0;
  std::vector<float> rows;
  std::vector<int32_t> tokens;

  int64_t pending() const { return static_cast<int64_t>(rows.size()) / row_floats; }
  int64_t length() const override { return kv->length() + pending(); }
  std::unique_ptr<DraftState> clone() const override;
  // Forgets the oldest n pending positions (never read again: beyond the window).
  void drop(int64_t n);
  void clear_pending() {
    rows.clear();
    tokens.clear();
  }
};

// Brings `*it.state` to position it.from (a fresh state from new_kv() when it does not
// continue there: preemption, a restored prefix) and appends the positions committed this
// step that can still be read, max(trace_from, to - window) .. to - 1: their rows of
// `trace_rows` (the trace's rows, row_floats each) and, with `with_tokens`, the token after
// each. Keeps at most `window` pending. new_kv: () -> std::unique_ptr<dsv4::SequenceState>.
template <class NewKv>
PendingWindowState& gather_pending(ProposeItem& it, const float* trace_rows, int64_t row_floats,
                                   int64_t window, bool with_tokens, NewKv new_kv) {
  auto* st = static_cast<PendingWindowState*>(it.state->get());
  if (st == nullptr || st->length() != it.from) {
    auto fresh = std::make_unique<PendingWindowState>();
    fresh->kv = new_kv();
    fresh->kv->advance(it.from);
    fresh->row_floats = row_floats;
    st = fresh.get();
    *it.state = std::move(fresh);
  }
  const int64_t first = std::max(it.trace_from, it.to - window);
  if (first > it.from) {  // positions without rows: older pending ones are out of reach too
    st->drop(st->pending());
    st->kv->advance(first - it.from);
  }
  if (first < it.to) {
    const float* r = trace_rows + (it.trace_row + first - it.trace_from) * row_floats;
    st->rows.insert(st->rows.end(), r, r + (it.to - first) * row_floats);
    if (with_tokens) {
      FLINT_CHECK(it.tokens_from <= first + 1 &&
                  it.tokens_from + static_cast<int64_t>(it.tokens.size()) > it.to);
      st->tokens.insert(st->tokens.end(), it.tokens.begin() + (first + 1 - it.tokens_from),
                        it.tokens.begin() + (it.to + 1 - it.tokens_from));
    }
  }
  st->drop(st->pending() - window);
  return *st;
}

}  // namespace flint::engine
