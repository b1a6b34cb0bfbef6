// kernels::Ops on a CUDA device, built from the kernels of dense_kernels.h,
// sequence_kernels.h and attention_kernels.h. Every pointer an op receives is device memory
// (activations, weights, states, page tables, snapshot destinations) except the lists the interface
// passes as host spans: GatherRows' ids, MergeAttention's parts, snapshot lists, MoeArgs' expert
// arrays. Workspaces handed to the ops must hold device memory (device_memory() is a source for
// them).
//
// Work is enqueued on the object's stream. Ops return nothing, so the first failure (a refused
// argument or a failed launch) is kept, later ops are skipped, and Synchronize() reports it:
// one bad call cannot be followed by work on garbage unnoticed. One caller thread at a time.
//
// With CUDA graphs on (CudaOpsOptions::graphs), a pass's launches are recorded instead of issued
// and go to the stream at the pass's end (the first read-back): a decode step of a small model
// is hundreds of short kernels, and launching them one by one costs more than running them.
// Each launch adds its name and arguments to the pass's LaunchSignature. A pass whose signature
// was seen before is captured into a graph; one whose signature has a graph launches only that
// (kernels/replay_cache.h). The kernels are the same and their arguments byte-equal, so a
// replay computes exactly what launching the calls would. What a graph cannot hold ends the
// recording and the rest of the pass runs eagerly: buffers that must grow (cuBLAS's scratch
// included; its GEMMs are recorded like our kernels), uploads that cannot be staged, host lists
// read at launch (single-sequence snapshot lists), workspace blocks freed mid-pass. Freeing
// activation memory, or growing a buffer uploads go to, drops every graph: a graph's uploads
// are copies bound to the allocations they were captured with, and a new allocation at the same
// address would let the old graph replay (cuda_ops.cc, activation_blocks_freed).
#ifndef TANDEM_KERNELS_CUDA_CUDA_OPS_H_
#define TANDEM_KERNELS_CUDA_CUDA_OPS_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/deferred_calls.h"
#include "kernels/launch_signature.h"
#include "kernels/ops.h"
#include "kernels/replay_cache.h"
#include "kernels/workspace.h"

namespace tandem::kernels::cuda {

class CublasLinear;

struct CudaOpsOptions {
  // The tensor cores at reduced precision: the prefill Linear (CublasLinear's "tensor cores"
  // precision: TF32 for fp32 weights, activations rounded to bf16/f16 for 16-bit weights) and
  // the tiled attention (one TF32 product per product where the default takes three:
  // TensorCorePrecision::kTf32). A multiple of the exact rate, but ~1e-3 relative error per
  // product, so logits no longer match the CPU backend's: opt-in.
  bool tensor_core_matmul = false;
  // Where cuBLAS is: "" searches for it (CublasLibrary::Default); a path is the only place tried.
  std::string cublas_library;
  // Record each pass and replay repeated ones from CUDA graphs (see above). Same results; fewer
  // launches from the host.
  bool graphs = false;
  // Batch-invariant kernels: a row's result does not depend on what else shares its call, nor
  // on whether it came through a prefill or a decode step, so a cache hit, a batch and a lone
  // request give the same bits. Linear takes the decode kernel at every row count (no cuBLAS,
  // no tiled GEMM); attention sends every row, decode rows too, through one kernel chosen by
  // the model's shapes (cuda::AttentionKernels::kSameForEveryRow), keys unsplit; MoE's grouped
  // products take their 8-row kernel. Costs prefill speed, and long-context decode at small
  // batches (no key splits). Tensor cores (tensor_core_matmul) keep the Linear on our kernel.
  bool batch_invariant = false;
};

class CudaOps final : public Ops {
 public:
  // Uses `device` with a stream of its own; null with `error` set if the device is unusable.
  // cuBLAS (for the prefill Linear: cublas_linear.h) that cannot be loaded is no error: Linear
  // then runs on our kernels alone, and cublas_status() says why.
  static std::unique_ptr<CudaOps> Create(int device, const CudaOpsOptions& options,
                                         std::string* error);
  static std::unique_ptr<CudaOps> Create(int device, std::string* error) {
    return Create(device, CudaOpsOptions(), error);
  }
  ~CudaOps() override;

