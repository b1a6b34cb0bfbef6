#include "kernels/cuda/cuda_ops.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/cublas_linear.h"
#include "kernels/cuda/dense_kernels.h"
#include "kernels/cuda/handled_error.h"
#include "kernels/cuda/moe_kernels.h"
#include "kernels/cuda/sampling_kernels.h"
#include "kernels/cuda/sequence_kernels.h"

namespace tandem::kernels::cuda {
namespace {

// The CudaOps whose pass this thread is recording, if any. One at a time: a CudaOps that opens a
// recorded pass first sends any other's recording on this thread to its stream, so that a
// block freed here never outlives the recorded calls that name it. A pass is recorded and
// finished on one thread (CudaOps takes one caller thread at a time).
thread_local CudaOps* recording_on_this_thread = nullptr;

// Blocks of activation memory freed so far, by any CudaOps's workspaces, on any thread. A graph's
// upload is a copy node, and the driver binds a copy node to the allocation its destination was
// in when the graph was made: once that allocation is freed the graph cannot be launched again,
// even where a new allocation has come back at the same address and so the pass signs alike
// (seen on an H200: the next launch failed, or crashed in cuGraphLaunch). Each CudaOps compares
// this count with the one it last saw before it replays anything, on its own thread, and drops
// its graphs when it moved. Releases come with workspace growth, not every step.
std::atomic<uint64_t> activation_blocks_freed{0};

class DeviceMemorySource final : public MemorySource {
 public:
  void* Allocate(size_t bytes) override {
    void* p = nullptr;
    // A failure is answered here (null: the workspace reports it), not by the next launch.
    return Handled(cudaMalloc(&p, bytes)) == cudaSuccess ? p : nullptr;  // 256-byte aligned
  }
  void Release(void* p) override {
    // A recorded call may still name this block: it must reach the stream before the block goes
    // (cudaFree waits for the work already queued that might use it).
    if (recording_on_this_thread != nullptr) recording_on_this_thread->StopRecording();
    cudaFree(p);
    activation_blocks_freed.fetch_add(1, std::memory_order_relaxed);
  }
};

// Launch functions for what is not a kernel of ours, so that it records like one.
cudaError_t CopyHostToDevice(cudaStream_t stream, void* device, const void* host, size_t bytes) {
  return cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream);
}

// CublasLinear::Run as a launch function. `scratch` (the handle's scratch when recorded) is not
// used: it is there to be signed, so that a graph is replayed only while the scratch its GEMMs
// read is still the one they were captured with.
std::string RunCublas(cudaStream_t, CublasLinear* cublas, const void* /*scratch*/,
                      bool tensor_cores, const float* x, int64_t ld_x, int64_t m,
                      const WeightMatrix& w, const float* bias, float* y, int64_t ld_y) {
  return cublas->Run(tensor_cores, x, ld_x, m, w, bias, y, ld_y);
}

// MergeAttention's parts by value: the host list may be gone when a recorded call runs.
struct PartList {
  std::array<AttentionPart, kMaxParts> parts;
  size_t count = 0;
};
cudaError_t MergeParts(cudaStream_t stream, const PartList& list, int64_t rows, int32_t heads,
                       int32_t head_dim, float* out, int64_t ld_out, float* lse, int64_t ld_lse) {
  return cuda::MergeAttention(stream, {list.parts.data(), list.count}, rows, heads, head_dim, out,
                              ld_out, lse, ld_lse);
}

// Each launch argument into a signature: LaunchSignature's own types, and the CUDA backend's.
template <typename T>
void Sign(LaunchSignature& signature, const T& value) {
  signature.Add(value);
}
void Sign(LaunchSignature& signature, const KeySplits& splits) {
  signature.Add(splits.count);
  signature.Add(splits.out);
  signature.Add(splits.lse);
}
void Sign(LaunchSignature& signature, const MoeRouting& routing) {
  signature.Add(static_cast<int>(routing.score));
  signature.Add(routing.renormalize);
  signature.Add(routing.bias);
  signature.Add(routing.groups);
  signature.Add(routing.top_groups);
  signature.Add(routing.scale);
}
void Sign(LaunchSignature& signature, const PartList& list) {
  signature.Add(list.count);
  for (size_t i = 0; i < list.count; ++i) signature.Add(list.parts[i]);
}

void DestroyGraph(ReplayCache::Graph graph) {
  cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph));
}

}  // namespace

