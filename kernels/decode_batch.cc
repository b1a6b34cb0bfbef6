#include "kernels/decode_batch.h"

namespace tandem::kernels {
namespace {

// The fields every recurrent op's args share.
template <typename Args>
Args SingleSequence(const Args& batch, int64_t r) {
  Args one = batch;
  one.tokens = 1;
  one.state = batch.state_table[r] + batch.state_offset;
  one.state_table = nullptr;
  one.state_offset = 0;
  one.snapshots = {};
  return one;
}

}  // namespace

CausalConvArgs DecodeRow(const CausalConvArgs& batch, int64_t r) {
  CausalConvArgs one = SingleSequence(batch, r);
  one.u += r * batch.ld_u;
  one.out += r * batch.ld_out;
  return one;
}

SelectiveScanArgs DecodeRow(const SelectiveScanArgs& batch, int64_t r) {
  SelectiveScanArgs one = SingleSequence(batch, r);
  one.u += r * batch.ld_u;
  one.delta += r * batch.ld_delta;
  one.b += r * batch.ld_b;
  one.c += r * batch.ld_c;
  if (one.z != nullptr) one.z += r * batch.ld_z;
  one.y += r * batch.ld_y;
  return one;
}

SsdScanArgs DecodeRow(const SsdScanArgs& batch, int64_t r) {
  SsdScanArgs one = SingleSequence(batch, r);
  one.x += r * batch.ld_x;
  one.dt += r * batch.ld_dt;
  one.b += r * batch.ld_b;
  one.c += r * batch.ld_c;
  one.y += r * batch.ld_y;
  return one;
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
