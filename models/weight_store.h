// Holds a model's weights for the lifetime of the model. Vectors (norms, biases, conv kernels,
// A, D) are fp32 arrays; the matrices that Linear reads are WeightMatrix views in the storage the
// load asked for: a checkpoint's own bf16/f16 bytes borrowed from its file mapping (zero copy),
// fp32 (borrowed when the checkpoint is fp32), or converted / fused into owned memory.
#ifndef TANDEM_MODELS_WEIGHT_STORE_H_
#define TANDEM_MODELS_WEIGHT_STORE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/weight_matrix.h"
#include "models/tensor_parallel.h"
#include "models/tensor_source.h"

namespace tandem::models {

// Where a store's tensors go once loaded: by default they stay where they were loaded (host
// memory, or the checkpoint's mapping); a device placer copies each into device memory, and the
// layers then hold device pointers (for a backend such as CudaOps).
class TensorPlacer {
 public:
  virtual ~TensorPlacer() = default;
  // A copy of `bytes` bytes at `host` in the target memory, alive as long as the placer.
  virtual absl::StatusOr<const void*> Place(const void* host, size_t bytes) = 0;
};

// The format Linear weights are kept in (`--weight-dtype`).
enum class WeightStorage {
  kAuto,  // the checkpoint's: bf16 and f16 stay as stored, everything else becomes fp32
  kF32,
  kBF16,
  kF16,
  kInt8,  // symmetric per-row int8 (lossy); embeddings keep the kAuto format
};

// "auto", "f32", "bf16", "f16", "int8"; InvalidArgument naming the value and the choices.
absl::StatusOr<WeightStorage> ParseWeightStorage(std::string_view name);
std::string_view WeightStorageName(WeightStorage storage);

// Every getter takes the tensor's full shape as stored; with a TensorSlice (tensor parallelism:
// models/tensor_parallel.h) it keeps only that part, in memory of its own.
class WeightStore {
 public:
  // `placer` (may be null: tensors stay on the host) must outlive the store.
  explicit WeightStore(const TensorSource& source, WeightStorage storage = WeightStorage::kAuto,
                       TensorPlacer* placer = nullptr)
      : source_(source), storage_(storage), placer_(placer) {}

  bool Has(const std::string& name) const { return source_.Has(name); }
  WeightStorage storage() const { return storage_; }
  // Where the weights were placed; null = host memory.
  const TensorPlacer* placer() const { return placer_; }

  // The tensor `name` with exactly `shape`, as fp32; errors name the file and tensor.
  absl::StatusOr<const float*> Get(const std::string& name, std::initializer_list<int64_t> shape,
                                   const TensorSlice& slice = {});

  // The [rows, cols] matrix `name` in the store's weight storage.
  absl::StatusOr<kernels::WeightMatrix> Matrix(const std::string& name, int64_t rows, int64_t cols,
                                               const TensorSlice& slice = {});

  // The [rows, cols] matrix `name` in the checkpoint's own format (kAuto) whatever the store's
  // storage: a matrix whose rounding would change decisions rather than values (Nemotron 3's
  // router, which transformers keeps in fp32 even in a bf16 model).
  absl::StatusOr<kernels::WeightMatrix> ExactMatrix(const std::string& name, int64_t rows,
                                                    int64_t cols, const TensorSlice& slice = {});

  // `count` matrices [rows, cols] stored as one [count, rows, cols] tensor (Granite's experts),
  // kept as one [count·rows, cols] matrix in the store's weight storage: one view per matrix.
  // A slice cuts each matrix alike (its dim counts the leading `count` dimension).
  absl::StatusOr<std::vector<kernels::WeightMatrix>> Matrices(const std::string& name,
                                                              int64_t count, int64_t rows,
                                                              int64_t cols,
                                                              const TensorSlice& slice = {});

  // An embedding table [rows, cols]: rows are gathered, not multiplied, so it is never int8.
  absl::StatusOr<kernels::WeightMatrix> Embedding(const std::string& name, int64_t rows,
                                                  int64_t cols);

