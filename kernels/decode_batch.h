// Host backends' view of a decode batch (the recurrent ops' state_table, attention's
// page_tables): row r as the single-sequence call it stands for, so a batched call computes
// exactly what one call per sequence would.
#ifndef TANDEM_KERNELS_DECODE_BATCH_H_
#define TANDEM_KERNELS_DECODE_BATCH_H_

#include <cstdint>

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

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_DECODE_BATCH_H_
