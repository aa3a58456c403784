// NumPy .npz archives of float32 arrays (an uncompressed zip of .npy members), as
// numpy.load reads them. Used for debugging dumps (`flint logits --dump`).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "formats/npy.h"

namespace flint {

struct NpzEntry {
  std::string name;  // the array's key; stored as name + ".npy"
  NpyArray array;
};

// Writes the archive; throws flint::Error naming the path on I/O failure or if it would
// exceed the 4 GiB limit of a zip without the zip64 extension.
void write_npz_f32(const std::filesystem::path& path, const std::vector<NpzEntry>& entries);

}  // namespace flint