  // Whether Linear goes through cuBLAS from CublasLinear::kMinRows rows (decode shapes, int8
  // weights and, in exact mode, 16-bit weights always take our kernels).
  bool has_cublas() const { return cublas_ != nullptr; }
  // What was loaded ("cuBLAS 13.0.2 (/path/libcublas.so.13)"), or why none is used.
  const std::string& cublas_status() const { return cublas_status_; }
  // Linear calls handed to cuBLAS so far (tests check which path a product took).
  int64_t cublas_linear_calls() const { return cublas_linear_calls_; }
  void set_tensor_core_matmul(bool on) { tensor_core_matmul_ = on; }
  bool batch_invariant() const { return batch_invariant_; }
  bool tensor_core_matmul() const { return tensor_core_matmul_; }
  // The tiled attention's precision that tensor_core_matmul() asks for.
  TensorCorePrecision tensor_core_precision() const {
    return tensor_core_matmul_ ? TensorCorePrecision::kTf32 : TensorCorePrecision::kFp32;
  }
  // Whether passes are recorded for CUDA graphs, and how many were replayed from one or captured
  // into one so far (tests check that a steady decode replays).
  bool graphs() const { return replay_ != nullptr; }
  int64_t graph_replays() const { return replay_ ? replay_->replays() : 0; }
  int64_t graph_captures() const { return replay_ ? replay_->captures() : 0; }
  PassReplayCounts replay_counts() const override { return {graph_replays(), graph_captures()}; }
  // Sends what the current pass recorded to the stream now and runs the rest of the pass eagerly
  // (the activation memory calls it before freeing a block the recorded calls may use).
  void StopRecording();

  std::string_view name() const override { return "cuda"; }
  cudaStream_t stream() const { return stream_; }
  // Device memory (cudaMalloc) for Workspaces of activations.
  MemorySource& activation_memory() override;
  // Waits for the stream; returns the first error since the last call ("" if none) and clears it.
  std::string Synchronize();
  // Synchronize(), then a device-to-host copy when nothing failed.
  std::string ReadBack(const float* src, size_t count, float* dst) override;
  // The argmax of each row on the device; only the indices are copied back.
  std::string ReadBackArgmax(const float* src, int64_t ld_src, int64_t rows, int64_t cols,
                             int32_t* out) override;
  // The rows sampled on the device (cuda::SampleRows); only the tokens (and the logprobs asked
  // for) are copied back.
  std::string ReadBackSampled(const float* src, int64_t ld_src, int64_t cols,
                              std::span<const SamplingRow> rules,
                              std::span<const PenaltyToken> seen, SampledToken* out) override;
  // cudaSetDevice: the stream and the activation memory belong to this object's device.
  void BindCallingThread() override;