std::unique_ptr<CudaOps> CudaOps::Create(int device, const CudaOpsOptions& options,
                                         std::string* error) {
  cudaStream_t stream = nullptr;
  cudaError_t status = cudaSetDevice(device);
  if (status == cudaSuccess) status = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (Handled(status) != cudaSuccess) {
    *error = "CUDA device " + std::to_string(device) + ": " + cudaGetErrorString(status);
    return nullptr;
  }
  int multiprocessors = 1;
  Handled(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
  std::unique_ptr<CudaOps> ops(new CudaOps(device, stream, std::max(multiprocessors, 1)));
  ops->tensor_core_matmul_ = options.tensor_core_matmul;
  ops->batch_invariant_ = options.batch_invariant;
  if (options.graphs) ops->replay_ = std::make_unique<ReplayCache>(&DestroyGraph);
  // Without cuBLAS every product still has a kernel of ours: the reason is kept, not returned.
  std::shared_ptr<const CublasLibrary> library =
      options.cublas_library.empty()
          ? CublasLibrary::Default(&ops->cublas_status_)
          : CublasLibrary::Open(options.cublas_library, &ops->cublas_status_);
  if (library != nullptr) {
    ops->cublas_ = CublasLinear::Create(library, stream, &ops->cublas_status_);
    if (ops->cublas_ != nullptr) ops->cublas_status_ = library->description();
  }
  return ops;
}

CudaOps::CudaOps(int device, cudaStream_t stream, int multiprocessors)
    : device_(device), multiprocessors_(multiprocessors), stream_(stream) {}

CudaOps::~CudaOps() {
  StopRecording();  // what was recorded runs, like what was launched
  if (recording_on_this_thread == this) recording_on_this_thread = nullptr;
  cublas_.reset();  // it waits for its GEMMs on the stream destroyed below
  cudaStreamSynchronize(stream_);
  replay_.reset();
  cudaStreamDestroy(stream_);
  if (staging_ != nullptr) cudaFreeHost(staging_);
}

MemorySource& CudaOps::activation_memory() {
  static DeviceMemorySource device;
  return device;
}

void CudaOps::Record(cudaError_t status, const char* op) {
  if (status != cudaSuccess && error_.empty()) {
    error_ = std::string(op) + ": " + cudaGetErrorString(status);
  }
}

void CudaOps::Record(std::string failure) {
  if (!failure.empty() && error_.empty()) error_ = std::move(failure);
}

template <auto Kernel, typename... Args>
void CudaOps::Launch(const char* op, const Args&... args) {
  if (!Ok()) return;
  if (!pass_open_) {
    pass_open_ = true;
    recording_ = replay_ != nullptr;
    if (recording_) {
      if (recording_on_this_thread != nullptr && recording_on_this_thread != this) {
        recording_on_this_thread->StopRecording();
      }
      recording_on_this_thread = this;
    }
  }
  if (!recording_) {
    Record(Kernel(stream_, args...), op);
    return;
  }
  // The launch function and the op's name (a literal: its address names it), then the
  // arguments: two calls sign alike only if they run the same function on the same bytes.
  static constexpr char kFunction = 0;  // one per instantiation: its address names Kernel
  signature_.Add(static_cast<const void*>(&kFunction));
  signature_.Add(static_cast<const void*>(op));
  (Sign(signature_, args), ...);
  calls_.Add([this, op, args...] {
    if (Ok()) Record(Kernel(stream_, args...), op);
  });
}

void CudaOps::StopRecording() {
  if (!recording_) return;
  recording_ = false;
  if (recording_on_this_thread == this) recording_on_this_thread = nullptr;
  // Possibly called for this object by another one's thread (see recording_on_this_thread):
  // the calls launch on this object's device.
  int current = device_;
  Handled(cudaGetDevice(&current));
  if (current != device_) Handled(cudaSetDevice(device_));
  calls_.RunAll();
  if (current != device_) Handled(cudaSetDevice(current));
  calls_.Clear();
  signature_.Clear();
}

void CudaOps::FinishPass() {
  // The read-back's own launches (argmax, sampling and their uploads) run as they come: the
  // pass stays open, unrecorded, until Synchronize closes it.
  pass_open_ = true;
  if (!recording_) return;
  recording_ = false;
  if (recording_on_this_thread == this) recording_on_this_thread = nullptr;
  if (Ok() && !calls_.empty()) {
    DropGraphsNamingFreedMemory();
    const ReplayCache::Decision decision = replay_->Decide(signature_);
    switch (decision.plan) {
      case ReplayCache::Plan::kReplay:
        if (Handled(cudaGraphLaunch(static_cast<cudaGraphExec_t>(decision.graph), stream_)) !=
            cudaSuccess) {
          // Refused at submission, so nothing of it ran: the calls run instead (and report a
          // failure of their own), and this pass is not replayed again.
          replay_->Refuse(signature_);
          calls_.RunAll();
        }
        break;
      case ReplayCache::Plan::kCapture:
        CaptureAndLaunch();
        break;
      case ReplayCache::Plan::kRunEagerly:
        calls_.RunAll();
        break;
    }
  }
  calls_.Clear();
  signature_.Clear();
}

void CudaOps::CaptureAndLaunch() {
  // Relaxed: the launch functions may query the device or set a kernel's attributes while the
  // stream is capturing; nothing here synchronizes.
  cudaError_t status = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (status == cudaSuccess) {
    calls_.RunAll();  // into the graph: nothing runs yet
    status = cudaStreamEndCapture(stream_, &graph);
    if (status == cudaSuccess && Ok()) status = cudaGraphInstantiate(&exec, graph, 0);
    if (graph != nullptr) cudaGraphDestroy(graph);
  }
  if (Handled(status) != cudaSuccess || !Ok()) {
    // Nothing ran: a call the capture could not hold, or a refused launch. Run the calls as they
    // are, which reports a launch's own failure, and never capture this pass again.
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    error_.clear();
    replay_->Refuse(signature_);
    calls_.RunAll();
    return;
  }
  replay_->Store(signature_, exec);
  if (Handled(cudaGraphLaunch(exec, stream_)) != cudaSuccess) {
    // As for a refused replay: nothing of it ran, so the calls run instead, and the graph goes.
    replay_->Refuse(signature_);
    calls_.RunAll();
  }
}

std::string CudaOps::Synchronize() {
  FinishPass();
  Record(cudaStreamSynchronize(stream_), "synchronize");
  staged_ = 0;  // the stream has consumed every staged upload
  pass_staged_ = 0;
  pass_open_ = false;
  return std::exchange(error_, std::string());
}

std::byte* CudaOps::Stage(size_t bytes) {
  constexpr size_t kAlign = 16;
  if (staged_ + bytes > staging_capacity_) {
    // Copies still queued (or recorded) may read the staged bytes: wait for them before reusing
    // or freeing.
    StopRecording();
    Record(cudaStreamSynchronize(stream_), "upload staging");
    // Room for the whole pass so far and this upload, so that the next pass of the same shape
    // stages everything and can be recorded (a pass that overflows is never replayed). Its
    // uploads still to come are not known: the doubling of bit_ceil catches up in a pass or two.
    const size_t needed = pass_staged_ + bytes;
    staged_ = 0;
    if (needed > staging_capacity_) {
      if (staging_ != nullptr) cudaFreeHost(staging_);
      staging_ = nullptr;
      staging_capacity_ = 0;
      // Graphs captured with copies from the old buffer must never replay, even should a new
      // buffer come back at the same address (their signatures would match). The stream has
      // drained, so they can go.
      if (replay_ != nullptr) replay_->Clear();
      const size_t capacity = std::bit_ceil(std::max<size_t>(needed, size_t{1} << 20));
      void* pinned = nullptr;
      // Without it the upload goes from pageable memory (CopyToDevice); the failure is answered.
      if (Handled(cudaHostAlloc(&pinned, capacity, cudaHostAllocDefault)) != cudaSuccess) {
        return nullptr;
      }
      staging_ = static_cast<std::byte*>(pinned);
      staging_capacity_ = capacity;
    }
  }
  std::byte* at = staging_ + staged_;
  const size_t end = (staged_ + bytes + kAlign - 1) / kAlign * kAlign;
  pass_staged_ += end - staged_;
  staged_ = std::min(staging_capacity_, end);
  return at;
}

void CudaOps::BindCallingThread() { Record(cudaSetDevice(device_), "bind thread"); }

std::string CudaOps::ReadBack(const float* src, size_t count, float* dst) {
  FinishPass();
  if (Ok() && count > 0) {
    Record(cudaMemcpyAsync(dst, src, count * sizeof(float), cudaMemcpyDeviceToHost, stream_),
           "read back");
  }
  return Synchronize();
}

template <typename T>
bool CudaOps::Reserve(DeviceBuffer<T>& buffer, size_t count, const char* op) {
  if (Ok() && buffer.size() < count) {
    StopRecording();  // recorded calls may name the buffer about to be freed
    Record(buffer.Allocate(count), op);
    // Uploads are copies into these buffers, and a graph's copies are bound to the allocation
    // they were captured with (see activation_blocks_freed).
    if (replay_ != nullptr) replay_->Clear();
  }
  return Ok();
}

void CudaOps::DropGraphsNamingFreedMemory() {
  const uint64_t freed = activation_blocks_freed.load(std::memory_order_relaxed);
  if (freed == activation_blocks_freed_seen_) return;
  activation_blocks_freed_seen_ = freed;
  replay_->Clear();
}

std::string CudaOps::ReadBackArgmax(const float* src, int64_t ld_src, int64_t rows, int64_t cols,
                                    int32_t* out) {
  FinishPass();
  if (rows <= 0 || !Reserve(tokens_, static_cast<size_t>(rows), "read back argmax")) {
    return Synchronize();
  }
  Record(cuda::ArgmaxRows(stream_, src, ld_src, rows, cols, tokens_.get()), "argmax");
  if (Ok()) {
    Record(cudaMemcpyAsync(out, tokens_.get(), static_cast<size_t>(rows) * sizeof(int32_t),
                           cudaMemcpyDeviceToHost, stream_),
           "read back argmax");
  }
  return Synchronize();
}

std::string CudaOps::ReadBackSampled(const float* src, int64_t ld_src, int64_t cols,
                                     std::span<const SamplingRow> rules,
                                     std::span<const PenaltyToken> seen, SampledToken* out) {
  FinishPass();
  const int64_t rows = static_cast<int64_t>(rules.size());
  const char* op = "read back sampled";
  if (rows <= 0 || cols <= 0 || !Reserve(sampled_, rules.size(), op) ||
      !Reserve(sample_rules_, rules.size(), op) ||
      !Reserve(sample_seen_, std::max<size_t>(seen.size(), 1), op) ||
      !Reserve(sample_scratch_, rules.size() * static_cast<size_t>(cols), op)) {
    return Synchronize();
  }
  CopyToDevice(sample_rules_.get(), rules.data(), rules.size_bytes(), op);
  CopyToDevice(sample_seen_.get(), seen.data(), seen.size_bytes(), op);
  if (Ok()) {
    Record(
        cuda::SampleRows(stream_, src, ld_src, rows, cols, sample_rules_.get(), sample_seen_.get(),
                         static_cast<int64_t>(seen.size()), sample_scratch_.get(), sampled_.get()),
        "sample");
  }
  if (Ok()) {
    Record(cudaMemcpyAsync(out, sampled_.get(), rules.size() * sizeof(SampledToken),
                           cudaMemcpyDeviceToHost, stream_),
           op);
  }
  return Synchronize();
}

void CudaOps::CopyToDevice(void* device, const void* host, size_t bytes, const char* op) {
  if (bytes == 0 || !Ok()) return;
  // Through pinned staging the copy is truly asynchronous: the host goes on issuing work. Without
  // it (no pinned memory to be had) a copy from pageable memory still works, more slowly: it
  // returns once `host` has been read.
  std::byte* staged = Stage(bytes);
  if (staged == nullptr) {
    StopRecording();  // `host` is only good until this returns
    Record(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_), op);
    return;
  }
  std::memcpy(staged, host, bytes);
  Launch<&CopyHostToDevice>(op, device, static_cast<const void*>(staged), bytes);
}

