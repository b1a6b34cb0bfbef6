#include "kernels/cpu/cpu_ops.h"

namespace tandem::kernels {

CpuOps::CpuOps(int threads) : pool_(threads) {}

void CpuOps::Linear(const float* x, int64_t ld_x, int64_t m, int64_t k, const float* w,
                    const float* bias, int64_t n, float* y, int64_t ld_y) {
  ref_.Linear(x, ld_x, m, k, w, bias, n, y, ld_y);
}
void CpuOps::RmsNorm(const float* x, int64_t ld_x, int64_t rows, int64_t dim, const float* weight,
                     float eps, float* out, int64_t ld_out) {
  ref_.RmsNorm(x, ld_x, rows, dim, weight, eps, out, ld_out);
}
void CpuOps::GatedRmsNorm(const float* y, int64_t ld_y, const float* z, int64_t ld_z,
                          int64_t rows, int64_t dim, int32_t groups, const float* weight,
                          float eps, float* out, int64_t ld_out) {
  ref_.GatedRmsNorm(y, ld_y, z, ld_z, rows, dim, groups, weight, eps, out, ld_out);
}
void CpuOps::Rope(float* x, int64_t ld_x, int64_t tokens, int32_t heads, int32_t head_dim,
                  int64_t start_pos, float theta) {
  ref_.Rope(x, ld_x, tokens, heads, head_dim, start_pos, theta);
}
void CpuOps::GatedActivation(Activation act, const float* gate, int64_t ld_gate, const float* up,
                             int64_t ld_up, int64_t rows, int64_t cols, float* out,
                             int64_t ld_out) {
  ref_.GatedActivation(act, gate, ld_gate, up, ld_up, rows, cols, out, ld_out);
}
void CpuOps::GatedMlp(Activation act, const float* x, int64_t ld_x, int64_t rows, int64_t hidden,
                      int64_t intermediate, const float* gate_up, const float* down, float* out,
                      int64_t ld_out, Workspace& ws) {
  ref_.GatedMlp(act, x, ld_x, rows, hidden, intermediate, gate_up, down, out, ld_out, ws);
}
void CpuOps::Moe(const MoeArgs& args, Workspace& ws) { ref_.Moe(args, ws); }
void CpuOps::CausalConv1d(const CausalConvArgs& args) { ref_.CausalConv1d(args); }
void CpuOps::CausalConv1dStep(const CausalConvArgs& args) { ref_.CausalConv1dStep(args); }
void CpuOps::SelectiveScan(const SelectiveScanArgs& args) { ref_.SelectiveScan(args); }
void CpuOps::SelectiveStateUpdate(const SelectiveScanArgs& args) {
  ref_.SelectiveStateUpdate(args);
}
void CpuOps::SsdScan(const SsdScanArgs& args, Workspace& ws) { ref_.SsdScan(args, ws); }
void CpuOps::SsdStateUpdate(const SsdScanArgs& args) { ref_.SsdStateUpdate(args); }
void CpuOps::WriteKv(const float* k, int64_t ld_k, const float* v, int64_t ld_v, int64_t tokens,
                     int64_t start_pos, const PagedKv& kv) {
  ref_.WriteKv(k, ld_k, v, ld_v, tokens, start_pos, kv);
}
void CpuOps::Attention(const AttentionArgs& args, Workspace& ws) { ref_.Attention(args, ws); }

}  // namespace tandem::kernels
