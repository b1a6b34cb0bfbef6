#include "kernels/ops.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/argmax.h"
#include "kernels/row_sampler.h"

namespace tandem::kernels {

void Ops::GatherRowsAt(const float* src, int64_t ld_src, std::span<const int32_t> rows,
                       int64_t cols, float* dst, int64_t ld_dst) {
  for (size_t i = 0; i < rows.size(); ++i) {
    CopyRows(src + rows[i] * ld_src, ld_src, 1, cols, dst + static_cast<int64_t>(i) * ld_dst,
             ld_dst);
  }
}

void Ops::ScatterRowsTo(const float* src, int64_t ld_src, std::span<const int32_t> rows,
                        int64_t cols, float* dst, int64_t ld_dst) {
  for (size_t i = 0; i < rows.size(); ++i) {
    CopyRows(src + static_cast<int64_t>(i) * ld_src, ld_src, 1, cols, dst + rows[i] * ld_dst,
             ld_dst);
  }
}

void Ops::RopeAt(float* x, int64_t ld_x, int64_t rows, int32_t heads, int32_t head_dim,
                 const int64_t* positions, float theta) {
  // Rows at consecutive positions (a sequence's prefill rows) rotate as one call.
  for (int64_t r = 0; r < rows;) {
    int64_t end = r + 1;
    while (end < rows && positions[end] == positions[end - 1] + 1) ++end;
    Rope(x + r * ld_x, ld_x, end - r, heads, head_dim, positions[r], theta);
    r = end;
  }
}

void Ops::WriteKvAt(const float* k, int64_t ld_k, const float* v, int64_t ld_v, int64_t rows,
                    float* const* const* page_tables, const int64_t* positions, const PagedKv& kv) {
  // Rows of the same pages at consecutive positions (a sequence's prefill rows) as one call.
  for (int64_t r = 0; r < rows;) {
    int64_t end = r + 1;
    while (end < rows && page_tables[end] == page_tables[r] &&
           positions[end] == positions[end - 1] + 1) {
      ++end;
    }
    PagedKv own = kv;
    own.pages = page_tables[r];
    WriteKv(k + r * ld_k, ld_k, v + r * ld_v, ld_v, end - r, positions[r], own);
    r = end;
  }
}

std::string Ops::ReadBack(const float* src, size_t count, float* dst) {
  if (src != dst && count > 0) std::memcpy(dst, src, count * sizeof(float));
  return "";
}

void Ops::RowSquareSums(const float* x, int64_t ld_x, int64_t rows, int64_t cols, float* sums) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * ld_x;
    double ss = 0.0;
    for (int64_t c = 0; c < cols; ++c) ss += static_cast<double>(row[c]) * row[c];
    sums[r] = static_cast<float>(ss);
  }
}

void Ops::RmsNormBySums(float* x, int64_t ld_x, int64_t rows, int64_t cols, const float* sums,
                        int64_t count, const float* weight, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * ld_x;
    const float inv = static_cast<float>(
        1.0 / std::sqrt(static_cast<double>(sums[r]) / static_cast<double>(count) + eps));
    for (int64_t c = 0; c < cols; ++c) row[c] = weight[c] * (row[c] * inv);
  }
}

void Ops::UploadTables(void* device, const void* host, size_t bytes) {
  if (device != host && bytes > 0) std::memcpy(device, host, bytes);
}

std::string Ops::ReadBackArgmax(const float* src, int64_t ld_src, int64_t rows, int64_t cols,
                                int32_t* out) {
  std::string failure = ReadBack(src, 0, nullptr);
  if (!failure.empty()) return failure;
  for (int64_t r = 0; r < rows; ++r) out[r] = ArgmaxRow(src + r * ld_src, cols);
  return "";
}

std::string Ops::ReadBackSampled(const float* src, int64_t ld_src, int64_t cols,
                                 std::span<const SamplingRow> rules,
                                 std::span<const PenaltyToken> seen, SampledToken* out) {
  std::string failure = ReadBack(src, 0, nullptr);
  if (!failure.empty()) return failure;
  thread_local RowSampler sampler;  // its scratch grows to the vocabulary once per thread
  for (size_t r = 0; r < rules.size(); ++r) {
    out[r] = SampleReadBackRow(sampler, src, ld_src, cols, rules, seen, r);
  }
  return "";
}

void Ops::GatedMlp(Activation act, const float* x, int64_t ld_x, int64_t rows,
                   const WeightMatrix& gate_up, const WeightMatrix& down, float* out,
                   int64_t ld_out, Workspace& ws) {
  const int64_t I = down.cols;
  float* gu = ws.Floats(rows * 2 * I);
  Linear(x, ld_x, rows, gate_up, nullptr, gu, 2 * I);
  // The activated product overwrites the gate half in place (row stride 2I).
  GatedActivation(act, gu, 2 * I, gu + I, 2 * I, rows, I, gu, 2 * I);
  Linear(gu, 2 * I, rows, down, nullptr, out, ld_out);
}

// Only callers that asked ResumesAttentionExactly() reach these; a backend that says yes
// overrides both, so arriving here is a bug in the caller, not a condition to report.
void Ops::AdvanceSharedAttention(const SharedPrefixAttentionArgs&, const AttentionState&, bool,
                                 Workspace&) {
  std::fprintf(stderr,
               "tandem: backend %s has no AdvanceSharedAttention (ResumesAttentionExactly)\n",
               std::string(name()).c_str());
  std::abort();
}

void Ops::FinishAttention(const PartialAttentionArgs&, const AttentionState&, Workspace&) {
  std::fprintf(stderr, "tandem: backend %s has no FinishAttention (ResumesAttentionExactly)\n",
               std::string(name()).c_str());
  std::abort();
}

}  // namespace tandem::kernels