template <typename T>
T* CudaOps::Upload(const T* host, size_t count, Workspace& ws) {
  T* device = ws.Array<T>(std::max<size_t>(count, 1));
  CopyToDevice(device, host, count * sizeof(T), "upload");
  return device;
}

void CudaOps::Linear(const float* x, int64_t ld_x, int64_t m, const WeightMatrix& w,
                     const float* bias, float* y, int64_t ld_y) {
  if (!Ok()) return;
  if (!batch_invariant_ && cublas_ != nullptr &&
      CublasLinear::Takes(m, w, ld_x, ld_y, tensor_core_matmul_)) {
    // cuBLAS captures into a graph like our kernels (its workspace is its own), as long as it
    // neither allocates nor waits there: its scratch grows now, outside any recorded call.
    if (cublas_->NeedsToGrow(tensor_core_matmul_, m, w)) StopRecording();
    Record(cublas_->Prepare(tensor_core_matmul_, m, w));
    Launch<&RunCublas>("cuBLAS Linear", cublas_.get(), cublas_->scratch(), tensor_core_matmul_, x,
                       ld_x, m, w, bias, y, ld_y);
    ++cublas_linear_calls_;
    return;
  }
  Launch<&cuda::Linear>("Linear", x, ld_x, m, w, bias, y, ld_y, batch_invariant_);
}

