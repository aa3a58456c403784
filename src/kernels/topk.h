// Indices of the k largest values: ordered by value descending, ties broken by the lower
// index (deterministic). k is clamped to n. NaN values rank below everything.
#pragma once

#include <cstdint>
#include <vector>

namespace flint::kernels {

void topk(const float* x, int64_t n, int64_t k, std::vector<int32_t>& out);

}  // namespace flint::kernels
