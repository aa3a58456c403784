#include "formats/param_registry.h"

#include "base/check.h"

namespace flint {

bool ComponentScope::owns(std::string_view tensor) const {
  for (const auto& prefix : excluded_prefixes) {
    if (tensor.starts_with(prefix)) return false;
  }
  for (const auto& prefix : owned_prefixes) {
    if (tensor.starts_with(prefix)) return true;
  }
  return false;
}

void ParamRegistry::add(ParamSpec spec) {
  FLINT_CHECK(!by_name_.count(spec.name), "parameter {} declared twice", spec.name);
  size_t index = params_.size();
  by_name_.emplace(spec.name, index);
  if (spec.sources.empty()) spec.sources = {spec.name};
  for (const auto& source : spec.sources) {
    FLINT_CHECK(!by_source_.count(source), "tensor {} claimed twice", source);
    by_source_.emplace(source, index);
  }
  params_.push_back(std::move(spec));
}

const ParamSpec* ParamRegistry::find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &params_[it->second];
}

const ParamSpec* ParamRegistry::claimant(std::string_view tensor) const {
  auto it = by_source_.find(tensor);
  return it == by_source_.end() ? nullptr : &params_[it->second];
}

}  // namespace flint
