// NumPy .npy files (format 1.0; 2.0/3.0 read too) for float32 arrays: the writer produces the
// bytes numpy.save does for a C-order float32 array; the reader takes '<f4' and '<f8' (converted
// to float) in C order, for comparing against reference fixtures.
#ifndef TANDEM_MODELS_NPY_H_
#define TANDEM_MODELS_NPY_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tandem::models {

struct NpyArray {
  std::vector<int64_t> shape;  // empty for a 0-d array (one element)
  std::vector<float> data;     // row-major
};

// The complete header numpy writes before the data of a C-order '<f4' array of `shape`:
// magic, version, header length, the dict literal, space padding and '\n', a multiple of 64
// bytes in total. Dimensions must be non-negative.
std::string NpyFloat32Header(std::span<const int64_t> shape);

// Writes `data` (row-major, product of `shape` elements) as a float32 .npy file.
absl::Status WriteNpy(const std::string& path, std::span<const int64_t> shape,
                      std::span<const float> data);

// Reads a .npy file holding '<f4' or '<f8' data in C order. Errors name the file and say what
// is wrong (bad magic, unsupported dtype such as '>f4' or '<i4', Fortran order, size mismatch).
absl::StatusOr<NpyArray> ReadNpy(const std::string& path);

// As ReadNpy, from the file's bytes; `path` only names the source in errors.
absl::StatusOr<NpyArray> ParseNpy(std::span<const uint8_t> bytes, std::string_view path);

}  // namespace tandem::models

#endif  // TANDEM_MODELS_NPY_H_