  // Matrix(name, ...) once more, e.g. the int8 LM head of a model whose head is tied to its
  // float embedding. Its bytes count; its values are not new parameters.
  absl::StatusOr<kernels::WeightMatrix> SecondCopy(const std::string& name, int64_t rows,
                                                   int64_t cols);

  // Matrices stacked along their first dimension into one owned matrix, so that several linear
  // layers reading the same input run as one GEMM (e.g. q ‖ k ‖ v, gate ‖ up). Each part is
  // [rows_i, cols] with the same cols. With kAuto storage the stack keeps the parts' stored
  // format when they share one.
  struct Part {
    Part(std::string name, int64_t rows, TensorSlice slice = {})
        : name(std::move(name)), rows(rows), slice(std::move(slice)) {}
    std::string name;
    int64_t rows;       // as stored
    TensorSlice slice;  // the part kept (rows or columns), all of it by default
  };
  absl::StatusOr<kernels::WeightMatrix> Stack(const std::vector<Part>& parts, int64_t cols);

  // The tensor transformed element-wise into owned memory (e.g. A = -exp(A_log)).
  absl::StatusOr<const float*> Map(const std::string& name, std::initializer_list<int64_t> shape,
                                   const std::function<float(float)>& fn,
                                   const TensorSlice& slice = {});

  // Bytes of weights held (borrowed or owned), for the bandwidth figures of the benchmarks.
  size_t bytes() const { return bytes_; }
  // Bytes of host memory the store itself holds: converted, stacked and widened tensors (not
  // the checkpoint's mapping). With a placer the tensors live in the target memory and their
  // host copies are freed as soon as they are placed, so this stays 0: a GPU server does not
  // keep a second copy of its weights in host memory.
  size_t host_bytes_held() const;
  // Values held (every tensor's element count, whatever its format).
  size_t parameters() const { return parameters_; }

 private:
  // The format a tensor stored as `stored` is kept in under `storage`.
  static kernels::WeightFormat FormatFor(WeightStorage storage, DType stored);
  // The tensor `name` of `shape` (sliced) as the matrix [product of all but the last dim, last
  // dim].
  absl::StatusOr<kernels::WeightMatrix> MatrixIn(WeightStorage storage, const std::string& name,
                                                 const std::vector<int64_t>& shape,
                                                 const TensorSlice& slice);
  // The source's tensors, cut to `slice` (a copy) unless it is whole.
  absl::StatusOr<FloatTensor> LoadFloat(const std::string& name, const std::vector<int64_t>& shape,
                                        const TensorSlice& slice) const;
  absl::StatusOr<RawTensor> LoadRaw(const std::string& name, const std::vector<int64_t>& shape,
                                    const TensorSlice& slice);
  // Where the layers read `host` from: itself, or its placed copy (after which, with a placer,
  // the host copies are freed: every public method returns placed tensors only).
  absl::StatusOr<const float*> Placed(const float* host, size_t floats);
  absl::StatusOr<kernels::WeightMatrix> Placed(const kernels::WeightMatrix& host);
  // With a placer, frees what the store holds on the host (everything is placed by now).
  void ReleaseHostCopies();
  // fp32 values converted into owned memory in `format`.
  absl::StatusOr<kernels::WeightMatrix> Own(const std::string& what, std::vector<float> values,
                                            int64_t rows, int64_t cols,
                                            kernels::WeightFormat format);

  const TensorSource& source_;
  const WeightStorage storage_;
  TensorPlacer* const placer_;
  std::deque<FloatTensor> tensors_;
  std::deque<RawTensor> raw_;
  std::deque<std::vector<float>> owned_;
  std::deque<std::vector<uint8_t>> owned_bytes_;
  size_t bytes_ = 0;
  size_t parameters_ = 0;
};

}  // namespace tandem::models

#endif  // TANDEM_MODELS_WEIGHT_STORE_H_
