// An Ops decorator for tests that signs every op call as the CUDA backend does when it records
// a pass for CUDA graphs (kernels/cuda/cuda_ops.h), over any backend: so the CPU can check
// that the layer graphs and the engine make the same calls from one decode step to the next,
// which is what lets a GPU replay them.
#ifndef TANDEM_TESTS_KERNELS_SIGNING_OPS_H_
#define TANDEM_TESTS_KERNELS_SIGNING_OPS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernels/launch_signature.h"
#include "kernels/ops.h"

namespace tandem::kernels::testing {

// Forwards every op to `inner` and signs it: its name, every pointer and size it is given, and
// for host lists (ids, row indices: uploaded by a device) only their length, as CudaOps does.
// The ops a device overrides (RopeAt, WriteKvAt, GatherRowsAt, ScatterRowsTo) are signed as
// calls too, not as the per-run calls Ops' host defaults would make.
class SigningOps final : public Ops {
 public:
  explicit SigningOps(Ops& inner) : inner_(inner) {}
  // Owning `inner`: a device's backend, as ComputeDevice::CreateOps hands it out.
  explicit SigningOps(std::unique_ptr<Ops> inner) : owned_(std::move(inner)), inner_(*owned_) {}
  const LaunchSignature& signature() const { return signature_; }
  void Clear() {
    signature_.Clear();
    calls_.clear();
  }
  // The call whose signed bytes hold byte `at` (to name what differs between two passes).
  std::string CallAt(size_t at) const {
    std::string name = "(none)";
    for (const auto& [offset, op] : calls_) {
      if (offset <= at) {
        name = std::string(op) + " #" + std::to_string(&op - &calls_[0].second) + ", byte " +
               std::to_string(at - offset) + " of its signature";
      }
    }
    return name;
  }

  std::string_view name() const override { return "signing"; }
  // Passes end at their read-back, as on a device: a pass whose signature an earlier one had
  // would be replayed from that one's graph (the earlier one's capture aside).
  int64_t passes() const { return passes_; }
  int64_t repeated_passes() const { return repeated_; }

