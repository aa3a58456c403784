// NumPy .npy files (format version 1.0) holding float32 C-order arrays: what
// `flint logits --output FILE.npy` writes and what tests read back and compare.
//
// Layout: "\x93NUMPY", version bytes 1 0, a little-endian uint16 header length, a Python
// dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with
// spaces and a final '\n' so that the data starts at a multiple of 64 bytes (as numpy
// writes it), then the raw little-endian floats.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace flint {

struct NpyArray {
  std::vector<int64_t> shape;  // () for a scalar
  std::vector<float> data;     // product(shape) values, C order
};

// Writes `data` (exactly product(shape) values) as a float32 .npy file. Throws
// flint::Error naming the path on a size mismatch or an I/O failure.
void write_npy_f32(const std::filesystem::path& path, std::span<const int64_t> shape,
                   std::span<const float> data);

// Reads a .npy file of version 1.x or 2.x holding '<f4' data in C order. Anything else
// (other dtypes, Fortran order, a truncated file) throws flint::Error naming the path.
NpyArray read_npy_f32(const std::filesystem::path& path);

// The header numpy writes for a '<f4' C-order array of `shape` (magic to '\n' included).
std::string npy_f32_header(std::span<const int64_t> shape);

}  // namespace flint