bool CudaOps::UploadIds(std::span<const int32_t> ids, const char* op) {
  if (!Reserve(ids_, ids.size(), op)) return false;
  CopyToDevice(ids_.get(), ids.data(), ids.size_bytes(), op);  // the span may go after this
  return Ok();
}

void CudaOps::GatherRows(const WeightMatrix& table, std::span<const int32_t> ids, float* out,
                         int64_t ld_out) {
  if (ids.empty() || !UploadIds(ids, "GatherRows ids")) return;
  Launch<&cuda::GatherRows>("GatherRows", table, static_cast<const int32_t*>(ids_.get()),
                            static_cast<int64_t>(ids.size()), out, ld_out);
}

void CudaOps::IndexedCopy(bool scatter, const float* src, int64_t ld_src,
                          std::span<const int32_t> rows, int64_t cols, float* dst, int64_t ld_dst) {
  const char* op = scatter ? "ScatterRowsTo" : "GatherRowsAt";
  if (rows.empty() || !UploadIds(rows, op)) return;
  Launch<&cuda::IndexedCopyRows>(op, scatter, src, ld_src, static_cast<const int32_t*>(ids_.get()),
                                 static_cast<int64_t>(rows.size()), cols, dst, ld_dst);
}

void CudaOps::GatherRowsAt(const float* src, int64_t ld_src, std::span<const int32_t> rows,
                           int64_t cols, float* dst, int64_t ld_dst) {
  IndexedCopy(false, src, ld_src, rows, cols, dst, ld_dst);
}