  MemorySource& activation_memory() override { return inner_.activation_memory(); }
  std::string ReadBack(const float* src, size_t count, float* dst) override {
    EndPass();
    return inner_.ReadBack(src, count, dst);
  }
  std::string ReadBackArgmax(const float* src, int64_t ld_src, int64_t rows, int64_t cols,
                             int32_t* out) override {
    EndPass();
    return inner_.ReadBackArgmax(src, ld_src, rows, cols, out);
  }
  std::string ReadBackSampled(const float* src, int64_t ld_src, int64_t cols,
                              std::span<const SamplingRow> rules,
                              std::span<const PenaltyToken> seen, SampledToken* out) override {
    EndPass();
    return inner_.ReadBackSampled(src, ld_src, cols, rules, seen, out);
  }
  void Linear(const float* x, int64_t ld_x, int64_t m, const WeightMatrix& w,
              const float* bias, float* y, int64_t ld_y) override {
    Sign("Linear", x, ld_x, m, w, bias, y, ld_y);
    inner_.Linear(x, ld_x, m, w, bias, y, ld_y);
  }
  void GatherRows(const WeightMatrix& table, std::span<const int32_t> ids, float* out,
                  int64_t ld_out) override {
    Sign("GatherRows", table, ids.size(), out, ld_out);
    inner_.GatherRows(table, ids, out, ld_out);
  }
  void CopyRows(const float* src, int64_t ld_src, int64_t rows, int64_t cols, float* dst,
                int64_t ld_dst) override {
    Sign("CopyRows", src, ld_src, rows, cols, dst, ld_dst);
    inner_.CopyRows(src, ld_src, rows, cols, dst, ld_dst);
  }
  void Activate(Activation act, float* x, int64_t ld_x, int64_t rows, int64_t cols) override {
    Sign("Activate", act, x, ld_x, rows, cols);
    inner_.Activate(act, x, ld_x, rows, cols);
  }
  void ScaleRows(float* x, int64_t ld_x, int64_t rows, int64_t cols, float factor) override {
    Sign("ScaleRows", x, ld_x, rows, cols, factor);
    inner_.ScaleRows(x, ld_x, rows, cols, factor);
  }
  void DivideRows(float* x, int64_t ld_x, int64_t rows, int64_t cols, float divisor) override {
    Sign("DivideRows", x, ld_x, rows, cols, divisor);
    inner_.DivideRows(x, ld_x, rows, cols, divisor);
  }
  void AddRows(const float* src, int64_t ld_src, int64_t rows, int64_t cols, float* dst,
               int64_t ld_dst) override {
    Sign("AddRows", src, ld_src, rows, cols, dst, ld_dst);
    inner_.AddRows(src, ld_src, rows, cols, dst, ld_dst);
  }
  void GatherRowsAt(const float* src, int64_t ld_src, std::span<const int32_t> rows, int64_t cols,
                    float* dst, int64_t ld_dst) override {
    Sign("GatherRowsAt", src, ld_src, rows.size(), cols, dst, ld_dst);
    inner_.GatherRowsAt(src, ld_src, rows, cols, dst, ld_dst);
  }
  void ScatterRowsTo(const float* src, int64_t ld_src, std::span<const int32_t> rows,
                     int64_t cols, float* dst, int64_t ld_dst) override {
    Sign("ScatterRowsTo", src, ld_src, rows.size(), cols, dst, ld_dst);
    inner_.ScatterRowsTo(src, ld_src, rows, cols, dst, ld_dst);
  }
  // As a device does it: the table copied into `ws`, where its address depends on the pass's
  // allocations alone (the CPU backend hands back the host array itself, whose address moves
  // as host vectors grow; a device never sees that address).
  const void* TableBytes(const void* host, size_t bytes, Workspace& ws) override {
    Sign("TableBytes", bytes);
    auto* copy = ws.Array<std::byte>(std::max<size_t>(bytes, 1));
    if (bytes > 0) std::memcpy(copy, host, bytes);
    return copy;
  }
  void UploadTables(void* device, const void* host, size_t bytes) override {
    Sign("UploadTables", device, bytes);
    inner_.UploadTables(device, host, bytes);
  }
  void RmsNorm(const float* x, int64_t ld_x, int64_t rows, int64_t dim, const float* weight,
               float eps, float* out, int64_t ld_out) override {
    Sign("RmsNorm", x, ld_x, rows, dim, weight, eps, out, ld_out);
    inner_.RmsNorm(x, ld_x, rows, dim, weight, eps, out, ld_out);
  }
  void GatedRmsNorm(const float* y, int64_t ld_y, const float* z, int64_t ld_z, int64_t rows,
                    int64_t dim, int32_t groups, const float* weight, float eps, float* out,
                    int64_t ld_out) override {
    Sign("GatedRmsNorm", y, ld_y, z, ld_z, rows, dim, groups, weight, eps, out, ld_out);
    inner_.GatedRmsNorm(y, ld_y, z, ld_z, rows, dim, groups, weight, eps, out, ld_out);
  }
  void RowSquareSums(const float* x, int64_t ld_x, int64_t rows, int64_t cols,
                     float* sums) override {
    Sign("RowSquareSums", x, ld_x, rows, cols, sums);
    inner_.RowSquareSums(x, ld_x, rows, cols, sums);
  }
  void RmsNormBySums(float* x, int64_t ld_x, int64_t rows, int64_t cols, const float* sums,
                     int64_t count, const float* weight, float eps) override {
    Sign("RmsNormBySums", x, ld_x, rows, cols, sums, count, weight, eps);
    inner_.RmsNormBySums(x, ld_x, rows, cols, sums, count, weight, eps);
  }
  void Rope(float* x, int64_t ld_x, int64_t tokens, int32_t heads, int32_t head_dim,
            int64_t start_pos, float theta) override {
    Sign("Rope", x, ld_x, tokens, heads, head_dim, start_pos, theta);
    inner_.Rope(x, ld_x, tokens, heads, head_dim, start_pos, theta);
  }
  void RopeAt(float* x, int64_t ld_x, int64_t rows, int32_t heads, int32_t head_dim,
              const int64_t* positions, float theta) override {
    Sign("RopeAt", x, ld_x, rows, heads, head_dim, positions, theta);
    inner_.RopeAt(x, ld_x, rows, heads, head_dim, positions, theta);
  }
  void GatedActivation(Activation act, const float* gate, int64_t ld_gate,
                       const float* up, int64_t ld_up, int64_t rows, int64_t cols, float* out,
                       int64_t ld_out) override {
    Sign("GatedActivation", act, gate, ld_gate, up, ld_up, rows, cols, out, ld_out);
    inner_.GatedActivation(act, gate, ld_gate, up, ld_up, rows, cols, out, ld_out);
  }
  void Moe(const MoeArgs& a, Workspace& ws) override {
    const MoeRouting& r = a.routing;
    Sign("Moe", a.tokens, a.hidden, a.intermediate, a.num_experts, a.top_k, r.score, r.renormalize,
         r.bias, r.groups, r.top_groups, r.scale, a.gated, a.act, a.x, a.ld_x, a.route_x,
         a.ld_route_x, a.router, a.gate_up, a.down, a.out, a.ld_out);
    inner_.Moe(a, ws);
  }
  void CausalConv1d(const CausalConvArgs& args) override {
    Sign("CausalConv1d", args);
    inner_.CausalConv1d(args);
  }
  void CausalConv1dStep(const CausalConvArgs& args) override {
    Sign("CausalConv1dStep", args);
    inner_.CausalConv1dStep(args);
  }
  void SelectiveScan(const SelectiveScanArgs& args) override {
    Sign("SelectiveScan", args);
    inner_.SelectiveScan(args);
  }
  void SelectiveStateUpdate(const SelectiveScanArgs& args) override {
    Sign("SelectiveStateUpdate", args);
    inner_.SelectiveStateUpdate(args);
  }
  void SsdScan(const SsdScanArgs& args, Workspace& ws) override {
    Sign("SsdScan", args);
    inner_.SsdScan(args, ws);
  }
  void SsdStateUpdate(const SsdScanArgs& args) override {
    Sign("SsdStateUpdate", args);
    inner_.SsdStateUpdate(args);
  }
  void WriteKv(const float* k, int64_t ld_k, const float* v, int64_t ld_v, int64_t tokens,
               int64_t start_pos, const PagedKv& kv) override {
    Sign("WriteKv", k, ld_k, v, ld_v, tokens, start_pos, kv);
    inner_.WriteKv(k, ld_k, v, ld_v, tokens, start_pos, kv);
  }
  void WriteKvAt(const float* k, int64_t ld_k, const float* v, int64_t ld_v, int64_t rows,
                 float* const* const* page_tables, const int64_t* positions,
                 const PagedKv& kv) override {
    Sign("WriteKvAt", k, ld_k, v, ld_v, rows, page_tables, positions, kv);
    inner_.WriteKvAt(k, ld_k, v, ld_v, rows, page_tables, positions, kv);
  }
  void Attention(const AttentionArgs& args, Workspace& ws) override {
    Sign("Attention", args);
    inner_.Attention(args, ws);
  }
  void PartialAttention(const PartialAttentionArgs& args,
                        Workspace& ws) override {
    Sign("PartialAttention", args);
    inner_.PartialAttention(args, ws);
  }
  void SharedPrefixAttention(const SharedPrefixAttentionArgs& a,
                             Workspace& ws) override {
    Sign("SharedPrefixAttention", a.rows, a.heads, a.q, a.ld_q, a.kv, a.key_begin, a.key_end,
         a.scale, a.out, a.ld_out, a.lse, a.ld_lse);
    inner_.SharedPrefixAttention(a, ws);
  }
  void MergeAttention(std::span<const AttentionPart> parts, int64_t rows, int32_t heads,
                      int32_t head_dim, float* out, int64_t ld_out, float* lse,
                      int64_t ld_lse) override {
    Sign("MergeAttention", parts.size(), rows, heads, head_dim, out, ld_out, lse, ld_lse);
    for (const AttentionPart& part : parts) signature_.Add(part);
    inner_.MergeAttention(parts, rows, heads, head_dim, out, ld_out, lse, ld_lse);
  }
  bool ResumesAttentionExactly() const override { return inner_.ResumesAttentionExactly(); }
  void AdvanceSharedAttention(const SharedPrefixAttentionArgs& a, const AttentionState& state,
                              bool start, Workspace& ws) override {
    Sign("AdvanceSharedAttention", a.rows, a.heads, a.q, a.ld_q, a.kv, a.key_begin, a.key_end,
         a.scale, state.acc, state.ld_acc, state.max, state.sum, state.ld, start);
    inner_.AdvanceSharedAttention(a, state, start, ws);
  }
  void FinishAttention(const PartialAttentionArgs& args, const AttentionState& state,
                       Workspace& ws) override {
    Sign("FinishAttention", args, state.acc, state.ld_acc, state.max, state.sum, state.ld);
    inner_.FinishAttention(args, state, ws);
  }

 private:
  template <typename... Args>
  void Sign(const char* op, const Args&... args) {
    calls_.emplace_back(signature_.bytes().size(), op);
    signature_.Add(static_cast<const void*>(op));
    (signature_.Add(args), ...);
  }

  void EndPass() {
    if (!signature_.empty()) {
      ++passes_;
      const std::span<const std::byte> bytes = signature_.bytes();
      if (!seen_.emplace(bytes.begin(), bytes.end()).second) ++repeated_;
    }
    Clear();
  }

  std::unique_ptr<Ops> owned_;
  Ops& inner_;
  LaunchSignature signature_;
  std::set<std::vector<std::byte>> seen_;
  int64_t passes_ = 0;
  int64_t repeated_ = 0;
  std::vector<std::pair<size_t, const char*>> calls_;  // where each call's bytes start
};

}  // namespace tandem::kernels::testing

#endif  // TANDEM_TESTS_KERNELS_SIGNING_OPS_H_
