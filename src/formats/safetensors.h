// Reading and writing the safetensors format over mmap.
//
// Layout: 8-byte little-endian header length N, N bytes of JSON
// {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
//  "__metadata__": {"k": "v"}}, then the data section; offsets are relative to it.
//
// Every malformed input throws flint::Error naming the file and, where there is one, the
// tensor: header longer than the file, bad JSON, unknown dtype, offsets out of range,
// overlapping or reversed, shape and byte size disagreeing, duplicate names. Nothing here
// may crash or hang on any input (a libFuzzer target checks it).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "base/mmap_file.h"
#include "formats/dtype.h"

namespace flint {

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets in the data section, [begin, end)
  uint64_t end = 0;

  uint64_t numel() const;
  uint64_t nbytes() const { return end - begin; }
};

struct SafetensorsHeader {
  std::vector<TensorInfo> tensors;  // in header order
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;          // file offset of the data section (8 + N)
};

// Parses and validates the header of a whole safetensors file held in `file`.
// `label` (usually the path) prefixes every error message.
SafetensorsHeader parse_safetensors_header(std::span<const std::byte> file, const std::string& label);

// One mmap'd safetensors file. Views returned by data() live as long as this object.
class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return file_.path(); }
  const std::vector<TensorInfo>& tensors() const { return header_.tensors; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  const TensorInfo* find(const std::string& name) const;  // nullptr if absent
  std::span<const std::byte> data(const TensorInfo& tensor) const;
  uint64_t file_size() const { return file_.size(); }
  void prefetch() const { file_.prefetch(); }
  const MappedFile& mapping() const { return file_; }

 private:
  MappedFile file_;
  SafetensorsHeader header_;
  std::map<std::string, std::size_t, std::less<>> index_;
};

// A tensor to write: `bytes` must hold exactly numel * dtype_size bytes.
struct TensorToWrite {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::span<const std::byte> bytes;
};

// Writes a safetensors file (header padded to 8 bytes with spaces, as the reference does).
// Throws flint::Error on I/O failure or inconsistent sizes.
void write_safetensors(const std::filesystem::path& path, std::span<const TensorToWrite> tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace flint
