#include "kernels/launch_signature.h"

#include <bit>
#include <cstring>

namespace tandem::kernels {

// A struct that gains a field must have it added below, or two launches that differ only in it
// would look alike: these sizes (x86-64 and aarch64 Linux) fail to match first.
static_assert(sizeof(WeightMatrix) == 40, "list WeightMatrix's new field in Add");
static_assert(sizeof(PagedKv) == 32, "list PagedKv's new field in Add");
static_assert(sizeof(VarlenSequences) == 32, "list VarlenSequences' new field in Add");
static_assert(sizeof(SelectiveScanArgs) == 208, "list SelectiveScanArgs' new field in Add");
static_assert(sizeof(SsdScanArgs) == 216, "list SsdScanArgs' new field in Add");
static_assert(sizeof(CausalConvArgs) == 144, "list CausalConvArgs' new field in Add");
static_assert(sizeof(AttentionArgs) == 136, "list AttentionArgs' new field in Add");
static_assert(sizeof(PartialAttentionArgs) == 152, "list PartialAttentionArgs' new field in Add");
static_assert(sizeof(AttentionPart) == 32, "list AttentionPart's new field in Add");

void LaunchSignature::AddBytes(const void* p, size_t n) {
  const size_t at = bytes_.size();
  bytes_.resize(at + n);
  std::memcpy(bytes_.data() + at, p, n);
}

uint64_t LaunchSignature::Hash() const {
  // Eight bytes at a time (a deep model's decode pass signs tens of KB per step), each word
  // mixed in by a multiply and a rotation; the tail is taken byte by byte.
  constexpr uint64_t kMultiplier = 0x9e3779b97f4a7c15ull;
  uint64_t hash = 0xcbf29ce484222325ull ^ bytes_.size();
  const size_t words = bytes_.size() / sizeof(uint64_t);
  for (size_t i = 0; i < words; ++i) {
    uint64_t word;
    std::memcpy(&word, bytes_.data() + i * sizeof(uint64_t), sizeof(word));
    hash = std::rotl((hash ^ word) * kMultiplier, 29);
  }
  for (size_t i = words * sizeof(uint64_t); i < bytes_.size(); ++i) {
    hash = std::rotl((hash ^ static_cast<uint64_t>(bytes_[i])) * kMultiplier, 29);
  }
  return hash;
}

void LaunchSignature::Add(const WeightMatrix& w) {
  Add(w.format);
  Add(w.data);
  Add(w.row_scales);
  Add(w.rows);
  Add(w.cols);
}

void LaunchSignature::Add(const PagedKv& kv) {
  Add(kv.pages);
  Add(kv.page_tokens);
  Add(kv.num_kv_heads);
  Add(kv.head_dim);
  Add(kv.layer_offset);
}

void LaunchSignature::Add(const VarlenSequences& s) {
  Add(s.count);
  Add(s.cu_seqlens);
  Add(s.cu_snapshots);
  Add(s.snapshots);
}

void LaunchSignature::Add(const SelectiveScanArgs& a) {
  Add(a.tokens);
  Add(a.inner);
  Add(a.state_size);
  Add(a.u);
  Add(a.ld_u);
  Add(a.delta);
  Add(a.ld_delta);
  Add(a.delta_bias);
  Add(a.a);
  Add(a.b);
  Add(a.ld_b);
  Add(a.c);
  Add(a.ld_c);
  Add(a.d);
  Add(a.z);
  Add(a.ld_z);
  Add(a.state);
  Add(a.y);
  Add(a.ld_y);
  Add(a.snapshots);
  Add(a.state_table);
  Add(a.state_offset);
  Add(a.sequences);
}

void LaunchSignature::Add(const SsdScanArgs& a) {
  Add(a.tokens);
  Add(a.heads);
  Add(a.head_dim);
  Add(a.groups);
  Add(a.state_size);
  Add(a.chunk_size);
  Add(a.x);
  Add(a.ld_x);
  Add(a.dt);
  Add(a.ld_dt);
  Add(a.dt_bias);
  Add(a.dt_min);
  Add(a.dt_max);
  Add(a.a);
  Add(a.b);
  Add(a.ld_b);
  Add(a.c);
  Add(a.ld_c);
  Add(a.d);
  Add(a.state);
  Add(a.y);
  Add(a.ld_y);
  Add(a.snapshots);
  Add(a.state_table);
  Add(a.state_offset);
  Add(a.sequences);
}

void LaunchSignature::Add(const CausalConvArgs& a) {
  Add(a.tokens);
  Add(a.channels);
  Add(a.kernel);
  Add(a.u);
  Add(a.ld_u);
  Add(a.weight);
  Add(a.bias);
  Add(a.silu);
  Add(a.state);
  Add(a.out);
  Add(a.ld_out);
  Add(a.snapshots);
  Add(a.state_table);
  Add(a.state_offset);
  Add(a.sequences);
}

void LaunchSignature::Add(const AttentionArgs& a) {
  Add(a.tokens);
  Add(a.start_pos);
  Add(a.heads);
  Add(a.q);
  Add(a.ld_q);
  Add(a.kv);
  Add(a.scale);
  Add(a.out);
  Add(a.ld_out);
  Add(a.page_tables);
  Add(a.positions);
  Add(a.sequences);
  Add(a.cu_seqlens);
  Add(a.max_seqlen);
}

void LaunchSignature::Add(const PartialAttentionArgs& a) {
  Add(a.rows);
  Add(a.start_pos);
  Add(a.causal);
  Add(a.heads);
  Add(a.q);
  Add(a.ld_q);
  Add(a.kv);
  Add(a.key_begin);
  Add(a.key_end);
  Add(a.scale);
  Add(a.out);
  Add(a.ld_out);
  Add(a.lse);
  Add(a.ld_lse);
  Add(a.page_tables);
  Add(a.key_begins);
  Add(a.key_ends);
}

void LaunchSignature::Add(const AttentionPart& p) {
  Add(p.out);
  Add(p.ld_out);
  Add(p.lse);
  Add(p.ld_lse);
}

}  // namespace tandem::kernels