void CudaOps::ScatterRowsTo(const float* src, int64_t ld_src, std::span<const int32_t> rows,
                            int64_t cols, float* dst, int64_t ld_dst) {
  IndexedCopy(true, src, ld_src, rows, cols, dst, ld_dst);
}

void CudaOps::CopyRows(const float* src, int64_t ld_src, int64_t rows, int64_t cols, float* dst,
                       int64_t ld_dst) {
  Launch<&cuda::CopyRows>("CopyRows", src, ld_src, rows, cols, dst, ld_dst);
}

void CudaOps::AddRows(const float* src, int64_t ld_src, int64_t rows, int64_t cols, float* dst,
                      int64_t ld_dst) {
  Launch<&cuda::AddRows>("AddRows", src, ld_src, rows, cols, dst, ld_dst);
}

void CudaOps::ScaleRows(float* x, int64_t ld_x, int64_t rows, int64_t cols, float factor) {
  Launch<&cuda::ScaleRows>("ScaleRows", x, ld_x, rows, cols, factor, false);
}

void CudaOps::DivideRows(float* x, int64_t ld_x, int64_t rows, int64_t cols, float divisor) {
  Launch<&cuda::ScaleRows>("DivideRows", x, ld_x, rows, cols, divisor, true);
}

const void* CudaOps::TableBytes(const void* host, size_t bytes, Workspace& ws) {
  return Upload<std::byte>(static_cast<const std::byte*>(host), bytes, ws);
}

void CudaOps::UploadTables(void* device, const void* host, size_t bytes) {
  CopyToDevice(device, host, bytes, "upload tables");
}

void CudaOps::RmsNorm(const float* x, int64_t ld_x, int64_t rows, int64_t dim, const float* weight,
                      float eps, float* out, int64_t ld_out) {
  Launch<&cuda::RmsNorm>("RmsNorm", x, ld_x, rows, dim, weight, eps, out, ld_out);
}

void CudaOps::GatedRmsNorm(const float* y, int64_t ld_y, const float* z, int64_t ld_z, int64_t rows,
                           int64_t dim, int32_t groups, const float* weight, float eps, float* out,
                           int64_t ld_out) {
  Launch<&cuda::GatedRmsNorm>("GatedRmsNorm", y, ld_y, z, ld_z, rows, dim, groups, weight, eps, out,
                              ld_out);
}

void CudaOps::RowSquareSums(const float* x, int64_t ld_x, int64_t rows, int64_t cols, float* sums) {
  Launch<&cuda::RowSquareSums>("RowSquareSums", x, ld_x, rows, cols, sums);
}

void CudaOps::RmsNormBySums(float* x, int64_t ld_x, int64_t rows, int64_t cols, const float* sums,
                            int64_t count, const float* weight, float eps) {
  Launch<&cuda::RmsNormBySums>("RmsNormBySums", x, ld_x, rows, cols, sums, count, weight, eps);
}