  void Linear(const float* x, int64_t ld_x, int64_t m, const WeightMatrix& w, const float* bias,
              float* y, int64_t ld_y) override;
  void GatherRows(const WeightMatrix& table, std::span<const int32_t> ids, float* out,
                  int64_t ld_out) override;
  void CopyRows(const float* src, int64_t ld_src, int64_t rows, int64_t cols, float* dst,
                int64_t ld_dst) override;
  void AddRows(const float* src, int64_t ld_src, int64_t rows, int64_t cols, float* dst,
               int64_t ld_dst) override;
  void ScaleRows(float* x, int64_t ld_x, int64_t rows, int64_t cols, float factor) override;
  void DivideRows(float* x, int64_t ld_x, int64_t rows, int64_t cols, float divisor) override;
  void GatherRowsAt(const float* src, int64_t ld_src, std::span<const int32_t> rows, int64_t cols,
                    float* dst, int64_t ld_dst) override;
  void ScatterRowsTo(const float* src, int64_t ld_src, std::span<const int32_t> rows, int64_t cols,
                     float* dst, int64_t ld_dst) override;
  // Copies the table into device memory from `ws`.
  const void* TableBytes(const void* host, size_t bytes, Workspace& ws) override;
  // Through the pinned staging buffer, like every upload.
  void UploadTables(void* device, const void* host, size_t bytes) override;
  void RmsNorm(const float* x, int64_t ld_x, int64_t rows, int64_t dim, const float* weight,
               float eps, float* out, int64_t ld_out) override;
  void GatedRmsNorm(const float* y, int64_t ld_y, const float* z, int64_t ld_z, int64_t rows,
                    int64_t dim, int32_t groups, const float* weight, float eps, float* out,
                    int64_t ld_out) override;
  void RowSquareSums(const float* x, int64_t ld_x, int64_t rows, int64_t cols,
                     float* sums) override;
  void RmsNormBySums(float* x, int64_t ld_x, int64_t rows, int64_t cols, const float* sums,
                     int64_t count, const float* weight, float eps) override;
  void Rope(float* x, int64_t ld_x, int64_t tokens, int32_t heads, int32_t head_dim,
            int64_t start_pos, float theta) override;
  void RopeAt(float* x, int64_t ld_x, int64_t rows, int32_t heads, int32_t head_dim,
              const int64_t* positions, float theta) override;
  void Activate(Activation act, float* x, int64_t ld_x, int64_t rows, int64_t cols) override;
  void GatedActivation(Activation act, const float* gate, int64_t ld_gate, const float* up,
                       int64_t ld_up, int64_t rows, int64_t cols, float* out,
                       int64_t ld_out) override;
  void Moe(const MoeArgs& args, Workspace& ws) override;
  void CausalConv1d(const CausalConvArgs& args) override;
  void CausalConv1dStep(const CausalConvArgs& args) override;
  void SelectiveScan(const SelectiveScanArgs& args) override;
  void SelectiveStateUpdate(const SelectiveScanArgs& args) override;
  void SsdScan(const SsdScanArgs& args, Workspace& ws) override;
  void SsdStateUpdate(const SsdScanArgs& args) override;
  void WriteKv(const float* k, int64_t ld_k, const float* v, int64_t ld_v, int64_t tokens,
               int64_t start_pos, const PagedKv& kv) override;
  void WriteKvAt(const float* k, int64_t ld_k, const float* v, int64_t ld_v, int64_t rows,
                 float* const* const* page_tables, const int64_t* positions,
                 const PagedKv& kv) override;
  void Attention(const AttentionArgs& args, Workspace& ws) override;
  void PartialAttention(const PartialAttentionArgs& args, Workspace& ws) override;
  void SharedPrefixAttention(const SharedPrefixAttentionArgs& args, Workspace& ws) override;
  void MergeAttention(std::span<const AttentionPart> parts, int64_t rows, int32_t heads,
                      int32_t head_dim, float* out, int64_t ld_out, float* lse,
                      int64_t ld_lse) override;

 private:
  CudaOps(int device, cudaStream_t stream, int multiprocessors);
  // Keeps the first failure; true while none has happened (so the op may run).
  bool Ok() const { return error_.empty(); }
  void Record(cudaError_t status, const char* op);
  // The same for a failure already described ("" is none).
  void Record(std::string failure);
  // The same for a launch function that describes its own failures (`op` is in them).
  void Record(std::string failure, const char* /*op*/) { Record(std::move(failure)); }
  // Enqueues `Kernel(stream_, args...)` (a launch function of the cuda:: kernels), or records it
  // for the pass's end while the pass is being recorded.
  template <auto Kernel, typename... Args>
  void Launch(const char* op, const Args&... args);
  // The pass's end (a read-back's start): its recorded calls replayed from a graph, captured
  // into one, or run; what follows until Synchronize runs eagerly.
  void FinishPass();
  void CaptureAndLaunch();
  // Forgets every graph when activation memory was freed since this was last asked: a graph's
  // uploads are bound to the allocations they were captured with (cuda_ops.cc,
  // activation_blocks_freed). Graphs must be on.
  void DropGraphsNamingFreedMemory();
  // `count` values copied into device scratch from `ws` (enqueued on the stream, through the
  // pinned staging buffer: `host` may be reused as soon as this returns).
  template <typename T>
  T* Upload(const T* host, size_t count, Workspace& ws);
  // Enqueues a copy of `bytes` at `host` to `device` through the staging buffer; `host` may be
  // reused as soon as this returns.
  void CopyToDevice(void* device, const void* host, size_t bytes, const char* op);
  // `bytes` of pinned host memory for an upload, valid until the stream has run the copies
  // queued so far (staging is recycled at each Synchronize); null when none can be had.
  std::byte* Stage(size_t bytes);

