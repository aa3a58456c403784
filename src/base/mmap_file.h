// A read-only memory mapping of a whole file (RAII, move-only).
//
// Weights are used in place from these mappings: opening costs a few system calls, pages
// are read from disk on first touch. Errors (missing file, permission, directory) throw
// flint::Error naming the path.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

namespace flint {

class MappedFile {
 public:
  MappedFile() = default;
  static MappedFile open(const std::filesystem::path& path);

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  std::size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

  // Hints the kernel to read the whole file ahead (MADV_WILLNEED); cheap, asynchronous.
  void prefetch() const;
  // Drops this process's resident pages inside `range` (whole pages only; false if the
  // range is not in this mapping). The mapping is private and read-only: a page touched
  // again is read back from the file, so nothing changes but the resident size.
  bool release(std::span<const std::byte> range) const;
  // Reads only the pages touched (MADV_RANDOM: no readahead, no mapping of neighbours):
  // for a process that uses a part of the file (one rank's share of the weights).
  void read_touched_pages_only() const;

 private:
  void reset();

  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace flint