void CudaOps::Rope(float* x, int64_t ld_x, int64_t tokens, int32_t heads, int32_t head_dim,
                   int64_t start_pos, float theta) {
  Launch<&cuda::Rope>("Rope", x, ld_x, tokens, heads, head_dim, start_pos,
                      static_cast<const int64_t*>(nullptr), theta);
}

void CudaOps::RopeAt(float* x, int64_t ld_x, int64_t rows, int32_t heads, int32_t head_dim,
                     const int64_t* positions, float theta) {
  Launch<&cuda::Rope>("RopeAt", x, ld_x, rows, heads, head_dim, int64_t{0}, positions, theta);
}

void CudaOps::Activate(Activation act, float* x, int64_t ld_x, int64_t rows, int64_t cols) {
  Launch<&cuda::Activate>("Activate", act, x, ld_x, rows, cols);
}

void CudaOps::GatedActivation(Activation act, const float* gate, int64_t ld_gate, const float* up,
                              int64_t ld_up, int64_t rows, int64_t cols, float* out,
                              int64_t ld_out) {
  Launch<&cuda::GatedActivation>("GatedActivation", act, gate, ld_gate, up, ld_up, rows, cols, out,
                                 ld_out);
}

bool CudaOps::ExpertTables(const WeightMatrix* matrices, int32_t count, const void* const** weights,
                           const float* const** scales) {
  for (int32_t e = 0; e < count; ++e) {
    if (matrices[e].format != matrices[0].format) {
      Record(cudaErrorInvalidValue, "Moe: experts in different weight formats");
      return false;
    }
  }
  // A server keeps one model's few dozen layers; a process that loads model after model would
  // otherwise grow the map without end.
  constexpr size_t kMaxLayers = 4096;
  if (expert_tables_.size() >= kMaxLayers && expert_tables_.count(matrices) == 0) {
    // Queued (or recorded) kernels may still read the tables about to be freed (the wait keeps
    // any error for the pass's read-back to report).
    StopRecording();
    Record(cudaStreamSynchronize(stream_), "Moe tables");
    expert_tables_.clear();
    if (replay_ != nullptr) replay_->Clear();  // graphs' copies named the tables (see Reserve)
  }
  ExpertTable& table = expert_tables_[matrices];
  bool current = table.weights.size() == static_cast<size_t>(count);
  for (int32_t e = 0; current && e < count; ++e) {
    current = table.weights[e] == matrices[e].data && table.scales[e] == matrices[e].row_scales;
  }
  if (!current) {
    table.weights.clear();
    table.scales.clear();
    for (int32_t e = 0; e < count; ++e) {
      table.weights.push_back(matrices[e].data);
      table.scales.push_back(matrices[e].row_scales);
    }
    const size_t n = static_cast<size_t>(count);
    if (!Reserve(table.device_weights, n, "Moe tables") ||
        !Reserve(table.device_scales, n, "Moe tables")) {
      table.weights.clear();  // not current: the next call tries again
      return false;
    }
    // Ordered on the stream after any kernel still reading the previous contents.
    CopyToDevice(table.device_weights.get(), table.weights.data(), n * sizeof(const void*),
                 "Moe tables");
    CopyToDevice(table.device_scales.get(), table.scales.data(), n * sizeof(const float*),
                 "Moe tables");
  }
  *weights = table.device_weights.get();
  *scales = matrices[0].format == WeightFormat::kI8 ? table.device_scales.get() : nullptr;
  return Ok();
}

