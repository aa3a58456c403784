// The parameters a model component needs, declared before anything is read.
//
// A component (the target model, an MTP layer, the DSpark draft) declares each parameter:
// its name, dtype, shape and the checkpoint tensors that fill it (one tensor used in place,
// or several concatenated along dim 0 for fused layouts). The loader (loader.h) matches a
// checkpoint against the declaration and reports every tensor's fate. The scope says which
// tensors the component owns, so that the loader can tell "not mine" (skipped) from
// "mine but unknown" (unexpected).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "formats/dtype.h"

namespace flint {

struct ParamSpec {
  std::string name;                  // parameter name (usually the checkpoint tensor name)
  DType dtype = DType::F32;          // dtype every source tensor must have
  std::vector<int64_t> shape;        // shape of the parameter (after concatenation)
  std::vector<std::string> sources;  // checkpoint tensors; add() turns empty into {name};
                                     // more than one are concatenated along dim 0
  bool optional = false;             // absence is not an error
  std::string owner;                 // non-empty: owned by another component, shared with this
                                     // one (the DSpark draft reads the target's embed and head)
};

// Which checkpoint tensors a component owns.
struct ComponentScope {
  std::string component;                       // "target", "DSpark draft", "MTP draft"
  std::vector<std::string> owned_prefixes;     // "" owns everything not excluded
  std::vector<std::string> excluded_prefixes;  // e.g. "mtp." for the target
  // Unclaimed tensors inside the owned namespace: an error (true: the target is strict) or
  // skipped with a note (false: a draft skips what it does not register).
  bool unexpected_is_error = true;
  // Why tensors outside the scope are skipped, for the report ("the MTP layer's, loaded
  // with --speculative-config").
  std::string foreign_note;

  bool owns(std::string_view tensor) const;
};

class ParamRegistry {
 public:
  explicit ParamRegistry(ComponentScope scope) : scope_(std::move(scope)) {}

  // Registers a parameter; declaring the same name twice is a bug (FLINT_CHECK).
  void add(ParamSpec spec);

  const ComponentScope& scope() const { return scope_; }
  const std::vector<ParamSpec>& params() const { return params_; }
  const ParamSpec* find(std::string_view name) const;
  // The parameter filled by checkpoint tensor `tensor`, or nullptr.
  const ParamSpec* claimant(std::string_view tensor) const;

 private:
  ComponentScope scope_;
  std::vector<ParamSpec> params_;
  std::map<std::string, size_t, std::less<>> by_name_;
  std::map<std::string, size_t, std::less<>> by_source_;
};

}  // namespace flint
