#include "kernels/decode_batch.h"

namespace tandem::kernels {
namespace {

// Rows [first, first + tokens) of a call: its row pointers moved down, as a call of its own.
CausalConvArgs ShiftRows(const CausalConvArgs& call, int64_t first, int64_t tokens) {
  CausalConvArgs part = call;
  part.tokens = tokens;
  part.u += first * call.ld_u;
  part.out += first * call.ld_out;
  return part;
}

SelectiveScanArgs ShiftRows(const SelectiveScanArgs& call, int64_t first, int64_t tokens) {
  SelectiveScanArgs part = call;
  part.tokens = tokens;
  part.u += first * call.ld_u;
  part.delta += first * call.ld_delta;
  part.b += first * call.ld_b;
  part.c += first * call.ld_c;
  if (part.z != nullptr) part.z += first * call.ld_z;
  part.y += first * call.ld_y;
  return part;
}

SsdScanArgs ShiftRows(const SsdScanArgs& call, int64_t first, int64_t tokens) {
  SsdScanArgs part = call;
  part.tokens = tokens;
  part.x += first * call.ld_x;
  part.dt += first * call.ld_dt;
  part.b += first * call.ld_b;
  part.c += first * call.ld_c;
  part.y += first * call.ld_y;
  return part;
}

// One sequence whose state is the table's entry `index`, with the given snapshots.
template <typename Args>
Args OwnState(Args one, const Args& call, int64_t index,
              std::span<const StateSnapshot> snapshots) {
  one.state = call.state_table[index] + call.state_offset;
  one.state_table = nullptr;
  one.state_offset = 0;
  one.sequences = {};
  one.snapshots = snapshots;
  return one;
}

template <typename Args>
Args OneVarlenSequence(const Args& call, int64_t s, std::vector<StateSnapshot>* snapshots) {
  const VarlenSequences& seqs = call.sequences;
  const int64_t first = seqs.cu_seqlens[s];
  snapshots->clear();
  if (seqs.cu_snapshots != nullptr) {
    for (int32_t i = seqs.cu_snapshots[s]; i < seqs.cu_snapshots[s + 1]; ++i) {
      snapshots->push_back(
          {seqs.snapshots[i].after_tokens, seqs.snapshots[i].block + call.state_offset});
    }
  }
  return OwnState(ShiftRows(call, first, seqs.cu_seqlens[s + 1] - first), call, s, *snapshots);
}

template <typename Args>
Args DecodeRunOf(const Args& call, int64_t first, int64_t count) {
  Args run = ShiftRows(call, call.sequences.cu_seqlens[first], count);
  run.state_table = call.state_table + first;
  run.sequences = {};
  return run;
}

}  // namespace

CausalConvArgs DecodeRow(const CausalConvArgs& batch, int64_t r) {
  return OwnState(ShiftRows(batch, r, 1), batch, r, {});
}
SelectiveScanArgs DecodeRow(const SelectiveScanArgs& batch, int64_t r) {
  return OwnState(ShiftRows(batch, r, 1), batch, r, {});
}
SsdScanArgs DecodeRow(const SsdScanArgs& batch, int64_t r) {
  return OwnState(ShiftRows(batch, r, 1), batch, r, {});
}

CausalConvArgs VarlenSequence(const CausalConvArgs& call, int64_t s,
                              std::vector<StateSnapshot>* snapshots) {
  return OneVarlenSequence(call, s, snapshots);
}
SelectiveScanArgs VarlenSequence(const SelectiveScanArgs& call, int64_t s,
                                 std::vector<StateSnapshot>* snapshots) {
  return OneVarlenSequence(call, s, snapshots);
}
SsdScanArgs VarlenSequence(const SsdScanArgs& call, int64_t s,
                           std::vector<StateSnapshot>* snapshots) {
  return OneVarlenSequence(call, s, snapshots);
}

CausalConvArgs VarlenDecodeRun(const CausalConvArgs& call, int64_t first, int64_t count) {
  return DecodeRunOf(call, first, count);
}
SelectiveScanArgs VarlenDecodeRun(const SelectiveScanArgs& call, int64_t first, int64_t count) {
  return DecodeRunOf(call, first, count);
}
SsdScanArgs VarlenDecodeRun(const SsdScanArgs& call, int64_t first, int64_t count) {
  return DecodeRunOf(call, first, count);
}

AttentionArgs DecodeRow(const AttentionArgs& batch, int64_t r) {
  AttentionArgs one = batch;
  one.tokens = 1;
  one.start_pos = batch.positions[r];
  one.kv.pages = batch.page_tables[r];
  one.page_tables = nullptr;
  one.positions = nullptr;
  one.q += r * batch.ld_q;
  one.out += r * batch.ld_out;
  return one;
}

PartialAttentionArgs DecodeRow(const PartialAttentionArgs& batch, int64_t r) {
  PartialAttentionArgs one = batch;
  one.rows = 1;
  one.causal = false;
  one.kv.pages = batch.page_tables[r];
  one.key_begin = batch.key_begins[r];
  one.key_end = batch.key_ends[r];
  one.page_tables = nullptr;
  one.key_begins = one.key_ends = nullptr;
  one.q += r * batch.ld_q;
  one.out += r * batch.ld_out;
  one.lse += r * batch.ld_lse;
  return one;
}

}  // namespace tandem::kernels