// Everything on the device, with no wait for the host: the router's top-k per token, the
// tokens bucketed by expert (moe_kernels.h), every expert's MLP over its bucket in one grouped
// launch per matrix, and the weighted sum back into token order.
void CudaOps::Moe(const MoeArgs& a, Workspace& ws) {
  const int64_t T = a.tokens, H = a.hidden, I = a.intermediate;
  const int32_t E = a.num_experts, K = a.top_k;
  const int64_t up_rows = a.gated ? 2 * I : I;
  if (!Ok() || T <= 0) return;
  const void* const* gate_up = nullptr;
  const void* const* down = nullptr;
  const float* const* gate_up_scales = nullptr;
  const float* const* down_scales = nullptr;
  if (!ExpertTables(a.gate_up, E, &gate_up, &gate_up_scales) ||
      !ExpertTables(a.down, E, &down, &down_scales)) {
    return;
  }
  float* logits = ws.Floats(T * E);
  Linear(a.router_input(), a.ld_router_input(), T, a.router, nullptr, logits, E);
  const int64_t entries = T * K;
  int32_t* chosen = ws.Array<int32_t>(entries);
  float* weights = ws.Floats(entries);
  int64_t* offsets = ws.Array<int64_t>(E + 1);
  int32_t* rows = ws.Array<int32_t>(entries);
  int32_t* position = ws.Array<int32_t>(entries);
  Launch<&cuda::MoeRoute>("Moe route", static_cast<const float*>(logits), T, E, K, a.routing,
                          chosen, weights);
  Launch<&cuda::MoeBucket>("Moe bucket", static_cast<const int32_t*>(chosen), T, E, K, offsets,
                           rows, position);
  // The bucketed rows (expert e's at [offsets[e], offsets[e+1])); an expert has at most T.
  float* xin = ws.Floats(entries * a.ld_x);
  float* gu = ws.Floats(entries * up_rows);
  float* yout = ws.Floats(entries * H);
  const WeightMatrix tokens = WeightMatrix::F32(a.x, T, a.ld_x);
  Launch<&cuda::GatherRows>("Moe gather", tokens, static_cast<const int32_t*>(rows), entries, xin,
                            a.ld_x);
  Launch<&cuda::GroupedLinear>("Moe gate_up", static_cast<const float*>(xin), a.ld_x, T,
                               static_cast<const int64_t*>(offsets), E, a.gate_up[0].format,
                               gate_up, gate_up_scales, up_rows, H, gu, up_rows,
                               batch_invariant_);
  if (a.gated) {
    GatedActivation(a.act, gu, 2 * I, gu + I, 2 * I, entries, I, gu, 2 * I);
  } else {
    Activate(a.act, gu, I, entries, I);
  }
  Launch<&cuda::GroupedLinear>("Moe down", static_cast<const float*>(gu), up_rows, T,
                               static_cast<const int64_t*>(offsets), E, a.down[0].format, down,
                               down_scales, H, I, yout, H, batch_invariant_);
  Launch<&cuda::MoeCombine>("Moe combine", static_cast<const float*>(yout), H,
                            static_cast<const int32_t*>(position),
                            static_cast<const float*>(weights), T, K, H, a.out, a.ld_out);
}

void CudaOps::CausalConv1d(const CausalConvArgs& args) {
  if (!args.snapshots.empty()) StopRecording();  // a host list, read at launch
  Launch<&cuda::CausalConv1d>("CausalConv1d", args);
}

void CudaOps::CausalConv1dStep(const CausalConvArgs& args) { CausalConv1d(args); }

void CudaOps::SelectiveScan(const SelectiveScanArgs& args) {
  if (!args.snapshots.empty()) StopRecording();  // a host list, read at launch
  Launch<&cuda::SelectiveScan>("SelectiveScan", args);
}

void CudaOps::SelectiveStateUpdate(const SelectiveScanArgs& args) { SelectiveScan(args); }

void CudaOps::SsdScan(const SsdScanArgs& args, Workspace&) {
  if (!args.snapshots.empty()) StopRecording();  // a host list, read at launch
  Launch<&cuda::SsdScan>("SsdScan", args);
}

void CudaOps::SsdStateUpdate(const SsdScanArgs& args) {
  if (!args.snapshots.empty()) StopRecording();
  Launch<&cuda::SsdScan>("SsdStateUpdate", args);
}

void CudaOps::WriteKv(const float* k, int64_t ld_k, const float* v, int64_t ld_v, int64_t tokens,
                      int64_t start_pos, const PagedKv& kv) {
  Launch<&cuda::WriteKv>("WriteKv", k, ld_k, v, ld_v, tokens, start_pos, kv);
}

void CudaOps::WriteKvAt(const float* k, int64_t ld_k, const float* v, int64_t ld_v, int64_t rows,
                        float* const* const* page_tables, const int64_t* positions,
                        const PagedKv& kv) {
  Launch<&cuda::WriteKvAt>("WriteKvAt", k, ld_k, v, ld_v, rows, page_tables, positions, kv);
}

namespace {

// Key splits of `count` with their scratch from `ws` (device memory).
cuda::KeySplits SplitsFrom(Workspace& ws, int count, int64_t rows, int32_t heads,
                           int32_t head_dim) {
  cuda::KeySplits splits;
  splits.count = count;
  if (count > 1) {
    splits.out = ws.Floats(cuda::KeySplits::OutFloats(count, rows, heads, head_dim));
    splits.lse = ws.Floats(cuda::KeySplits::LseFloats(count, rows, heads));
  }
  return splits;
}

}  // namespace

