// A ComputeDevice whose "device memory" is host memory kept apart, so that every path the engine
// takes for a GPU (weights through a placer, activations and logits in the backend's memory,
// logits read back, state copied and cleared by its memory's owner) runs, and is counted, on a
// machine without one. The compute is the CPU backend's, so results must equal the CPU's bit
// for bit.
#ifndef TANDEM_TESTS_ENGINE_HOST_DEVICE_H_
#define TANDEM_TESTS_ENGINE_HOST_DEVICE_H_

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "cache/memory_backing.h"
#include "engine/compute_device.h"
#include "kernels/argmax.h"
#include "kernels/backends.h"
#include "kernels/ops.h"
#include "tests/cache/host_backing_for_tests.h"

namespace tandem::engine::testing {

// What the engine asked of the "device".
struct HostDeviceCounts {
  std::atomic<int64_t> placed_tensors{0};
  std::atomic<int64_t> activation_blocks{0};  // MemorySource::Allocate calls
  std::atomic<int64_t> read_backs{0};  // ReadBack, ReadBackArgmax and ReadBackSampled calls
  std::atomic<int64_t> read_back_floats{0};  // logits floats copied back
  std::atomic<int64_t> argmax_rows{0};  // rows whose argmax alone was copied back
  std::atomic<int64_t> sampled_rows{0};  // rows sampled on the "device", their token copied back
  std::atomic<int64_t> state_copies{0};
  std::atomic<int64_t> state_clears{0};
  // Calls of the per-sequence ops (conv, scans, RoPE, KV writes, attention) made by the model:
  // on a GPU, a kernel launch each.
  std::atomic<int64_t> sequence_op_calls{0};
  // Ops::Table and Ops::UploadTables calls: on a GPU, host-to-device copies.
  std::atomic<int64_t> table_uploads{0};
  std::atomic<int> fail_read_backs{0};  // the next N ReadBack calls report a failed op
  std::atomic<bool> activations_full{false};  // activation blocks cannot be had
};

class CountingHostMemory final : public kernels::MemorySource {
 public:
  explicit CountingHostMemory(HostDeviceCounts* counts) : counts_(counts) {}
  void* Allocate(size_t bytes) override {
    if (counts_->activations_full) return nullptr;
    ++counts_->activation_blocks;
    return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  }
  void Release(void* p) override { std::free(p); }

 private:
  HostDeviceCounts* counts_;
};

// The CPU backend with its operands in CountingHostMemory: every op forwards.
class SeparateMemoryOps final : public kernels::Ops {
 public:
  SeparateMemoryOps(std::unique_ptr<kernels::Ops> inner, HostDeviceCounts* counts)
      : inner_(std::move(inner)), memory_(counts), counts_(counts) {}
  std::string_view name() const override { return "host-device"; }
  kernels::MemorySource& activation_memory() override { return memory_; }
  std::string ReadBack(const float* src, size_t count, float* dst) override {
    ++counts_->read_backs;
    if (counts_->fail_read_backs > 0) {
      --counts_->fail_read_backs;
      return "injected failure";
    }
    counts_->read_back_floats += static_cast<int64_t>(count);
    if (count > 0) std::memcpy(dst, src, count * sizeof(float));
    return "";
  }
  std::string ReadBackArgmax(const float* src, int64_t ld_src, int64_t rows, int64_t cols,
                             int32_t* out) override {
    const std::string failure = ReadBack(src, 0, nullptr);
    if (!failure.empty()) return failure;
    counts_->argmax_rows += rows;
    for (int64_t r = 0; r < rows; ++r) out[r] = kernels::ArgmaxRow(src + r * ld_src, cols);
    return "";
  }
  std::string ReadBackSampled(const float* src, int64_t ld_src, int64_t cols,
                              std::span<const kernels::SamplingRow> rules,
                              std::span<const kernels::PenaltyToken> seen,
                              kernels::SampledToken* out) override {
    counts_->sampled_rows += static_cast<int64_t>(rules.size());
    return Ops::ReadBackSampled(src, ld_src, cols, rules, seen, out);  // counts its ReadBack
  }

