// The reference backend: plain single-threaded loops that follow the formulas of ops.h literally
// (sequential recurrences, explicit softmax, double accumulation for dot products). It is the
// oracle for every fast backend's tests; speed is no goal.
#ifndef TANDEM_KERNELS_REFERENCE_REFERENCE_OPS_H_
#define TANDEM_KERNELS_REFERENCE_REFERENCE_OPS_H_

#include "kernels/ops.h"

namespace tandem::kernels {

class ReferenceOps : public Ops {
 public:
  std::string_view name() const override { return "reference"; }

  void Linear(const float* x, int64_t ld_x, int64_t m, const WeightMatrix& w, const float* bias,
              float* y, int64_t ld_y) override;
  void GatherRows(const WeightMatrix& table, std::span<const int32_t> ids, float* out,
                  int64_t ld_out) override;
  void CopyRows(const float* src, int64_t ld_src, int64_t rows, int64_t cols, float* dst,
                int64_t ld_dst) override;
  void ScaleRows(float* x, int64_t ld_x, int64_t rows, int64_t cols, float factor) override;
  void DivideRows(float* x, int64_t ld_x, int64_t rows, int64_t cols, float divisor) override;
  void AddRows(const float* src, int64_t ld_src, int64_t rows, int64_t cols, float* dst,
               int64_t ld_dst) override;
  void RmsNorm(const float* x, int64_t ld_x, int64_t rows, int64_t dim, const float* weight,
               float eps, float* out, int64_t ld_out) override;
  void GatedRmsNorm(const float* y, int64_t ld_y, const float* z, int64_t ld_z, int64_t rows,
                    int64_t dim, int32_t groups, const float* weight, float eps, float* out,
                    int64_t ld_out) override;
  void Rope(float* x, int64_t ld_x, int64_t tokens, int32_t heads, int32_t head_dim,
            int64_t start_pos, float theta) override;
  void Activate(Activation act, float* x, int64_t ld_x, int64_t rows, int64_t cols) override;
  void GatedActivation(Activation act, const float* gate, int64_t ld_gate, const float* up,
                       int64_t ld_up, int64_t rows, int64_t cols, float* out,
                       int64_t ld_out) override;
  void GatedMlp(Activation act, const float* x, int64_t ld_x, int64_t rows,
                const WeightMatrix& gate_up, const WeightMatrix& down, float* out, int64_t ld_out,
                Workspace& ws) override;
  void Moe(const MoeArgs& args, Workspace& ws) override;
  void CausalConv1d(const CausalConvArgs& args) override;
  void CausalConv1dStep(const CausalConvArgs& args) override;
  void SelectiveScan(const SelectiveScanArgs& args) override;
  void SelectiveStateUpdate(const SelectiveScanArgs& args) override;
  void SsdScan(const SsdScanArgs& args, Workspace& ws) override;
  void SsdStateUpdate(const SsdScanArgs& args) override;
  void WriteKv(const float* k, int64_t ld_k, const float* v, int64_t ld_v, int64_t tokens,
               int64_t start_pos, const PagedKv& kv) override;
  void Attention(const AttentionArgs& args, Workspace& ws) override;
  void PartialAttention(const PartialAttentionArgs& args, Workspace& ws) override;
  void SharedPrefixAttention(const SharedPrefixAttentionArgs& args, Workspace& ws) override;
  void MergeAttention(std::span<const AttentionPart> parts, int64_t rows, int32_t heads,
                      int32_t head_dim, float* out, int64_t ld_out, float* lse,
                      int64_t ld_lse) override;
};

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_REFERENCE_REFERENCE_OPS_H_
