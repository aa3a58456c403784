// A checkpoint directory: one model.safetensors, or shards listed by
// model.safetensors.index.json ({"metadata": {...}, "weight_map": {"tensor": "file"}}),
// plus config.json and the tokenizer files.
//
// Opening maps every shard and checks that the index and the shards agree: a shard file
// the index names but that is missing, a tensor the index places in a file that lacks it,
// and a tensor present in two shards are all errors naming the files and tensor.
// Shards present but not named in the index are ignored with a warning.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "formats/safetensors.h"

namespace flint {

// A tensor of the checkpoint: its description plus a view of its bytes in the mmap.
struct CheckpointTensor {
  const TensorInfo* info = nullptr;
  const SafetensorsFile* file = nullptr;
  std::span<const std::byte> bytes;
};

class Checkpoint {
 public:
  // `path` is a directory (with model.safetensors.index.json or *.safetensors files) or a
  // single .safetensors file.
  static Checkpoint open(const std::filesystem::path& path);

  const std::filesystem::path& dir() const { return dir_; }
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }

  // All tensors, sorted by name.
  const std::map<std::string, CheckpointTensor, std::less<>>& tensors() const { return tensors_; }
  const CheckpointTensor* find(std::string_view name) const;  // nullptr if absent
  uint64_t total_bytes() const;  // sum of tensor data bytes

 private:
  std::filesystem::path dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, CheckpointTensor, std::less<>> tensors_;
};

}  // namespace flint