  int device_;
  int multiprocessors_;  // sizes the key splits of decode attention
  cudaStream_t stream_;
  std::string error_;
  // The prefill Linear's GEMMs, bound to stream_; null when cuBLAS could not be had.
  std::unique_ptr<CublasLinear> cublas_;
  std::string cublas_status_;
  int64_t cublas_linear_calls_ = 0;
  bool tensor_core_matmul_ = false;
  bool batch_invariant_ = false;
  // Under batch_invariant_, a decode batch's rows as sequences of one row each for the varlen
  // attention (0, 1, 2, …): filled when it grows, read by every decode pass.
  DeviceBuffer<int64_t> one_row_each_;
  // CUDA graphs (null when off). A pass is open from its first launch to the Synchronize that
  // ends its read-back; it is recorded from its start until FinishPass or StopRecording.
  std::unique_ptr<ReplayCache> replay_;
  bool pass_open_ = false;
  bool recording_ = false;
  uint64_t activation_blocks_freed_seen_ = 0;
  DeferredCalls calls_;
  LaunchSignature signature_;
  // Pinned host memory the uploads of a pass go through (tables, MoE's expert pointers).
  std::byte* staging_ = nullptr;
  size_t staging_capacity_ = 0;
  size_t staged_ = 0;       // bytes of the buffer in use since the stream last drained it
  size_t pass_staged_ = 0;  // bytes this pass has staged in all (what the buffer should hold)
  // MoE: the grouped kernels' tables of one layer's experts (their weight and scale pointers),
  // uploaded once and kept, keyed by the layer's array of matrices. The host copy tells a stale
  // entry (another model's layer at the same address) from a current one.
  struct ExpertTable {
    std::vector<const void*> weights;
    std::vector<const float*> scales;
    DeviceBuffer<const void*> device_weights;
    DeviceBuffer<const float*> device_scales;
  };
  std::unordered_map<const WeightMatrix*, ExpertTable> expert_tables_;
  // The device tables of matrices [0, count); false (with the error kept) when the experts are
  // not all in one format or the upload fails. `scales` is null unless the format has them.
  bool ExpertTables(const WeightMatrix* matrices, int32_t count, const void* const** weights,
                    const float* const** scales);
  // GatherRows' ids and the indexed copies' rows, uploaded (grown during warm-up only). One
  // buffer serves every call: the upload is ordered on the stream after the kernels before it.
  DeviceBuffer<int32_t> ids_;
  DeviceBuffer<int32_t> tokens_;  // ReadBackArgmax's, before they are copied back
  // ReadBackSampled's rules and penalty tokens, uploaded; the rows' penalised and weighed copies;
  // the results before they are copied back (all grown as batches and histories grow).
  DeviceBuffer<SamplingRow> sample_rules_;
  DeviceBuffer<PenaltyToken> sample_seen_;
  DeviceBuffer<float> sample_scratch_;
  DeviceBuffer<SampledToken> sampled_;
  // Grows `buffer` to at least `count` elements; false (with the error kept) when that fails.
  template <typename T>
  bool Reserve(DeviceBuffer<T>& buffer, size_t count, const char* op);
  // Uploads `ids` into ids_; false (with the error kept) when that fails.
  bool UploadIds(std::span<const int32_t> ids, const char* op);
  void IndexedCopy(bool scatter, const float* src, int64_t ld_src, std::span<const int32_t> rows,
                   int64_t cols, float* dst, int64_t ld_dst);
};

}  // namespace tandem::kernels::cuda

#endif  // TANDEM_KERNELS_CUDA_CUDA_OPS_H_
