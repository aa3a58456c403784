// A draft's state for one sequence (the MTP layer's or the DSpark stages' window KV), owned
// by the sequence next to its KV cache entry. `length` is how many of the sequence's
// positions it holds context for: the engine keeps it equal to the target's computed
// tokens, and a proposer starts it afresh when they differ (preemption, a restored prefix).
#pragma once

#include <cstdint>
#include <memory>

namespace flint::engine {

struct DraftState {
  virtual ~DraftState() = default;
  // A copy for a forked sample (n > 1), which continues from the same context.
  virtual std::unique_ptr<DraftState> clone() const = 0;
  virtual int64_t length() const = 0;
};

}  // namespace flint::engine
