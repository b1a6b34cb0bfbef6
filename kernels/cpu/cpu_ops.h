// The fast CPU backend: every op is spread over one ThreadPool owned by this object, and hot paths
// take their scratch from the Workspace argument or from buffers sized at first use, so steady
// state performs no heap allocation.
#ifndef TANDEM_KERNELS_CPU_CPU_OPS_H_
#define TANDEM_KERNELS_CPU_CPU_OPS_H_

#include <vector>

#include "kernels/cpu/thread_pool.h"
#include "kernels/ops.h"
#include "kernels/reference/reference_ops.h"
#include "kernels/row_sampler.h"

namespace tandem::kernels {

// Which GEMM implementation Linear uses: kAuto picks per shape from measurements (see
// docs/BENCHMARKS.md); the others force one for benchmarks and tests.
enum class GemmImpl { kAuto, kBlas, kOwn };

class CpuOps : public Ops {
 public:
  // Limits OpenBLAS to one thread process-wide: Linear runs OpenBLAS on per-thread column slices
  // from our own pool instead.
  explicit CpuOps(int threads = 0);
  void set_gemm_impl(GemmImpl impl) { gemm_impl_ = impl; }
  // Batch-invariant mode: a token's result is the same instruction sequence whatever else shares
  // its call: however many rows a Linear has (our own GEMM, whose per-element reduction order
  // depends only on k, at every row count), wherever a prefill was split and whether the token
  // came through prefill or a decode step (the SSD scan runs the decode step's recurrence token
  // by token instead of in chunks), and Hydragen resumes a row's own attention rather than
  // merging parts (ResumesAttentionExactly). A cache hit, a batched decode and a resumed
  // preemption then give bit-identical logits to a cold, lone, uninterrupted run. Costs prefill
  // speed: sgemm is faster at large row counts (docs/BENCHMARKS.md, "Batch invariance"), and
  // shared-prefix decode speed (docs/BENCHMARKS.md, "Hydragen").
  void set_batch_invariant(bool on) { batch_invariant_ = on; }
  bool batch_invariant() const { return batch_invariant_; }
  // Outside batch-invariant mode, SsdScan runs in chunks of min(args.chunk_size, max_chunk) tokens
  // (in it, token by token: see set_batch_invariant). The result does not depend
  // on the chunk length (up to rounding), and on CPUs short chunks are much faster: the
  // intra-chunk work grows with the chunk length while the state passing does not (2-5× between
  // 256 and 32 at T = 512, docs/BENCHMARKS.md). Tests raise it to exercise long chunks.
  static constexpr int32_t kDefaultSsdMaxChunk = 32;
  void set_ssd_max_chunk(int32_t max_chunk) { ssd_max_chunk_ = max_chunk; }
  std::string_view name() const override { return "cpu"; }
  int threads() const { return pool_.size(); }

  // The rows sampled in parallel, one RowSampler per participant of the pool.
  std::string ReadBackSampled(const float* src, int64_t ld_src, int64_t cols,
                              std::span<const SamplingRow> rules,
                              std::span<const PenaltyToken> seen, SampledToken* out) override;

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
  // In batch-invariant mode; outside it Hydragen takes the faster SharedPrefixAttention.
  bool ResumesAttentionExactly() const override { return batch_invariant_; }
  void AdvanceSharedAttention(const SharedPrefixAttentionArgs& args, const AttentionState& state,
                              bool start, Workspace& ws) override;
  void FinishAttention(const PartialAttentionArgs& args, const AttentionState& state,
                       Workspace& ws) override;

 private:
  // Per-slot scratch for ops without a Workspace argument: `floats_per_slot` floats for each of
  // the pool's slots, 64-byte aligned; grows only when a larger shape first appears.
  float* SlotScratch(int64_t floats_per_slot);
  // SsdScan in batch-invariant mode (cpu_scan.cc).
  void SsdScanRecurrent(const SsdScanArgs& a);

  ThreadPool pool_;
  GemmImpl gemm_impl_ = GemmImpl::kAuto;
  bool batch_invariant_ = false;
  int32_t ssd_max_chunk_ = kDefaultSsdMaxChunk;
  Workspace slot_scratch_{0};
  int64_t slot_scratch_floats_ = 0;
  std::vector<RowSampler> samplers_;  // one per slot of the pool
};

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_CPU_CPU_OPS_H_