  void Linear(const float* x, int64_t ld_x, int64_t m, const kernels::WeightMatrix& w,
              const float* bias, float* y, int64_t ld_y) override {
    inner_->Linear(x, ld_x, m, w, bias, y, ld_y);
  }
  void GatherRows(const kernels::WeightMatrix& table, std::span<const int32_t> ids, float* out,
                  int64_t ld_out) override {
    inner_->GatherRows(table, ids, out, ld_out);
  }
  void CopyRows(const float* src, int64_t ld_src, int64_t rows, int64_t cols, float* dst,
                int64_t ld_dst) override {
    inner_->CopyRows(src, ld_src, rows, cols, dst, ld_dst);
  }
  void Activate(kernels::Activation act, float* x, int64_t ld_x, int64_t rows,
                int64_t cols) override {
    inner_->Activate(act, x, ld_x, rows, cols);
  }
  void ScaleRows(float* x, int64_t ld_x, int64_t rows, int64_t cols, float factor) override {
    inner_->ScaleRows(x, ld_x, rows, cols, factor);
  }
  void DivideRows(float* x, int64_t ld_x, int64_t rows, int64_t cols, float divisor) override {
    inner_->DivideRows(x, ld_x, rows, cols, divisor);
  }
  void AddRows(const float* src, int64_t ld_src, int64_t rows, int64_t cols, float* dst,
               int64_t ld_dst) override {
    inner_->AddRows(src, ld_src, rows, cols, dst, ld_dst);
  }
  void UploadTables(void* device, const void* host, size_t bytes) override {
    ++counts_->table_uploads;  // a device copies the tables into its memory; so does this one
    if (bytes > 0) std::memcpy(device, host, bytes);
  }
  const void* TableBytes(const void* host, size_t bytes, kernels::Workspace& ws) override {
    // A device copies the table into its memory; so does this one.
    ++counts_->table_uploads;
    void* table = ws.Array<std::byte>(bytes);
    if (bytes > 0) std::memcpy(table, host, bytes);
    return table;
  }
  void RmsNorm(const float* x, int64_t ld_x, int64_t rows, int64_t dim, const float* weight,
               float eps, float* out, int64_t ld_out) override {
    inner_->RmsNorm(x, ld_x, rows, dim, weight, eps, out, ld_out);
  }
  void GatedRmsNorm(const float* y, int64_t ld_y, const float* z, int64_t ld_z, int64_t rows,
                    int64_t dim, int32_t groups, const float* weight, float eps, float* out,
                    int64_t ld_out) override {
    inner_->GatedRmsNorm(y, ld_y, z, ld_z, rows, dim, groups, weight, eps, out, ld_out);
  }
  void RowSquareSums(const float* x, int64_t ld_x, int64_t rows, int64_t cols,
                     float* sums) override {
    inner_->RowSquareSums(x, ld_x, rows, cols, sums);
  }
  void RmsNormBySums(float* x, int64_t ld_x, int64_t rows, int64_t cols, const float* sums,
                     int64_t count, const float* weight, float eps) override {
    inner_->RmsNormBySums(x, ld_x, rows, cols, sums, count, weight, eps);
  }
  void Rope(float* x, int64_t ld_x, int64_t tokens, int32_t heads, int32_t head_dim,
            int64_t start_pos, float theta) override {
    ++counts_->sequence_op_calls;
    inner_->Rope(x, ld_x, tokens, heads, head_dim, start_pos, theta);
  }
  void RopeAt(float* x, int64_t ld_x, int64_t rows, int32_t heads, int32_t head_dim,
              const int64_t* positions, float theta) override {
    ++counts_->sequence_op_calls;
    inner_->RopeAt(x, ld_x, rows, heads, head_dim, positions, theta);
  }
  void GatedActivation(kernels::Activation act, const float* gate, int64_t ld_gate,
                       const float* up, int64_t ld_up, int64_t rows, int64_t cols, float* out,
                       int64_t ld_out) override {
    inner_->GatedActivation(act, gate, ld_gate, up, ld_up, rows, cols, out, ld_out);
  }
  void GatedMlp(kernels::Activation act, const float* x, int64_t ld_x, int64_t rows,
                const kernels::WeightMatrix& gate_up, const kernels::WeightMatrix& down,
                float* out, int64_t ld_out, kernels::Workspace& ws) override {
    inner_->GatedMlp(act, x, ld_x, rows, gate_up, down, out, ld_out, ws);
  }
  void Moe(const kernels::MoeArgs& args, kernels::Workspace& ws) override {
    inner_->Moe(args, ws);
  }
  void CausalConv1d(const kernels::CausalConvArgs& args) override {
    ++counts_->sequence_op_calls;
    inner_->CausalConv1d(args);
  }
  void CausalConv1dStep(const kernels::CausalConvArgs& args) override {
    ++counts_->sequence_op_calls;
    inner_->CausalConv1dStep(args);
  }
  void SelectiveScan(const kernels::SelectiveScanArgs& args) override {
    ++counts_->sequence_op_calls;
    inner_->SelectiveScan(args);
  }
  void SelectiveStateUpdate(const kernels::SelectiveScanArgs& args) override {
    ++counts_->sequence_op_calls;
    inner_->SelectiveStateUpdate(args);
  }
  void SsdScan(const kernels::SsdScanArgs& args, kernels::Workspace& ws) override {
    ++counts_->sequence_op_calls;
    inner_->SsdScan(args, ws);
  }
  void SsdStateUpdate(const kernels::SsdScanArgs& args) override {
    ++counts_->sequence_op_calls;
    inner_->SsdStateUpdate(args);
  }
  void WriteKv(const float* k, int64_t ld_k, const float* v, int64_t ld_v, int64_t tokens,
               int64_t start_pos, const kernels::PagedKv& kv) override {
    ++counts_->sequence_op_calls;
    inner_->WriteKv(k, ld_k, v, ld_v, tokens, start_pos, kv);
  }
  void WriteKvAt(const float* k, int64_t ld_k, const float* v, int64_t ld_v, int64_t rows,
                 float* const* const* page_tables, const int64_t* positions,
                 const kernels::PagedKv& kv) override {
    ++counts_->sequence_op_calls;
    inner_->WriteKvAt(k, ld_k, v, ld_v, rows, page_tables, positions, kv);
  }
  void Attention(const kernels::AttentionArgs& args, kernels::Workspace& ws) override {
    ++counts_->sequence_op_calls;
    inner_->Attention(args, ws);
  }
  void PartialAttention(const kernels::PartialAttentionArgs& args,
                        kernels::Workspace& ws) override {
    inner_->PartialAttention(args, ws);
  }
  void SharedPrefixAttention(const kernels::SharedPrefixAttentionArgs& args,
                             kernels::Workspace& ws) override {
    inner_->SharedPrefixAttention(args, ws);
  }
  void MergeAttention(std::span<const kernels::AttentionPart> parts, int64_t rows, int32_t heads,
                      int32_t head_dim, float* out, int64_t ld_out, float* lse,
                      int64_t ld_lse) override {
    inner_->MergeAttention(parts, rows, heads, head_dim, out, ld_out, lse, ld_lse);
  }
  bool ResumesAttentionExactly() const override { return inner_->ResumesAttentionExactly(); }
  void AdvanceSharedAttention(const kernels::SharedPrefixAttentionArgs& args,
                              const kernels::AttentionState& state, bool start,
                              kernels::Workspace& ws) override {
    inner_->AdvanceSharedAttention(args, state, start, ws);
  }
  void FinishAttention(const kernels::PartialAttentionArgs& args,
                       const kernels::AttentionState& state, kernels::Workspace& ws) override {
    inner_->FinishAttention(args, state, ws);
  }

