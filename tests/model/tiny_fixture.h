// Test checkpoints made by write_tiny_checkpoint, written once per test process into a
// temporary directory (removed at exit), and helpers to derive broken copies.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "formats/safetensors.h"
#include "model/deepseek_v4/tiny_checkpoint.h"

namespace flint::testing {

// True in the sanitizer builds of scripts/test.sh (FLINT_SANITIZE): they run the model 10 to
// 40 times slower, so tests that check numbers over long sequences shrink there, keeping the
// code paths they reach (the main build runs them in full).
#ifdef FLINT_SANITIZED
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// A fresh directory under the system temp dir, removed when the process exits.
std::filesystem::path temp_dir(const std::string& tag);

// The checkpoint of `preset` (seed 1), written on first use.
const std::filesystem::path& tiny_checkpoint(const std::string& preset = "tiny",
                                             dsv4::ExpertDType experts = dsv4::ExpertDType::kFp4);

// A tensor to write in an edited copy; owns its bytes.
struct EditableTensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;
};

// Copies `source` into a new directory as one safetensors file after `edit` changed the
// tensor list (drop, add, reshape, corrupt...). config.json is copied unchanged.
std::filesystem::path edited_copy(const std::filesystem::path& source, const std::string& tag,
                                  const std::function<void(std::vector<EditableTensor>&)>& edit);

}  // namespace flint::testing