void CudaOps::Attention(const AttentionArgs& a, Workspace& ws) {
  if (a.page_tables != nullptr && batch_invariant_) {
    // A decode batch goes as sequences of one row each, so that its rows take the kernel a
    // prefill's rows take (cuda::AttentionKernels::kSameForEveryRow).
    AttentionArgs rows = a;
    if (rows.cu_seqlens == nullptr && rows.tokens > 0) {
      const size_t count = static_cast<size_t>(rows.tokens) + 1;
      if (one_row_each_.size() < count) {
        const char* op = "Attention (one row each)";
        std::vector<int64_t> iota(std::max<size_t>(count, 256));
        for (size_t i = 0; i < iota.size(); ++i) iota[i] = static_cast<int64_t>(i);
        if (!Reserve(one_row_each_, iota.size(), op)) return;  // stops any recording first
        // On the stream, so that the attention launched next reads it written.
        CopyToDevice(one_row_each_.get(), iota.data(), iota.size() * sizeof(int64_t), op);
        if (!Ok()) return;
      }
      rows.sequences = rows.tokens;
      rows.cu_seqlens = one_row_each_.get();
      rows.max_seqlen = 1;
    }
    Launch<&cuda::DecodeAttention>("Attention (rows with tables)", rows, cuda::KeySplits{},
                                   tensor_core_precision(),
                                   cuda::AttentionKernels::kSameForEveryRow);
    return;
  }
  if (a.page_tables != nullptr) {
    const cuda::KeySplits splits = SplitsFrom(ws, cuda::DecodeAttentionSplits(a, multiprocessors_),
                                              a.tokens, a.heads, a.kv.head_dim);
    Launch<&cuda::DecodeAttention>("Attention (rows with tables)", a, splits,
                                   tensor_core_precision(), cuda::AttentionKernels::kFastest);
    return;
  }
  PartialAttentionArgs p;
  p.rows = a.tokens;
  p.start_pos = a.start_pos;
  p.causal = true;
  p.heads = a.heads;
  p.q = a.q;
  p.ld_q = a.ld_q;
  p.kv = a.kv;
  p.key_begin = 0;
  p.key_end = a.start_pos + a.tokens;
  p.scale = a.scale;
  p.out = a.out;
  p.ld_out = a.ld_out;
  PartialAttention(p, ws);
}

void CudaOps::PartialAttention(const PartialAttentionArgs& args, Workspace& ws) {
  if (batch_invariant_) {
    Launch<&cuda::PartialAttention>("PartialAttention", args, cuda::KeySplits{},
                                    tensor_core_precision(),
                                    cuda::AttentionKernels::kSameForEveryRow);
    return;
  }
  const cuda::KeySplits splits =
      SplitsFrom(ws, cuda::PartialAttentionSplits(args, multiprocessors_), args.rows, args.heads,
                 args.kv.head_dim);
  Launch<&cuda::PartialAttention>("PartialAttention", args, splits, tensor_core_precision(),
                                  cuda::AttentionKernels::kFastest);
}

// The contract is PartialAttention's without a mask; every row reads the same pages. (Batching
// the rows into one matrix-matrix product per KV head, as on the CPU, is still to come.)
void CudaOps::SharedPrefixAttention(const SharedPrefixAttentionArgs& a, Workspace& ws) {
  PartialAttentionArgs p;
  p.rows = a.rows;
  p.start_pos = a.key_end;
  p.causal = false;
  p.heads = a.heads;
  p.q = a.q;
  p.ld_q = a.ld_q;
  p.kv = a.kv;
  p.key_begin = a.key_begin;
  p.key_end = a.key_end;
  p.scale = a.scale;
  p.out = a.out;
  p.ld_out = a.ld_out;
  p.lse = a.lse;
  p.ld_lse = a.ld_lse;
  PartialAttention(p, ws);
}

void CudaOps::MergeAttention(std::span<const AttentionPart> parts, int64_t rows, int32_t heads,
                             int32_t head_dim, float* out, int64_t ld_out, float* lse,
                             int64_t ld_lse) {
  if (parts.size() > kMaxParts) {
    Record(cudaErrorInvalidValue, "MergeAttention: more parts than kMaxParts");
    return;
  }
  PartList list;
  std::copy(parts.begin(), parts.end(), list.parts.begin());
  list.count = parts.size();
  Launch<&MergeParts>("MergeAttention", list, rows, heads, head_dim, out, ld_out, lse, ld_lse);
}

}  // namespace tandem::kernels::cuda
