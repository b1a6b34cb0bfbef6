// What every layer of a forward pass sees. A pass runs a batch of sequences at once: their new
// tokens are stacked into one matrix of `rows` rows (so the linear layers run as single GEMMs),
// and each sequence's rows form a Segment for the per-sequence parts (conv, scan, attention).
#ifndef TANDEM_MODELS_FORWARD_CONTEXT_H_
#define TANDEM_MODELS_FORWARD_CONTEXT_H_

#include <cstdint>
#include <span>

#include "kernels/collectives.h"
#include "kernels/ops.h"
#include "kernels/workspace.h"
#include "models/hydragen_config.h"
#include "models/state_layout.h"

namespace tandem::models {

// Copy every SSM layer's state into `block` (an SSM block, StateLayout layout) after the first
// `after_tokens` tokens of this pass's segment: the kernels' flat snapshot table entry.
using SsmSnapshot = kernels::BlockSnapshot;

struct Segment {
  SequenceState* state = nullptr;
  int64_t row = 0;        // first row of this sequence in the batch matrices
  int64_t tokens = 0;     // rows it owns
  int64_t start_pos = 0;  // absolute position of its first row
  std::span<const SsmSnapshot> snapshots;
  // Its KV pages as the backend's kernels read them (Ops::Table); null without attention.
  float* const* page_table = nullptr;
};

// What a forward pass counts, for whoever asked (ForwardOptions::stats); layers add to it.
struct ForwardStats {
  int64_t hydragen_nodes = 0;  // shared-prefix nodes attended with Hydragen, over all layers
};

struct ForwardContext {
  kernels::Ops& ops;
  // Activations and the ops' scratch: memory the backend computes in (a GPU's, on a device).
  kernels::Workspace& ws;
  // What the layer graph itself reads and writes on the host: segment tables, snapshot lists,
  // pointer arrays, plans. The same workspace as `ws` on the CPU.
  kernels::Workspace& host;
  const StateLayout& layout;
  std::span<const Segment> segments;
  // The pass as one batch, in tables the backend's kernels read (Ops::Table), built once per
  // pass. Without SSM layers the SSM blocks and snapshot tables are empty; without attention
  // layers, the per-row tables.
  //  - Per segment, its SSM block: the recurrent ops' state_table.
  //  - The segments' rows (cu_seqlens, for every op that groups rows by sequence) and
  //    snapshots, as a varlen call of the full recurrent ops.
  //  - Per row, its sequence's page table and its position: attention's page_tables and
  //    positions, for RoPE, the KV write and attention of every row in one call.
  float* const* ssm_blocks = nullptr;
  kernels::VarlenSequences sequences;
  float* const* const* row_page_tables = nullptr;
  const int64_t* row_positions = nullptr;
  int64_t rows = 0;
  const HydragenConfig& hydragen;
  ForwardStats* stats = nullptr;  // may be null
  // The other workers of a tensor-parallel model (models/tensor_parallel.h); null alone.
  kernels::Collectives* collectives = nullptr;

  // Adds up a partial result across the workers (nothing to do alone).
  void AllReduce(float* data, int64_t count) const {
    if (collectives != nullptr) collectives->AllReduceSum(data, count);
  }
  // Whether this worker adds the biases of outputs that are summed across the workers.
  bool adds_output_bias() const { return collectives == nullptr || collectives->rank() == 0; }
};

}  // namespace tandem::models

#endif  // TANDEM_MODELS_FORWARD_CONTEXT_H_
