// Host backends' view of batched calls: a decode batch (the recurrent ops' state_table,
// attention's page_tables) row by row, and a varlen call (the recurrent ops' `sequences`)
// sequence by sequence, each as the single-sequence call it stands for, so that a batched call
// computes exactly what one call per sequence would.
#ifndef TANDEM_KERNELS_DECODE_BATCH_H_
#define TANDEM_KERNELS_DECODE_BATCH_H_

#include <cstdint>
#include <vector>

#include "kernels/ops.h"

namespace tandem::kernels {

// One token of one sequence: row r's inputs and outputs, state_table[r] + state_offset as the
// state, no table and no snapshots.
CausalConvArgs DecodeRow(const CausalConvArgs& batch, int64_t r);
SelectiveScanArgs DecodeRow(const SelectiveScanArgs& batch, int64_t r);
SsdScanArgs DecodeRow(const SsdScanArgs& batch, int64_t r);
// Row r's query over its own sequence's pages, at its position.
AttentionArgs DecodeRow(const AttentionArgs& batch, int64_t r);
// Row r's query over its own key range of its own pages.
PartialAttentionArgs DecodeRow(const PartialAttentionArgs& batch, int64_t r);

// Sequence s of a varlen call alone: its rows, its state, and its snapshots, written into
// `snapshots` (which must outlive the returned args).
CausalConvArgs VarlenSequence(const CausalConvArgs& call, int64_t s,
                              std::vector<StateSnapshot>* snapshots);
SelectiveScanArgs VarlenSequence(const SelectiveScanArgs& call, int64_t s,
                                 std::vector<StateSnapshot>* snapshots);
SsdScanArgs VarlenSequence(const SsdScanArgs& call, int64_t s,
                           std::vector<StateSnapshot>* snapshots);

// Sequences [first, first + count) of a varlen call, each one token without snapshots, as a
// decode batch for the step op.
CausalConvArgs VarlenDecodeRun(const CausalConvArgs& call, int64_t first, int64_t count);
SelectiveScanArgs VarlenDecodeRun(const SelectiveScanArgs& call, int64_t first, int64_t count);
SsdScanArgs VarlenDecodeRun(const SsdScanArgs& call, int64_t first, int64_t count);

// How a host backend runs a varlen call: each run of one-token sequences without snapshots
// goes to `step` as a decode batch (decode rows keep their batched step, and compute what they
// would have decoded alone), every other sequence to `full` alone.
template <typename Args, typename Step, typename Full>
void ForEachVarlenPart(const Args& call, Step&& step, Full&& full) {
  const VarlenSequences& seqs = call.sequences;
  auto plain_decode = [&](int64_t s) {
    return seqs.cu_seqlens[s + 1] - seqs.cu_seqlens[s] == 1 &&
           (seqs.cu_snapshots == nullptr || seqs.cu_snapshots[s + 1] == seqs.cu_snapshots[s]);
  };
  // Reused across calls (every layer of every pass makes one), so steady state allocates nothing.
  thread_local std::vector<StateSnapshot> snapshots;
  for (int64_t s = 0; s < seqs.count;) {
    int64_t end = s;
    while (end < seqs.count && plain_decode(end)) ++end;
    if (end > s) {
      step(VarlenDecodeRun(call, s, end - s));
      s = end;
    } else {
      full(VarlenSequence(call, s, &snapshots));
      ++s;
    }
  }
}

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_DECODE_BATCH_H_
