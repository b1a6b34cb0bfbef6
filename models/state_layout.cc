#include "models/state_layout.h"

namespace tandem::models {

StateLayout::StateLayout(const ModelConfig& config, int32_t page_tokens, int32_t workers)
    : page_tokens_(page_tokens),
      workers_(workers),
      num_attention_layers_(config.num_attention_layers),
      kv_heads_(config.attention.kv_heads),
      head_dim_(config.attention.head_dim) {
  kv_page_floats_ = int64_t{num_attention_layers_} * 2 * kv_heads_ * page_tokens_ * head_dim_;

  int64_t conv_floats = 0, ssm_floats = 0;
  if (config.ssm_kind() == MixerKind::kMamba1) {
    const Mamba1Dims& m = config.mamba1;
    conv_floats = int64_t{m.conv_kernel - 1} * m.inner;
    ssm_floats = int64_t{m.inner} * m.state_size;
  } else {
    const Mamba2Dims& m = config.mamba2;
    conv_floats = int64_t{m.conv_kernel - 1} * m.conv_channels();
    ssm_floats = int64_t{m.inner} * m.state_size;
  }
  // Keep every layer's part 64-byte aligned so kernels can use aligned vector loads.
  auto align16 = [](int64_t floats) { return (floats + 15) / 16 * 16; };
  int64_t offset = 0;
  for (int32_t i = 0; i < config.num_ssm_layers; ++i) {
    SsmLayerState s;
    s.conv_offset = offset;
    s.conv_floats = conv_floats;
    offset += align16(conv_floats);
    s.ssm_offset = offset;
    s.ssm_floats = ssm_floats;
    offset += align16(ssm_floats);
    ssm_layers_.push_back(s);
  }
  ssm_block_floats_ = offset;
}

kernels::PagedKv StateLayout::KvView(int32_t attention_index, float* const* pages) const {
  kernels::PagedKv kv;
  kv.pages = pages;
  kv.page_tokens = page_tokens_;
  kv.num_kv_heads = kv_heads_;
  kv.head_dim = head_dim_;
  kv.layer_offset = int64_t{attention_index} * 2 * kv_heads_ * page_tokens_ * head_dim_;
  return kv;
}

}  // namespace tandem::models