 private:
  std::unique_ptr<kernels::Ops> inner_;
  CountingHostMemory memory_;
  HostDeviceCounts* counts_;
};

// Host memory whose copies and clears are counted.
class CountingStateBacking final : public cache::testing::HostBackingForTests {
 public:
  CountingStateBacking(size_t bytes, HostDeviceCounts* counts)
      : HostBackingForTests(bytes), counts_(counts) {}
  absl::Status CopyBytes(std::byte* dst, const std::byte* src, size_t bytes) override {
    ++counts_->state_copies;
    return HostBackingForTests::CopyBytes(dst, src, bytes);
  }
  absl::Status ZeroBytes(std::byte* dst, size_t bytes) override {
    ++counts_->state_clears;
    return HostBackingForTests::ZeroBytes(dst, bytes);
  }

 private:
  HostDeviceCounts* counts_;
};

// Weights copied into memory the placer owns.
class CopyingPlacer final : public models::TensorPlacer {
 public:
  explicit CopyingPlacer(HostDeviceCounts* counts) : counts_(counts) {}
  absl::StatusOr<const void*> Place(const void* host, size_t bytes) override {
    ++counts_->placed_tensors;
    copies_.emplace_back(bytes);
    if (bytes > 0) std::memcpy(copies_.back().data(), host, bytes);
    return static_cast<const void*>(copies_.back().data());
  }

 private:
  HostDeviceCounts* counts_;
  std::deque<std::vector<std::byte>> copies_;
};

class HostDevice final : public ComputeDevice {
 public:
  std::string name() const override { return "host-device"; }
  bool on_host() const override { return false; }
  models::TensorPlacer* weight_placer() override { return &placer_; }
  absl::StatusOr<std::unique_ptr<kernels::Ops>> CreateOps(const ComputeOptions& options) override {
    return std::unique_ptr<kernels::Ops>(new SeparateMemoryOps(
        kernels::MakeCpuOps(options.threads, options.batch_invariant), &counts));
  }
  absl::StatusOr<std::unique_ptr<cache::MemoryBacking>> CreateStateBacking(
      size_t bytes) override {
    return std::unique_ptr<cache::MemoryBacking>(new CountingStateBacking(bytes, &counts));
  }

  HostDeviceCounts counts;

 private:
  CopyingPlacer placer_{&counts};
};

}  // namespace tandem::engine::testing

#endif  // TANDEM_TESTS_ENGINE_HOST_DEVICE_H_
