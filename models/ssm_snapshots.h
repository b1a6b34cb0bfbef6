// Turns a segment's whole-block snapshot requests into one SSM layer's conv and SSM snapshot
// lists (the kernels' StateSnapshot), pointing into each destination block at that layer's offsets.
#ifndef TANDEM_MODELS_SSM_SNAPSHOTS_H_
#define TANDEM_MODELS_SSM_SNAPSHOTS_H_

#include <span>

#include "kernels/ops.h"
#include "kernels/workspace.h"
#include "models/forward_context.h"

namespace tandem::models {

struct LayerSnapshots {
  std::span<const kernels::StateSnapshot> conv;
  std::span<const kernels::StateSnapshot> ssm;
};

inline LayerSnapshots LayerSnapshotsFor(const Segment& seg, const SsmLayerState& layer,
                                        kernels::Workspace& ws) {
  const size_t n = seg.snapshots.size();
  if (n == 0) return {};
  auto* conv = ws.Array<kernels::StateSnapshot>(n);
  auto* ssm = ws.Array<kernels::StateSnapshot>(n);
  for (size_t i = 0; i < n; ++i) {
    conv[i] = {seg.snapshots[i].after_tokens, seg.snapshots[i].block + layer.conv_offset};
    ssm[i] = {seg.snapshots[i].after_tokens, seg.snapshots[i].block + layer.ssm_offset};
  }
  return {{conv, n}, {ssm, n}};
}

}  // namespace tandem::models

#endif  // TANDEM_MODELS_SSM_SNAPSHOTS_H_
