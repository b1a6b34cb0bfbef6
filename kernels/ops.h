// The compute interface that every backend implements: the CPU (fast, multithreaded), the plain
// reference used by tests, and later CUDA. Pure compute: no model knowledge, no allocation policy.
//
// Conventions shared by every op:
//  - Tensors are fp32, row-major. A "row stride" (ld*) is in floats and lets an op read a slice of
//    a wider buffer (for example the x / B / C slices of a fused in_proj output) without copying.
//  - Linear weights use PyTorch's nn.Linear layout [out, in]: y = x · Wᵀ (+ b), given as a
//    WeightMatrix in fp32, bf16, f16 or int8 (kernels/weight_matrix.h). Activations, biases and
//    every accumulation stay fp32.
//  - Recurrent state lives in caller-owned buffers and is updated in place, so a sequence can be
//    checkpointed (copy the buffer) and restored (copy it back) at any token.
//  - Scratch memory comes from a Workspace so that hot paths allocate nothing per token.
//  - Outputs must not overlap inputs unless an op says otherwise (Rope works in place;
//    GatedActivation may write over `gate` when out == gate with the same row stride).
#ifndef TANDEM_KERNELS_OPS_H_
#define TANDEM_KERNELS_OPS_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "kernels/sampling_row.h"
#include "kernels/weight_matrix.h"
#include "kernels/workspace.h"

namespace tandem::kernels {

// kReluSquared: relu(x)², Nemotron-H's MLP activation ("relu2").
enum class Activation { kSilu, kGelu, kReluSquared };

// Where to copy a layer's recurrent state during a multi-token call: the state after the first
// `after_tokens` tokens of the call (0 = the state passed in) is written to `dst`, which has the
// layout of the op's `state` buffer. Positions must be in [0, T] and in increasing order.
struct StateSnapshot {
  int64_t after_tokens;
  float* dst;
};

// An entry of a varlen call's flat snapshot table: the state after `after_tokens` tokens of its
// sequence goes to `block` + the op's state_offset (a block holds every SSM layer's state, so
// the same table serves each layer and each op).
struct BlockSnapshot {
  int64_t after_tokens;
  float* block;
};

// Several sequences in one call of a full recurrent op (varlen prefill, with decode rows as
// one-token sequences): sequence s owns rows [cu_seqlens[s], cu_seqlens[s+1]) of the call
// (tokens = cu_seqlens[count]), continues from state_table[s] + state_offset, and gets the
// snapshots [cu_snapshots[s], cu_snapshots[s+1]) of the flat table, in increasing after_tokens,
// counted from its own first row. The tables are in the backend's memory (Ops::Table). Each
// sequence's outputs, final state and snapshots are bit for bit what a call for it alone gives:
// the step op for one token without snapshots, the full op otherwise.
struct VarlenSequences {
  int64_t count = 0;  // 0: not a varlen call
  const int64_t* cu_seqlens = nullptr;  // [count + 1], from 0
  const int32_t* cu_snapshots = nullptr;  // [count + 1], from 0; null: no snapshots
  const BlockSnapshot* snapshots = nullptr;
};

// One attention layer's view of a sequence's paged KV cache. A page holds `page_tokens` tokens of
// every attention layer of the model; inside a page, floats are laid out as
//   [attention_layer][k, v][kv_head][token_in_page][head_dim]
// so one layer's K for one head is a contiguous page_tokens × head_dim block.
struct PagedKv {
  float* const* pages = nullptr;  // pages[i] holds positions [i·page_tokens, (i+1)·page_tokens)
  int32_t page_tokens = 16;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int64_t layer_offset = 0;  // floats from a page's start to this layer's K block

  int64_t head_block() const { return int64_t{page_tokens} * head_dim; }
  float* k_block(int64_t page, int32_t head) const {
    return pages[page] + layer_offset + head * head_block();
  }
  float* v_block(int64_t page, int32_t head) const {
    return pages[page] + layer_offset + (num_kv_heads + head) * head_block();
  }
};

// Mamba-1 selective scan (Jamba), for T ≥ 1 tokens continuing from `state`:
//   dt[d]   = softplus(delta[t,d] + delta_bias[d])
//   h[d,n]  = exp(dt·A[d,n])·h[d,n] + dt·B[t,n]·u[t,d]
//   y[t,d]  = (Σ_n h[d,n]·C[t,n] + D[d]·u[t,d]) · silu(z[t,d])      (gate skipped if z is null)
struct SelectiveScanArgs {
  int64_t tokens = 0;
  int32_t inner = 0;  // din
  int32_t state_size = 0;  // N
  const float* u = nullptr;  int64_t ld_u = 0;  // [T, din] conv output after activation
  const float* delta = nullptr;  int64_t ld_delta = 0;  // [T, din] dt_proj output, before bias
  const float* delta_bias = nullptr;  // [din]
  const float* a = nullptr;  // [din, N], already -exp(A_log)
  const float* b = nullptr;  int64_t ld_b = 0;  // [T, N]
  const float* c = nullptr;  int64_t ld_c = 0;  // [T, N]
  const float* d = nullptr;  // [din]
  const float* z = nullptr;  int64_t ld_z = 0;  // [T, din] or null
  float* state = nullptr;  // [din, N] fp32, in/out
  float* y = nullptr;  int64_t ld_y = 0;  // [T, din]
  std::span<const StateSnapshot> snapshots;
  // Many sequences at once, their states found through a table in the backend's memory
  // (Ops::Table): `state` and `snapshots` are then unused. A decode batch (the step ops): row r
  // is the one new token of its own sequence, whose state is state_table[r] + state_offset
  // floats. A varlen call (the full ops): `sequences` says which rows are whose. Null: one
  // sequence.
  float* const* state_table = nullptr;
  int64_t state_offset = 0;
  VarlenSequences sequences;
};

// Mamba-2 SSD scan for T ≥ 1 tokens continuing from `state` (heads h, head dim P, groups g):
//   dt[t,h]    = clamp(softplus(dt_raw[t,h] + dt_bias[h]), dt_min, dt_max)
//   S[h,p,n]   = exp(dt·A[h])·S[h,p,n] + dt·x[t,h,p]·B[t,grp(h),n],  grp(h) = h / (heads / g)
//   y[t,h,p]   = Σ_n S[h,p,n]·C[t,grp(h),n] + D[h]·x[t,h,p]
// computed in chunks of `chunk_size` tokens (the chunked SSD algorithm); snapshots at chunk
// boundaries are the boundary states themselves, others roll forward from the boundary before.
// The result is independent of the chunk length up to fp32 rounding, so a backend may use shorter
// chunks than `chunk_size` where they are faster (the CPU backend caps them at 32 tokens).
struct SsdScanArgs {
  int64_t tokens = 0;
  int32_t heads = 0;
  int32_t head_dim = 0;  // P
  int32_t groups = 0;  // g
  int32_t state_size = 0;  // N
  int32_t chunk_size = 256;
  const float* x = nullptr;  int64_t ld_x = 0;  // [T, heads·P]
  const float* dt = nullptr;  int64_t ld_dt = 0;  // [T, heads], before bias and softplus
  const float* dt_bias = nullptr;  // [heads]
  float dt_min = 0.0f;
  float dt_max = 0.0f;  // 0 or +inf: no upper clamp
  const float* a = nullptr;  // [heads], already -exp(A_log)
  const float* b = nullptr;  int64_t ld_b = 0;  // [T, g·N]
  const float* c = nullptr;  int64_t ld_c = 0;  // [T, g·N]
  const float* d = nullptr;  // [heads]
  float* state = nullptr;  // [heads, P, N] fp32, in/out
  float* y = nullptr;  int64_t ld_y = 0;  // [T, heads·P]
  std::span<const StateSnapshot> snapshots;
  // Many sequences at once, their states found through a table in the backend's memory
  // (Ops::Table): `state` and `snapshots` are then unused. A decode batch (the step ops): row r
  // is the one new token of its own sequence, whose state is state_table[r] + state_offset
  // floats. A varlen call (the full ops): `sequences` says which rows are whose. Null: one
  // sequence.
  float* const* state_table = nullptr;
  int64_t state_offset = 0;
  VarlenSequences sequences;
};

// Causal depthwise conv1d over `channels` with kernel width K, continuing from `state`, which
// holds the K-1 previous raw inputs time-major ([K-1, channels], oldest first; zeros at the start
// of a sequence):  out[t,c] = act(bias[c] + Σ_k w[c,k]·u[t-(K-1)+k, c]).
// On return `state` holds the last K-1 raw inputs. Snapshots receive the state after that many
// tokens, in the same [K-1, channels] layout.
struct CausalConvArgs {
  int64_t tokens = 0;
  int32_t channels = 0;
  int32_t kernel = 4;
  const float* u = nullptr;  int64_t ld_u = 0;  // [T, channels] raw inputs
  const float* weight = nullptr;  // [channels, K]
  const float* bias = nullptr;  // [channels] or null
  bool silu = true;
  float* state = nullptr;  // [K-1, channels], in/out
  float* out = nullptr;  int64_t ld_out = 0;  // [T, channels]
  std::span<const StateSnapshot> snapshots;
  // Many sequences at once, their states found through a table in the backend's memory
  // (Ops::Table): `state` and `snapshots` are then unused. A decode batch (the step ops): row r
  // is the one new token of its own sequence, whose state is state_table[r] + state_offset
  // floats. A varlen call (the full ops): `sequences` says which rows are whose. Null: one
  // sequence.
  float* const* state_table = nullptr;
  int64_t state_offset = 0;
  VarlenSequences sequences;
};

// Causal attention of T queries at positions start_pos … start_pos+T-1 over the keys at positions
// 0 … (query position) in the paged cache (the queries' own K/V must already be written).
// GQA: kv head j serves query heads j·(heads/kv_heads) … (j+1)·(heads/kv_heads)-1. Softmax in fp32.
struct AttentionArgs {
  int64_t tokens = 0;
  int64_t start_pos = 0;
  int32_t heads = 0;
  const float* q = nullptr;  int64_t ld_q = 0;  // [T, heads·head_dim]
  PagedKv kv;
  float scale = 1.0f;
  float* out = nullptr;  int64_t ld_out = 0;  // [T, heads·head_dim]
  // Rows of many sequences (a decode batch, or a whole varlen pass): row r is the query at
  // position positions[r] of the sequence whose pages are page_tables[r] (both tables in the
  // backend's memory, Ops::Table); `kv` gives the layout, its `pages` and `start_pos` are
  // unused. A sequence's rows need not be adjacent. Null: one sequence.
  float* const* const* page_tables = nullptr;
  const int64_t* positions = nullptr;
  // With page_tables, optionally, how the rows group into sequences: sequence s owns rows
  // [cu_seqlens[s] − cu_seqlens[0], cu_seqlens[s+1] − cu_seqlens[0]) (a table in the backend's
  // memory, so a slice of a pass's table serves a run of its rows), at consecutive positions
  // over the same pages; max_seqlen (host) is the most rows any of them has. A device backend
  // uses it to attend a sequence's rows together; the result is the same.
  int64_t sequences = 0;
  const int64_t* cu_seqlens = nullptr;
  int64_t max_seqlen = 0;
};

// One part of a decomposed attention (docs/ARCHITECTURE.md, "Hydragen"): queries attend to a key
// range that is only part of their context, so besides the normalised output the op returns, per
// row and query head, the log-sum-exp of the scaled scores, lse = log Σ_k exp(scale·q·k). Parts
// over disjoint key ranges then merge exactly with MergeAttention. An empty key range gives out = 0
// and lse = −inf.
//
// Row t is the query at position start_pos + t. Without `causal` every row sees every key of
// [key_begin, key_end); with it, row t sees only keys < start_pos + t + 1 (suffix prefill).
struct PartialAttentionArgs {
  int64_t rows = 0;
  int64_t start_pos = 0;
  bool causal = false;
  int32_t heads = 0;
  const float* q = nullptr;  int64_t ld_q = 0;  // [rows, heads·head_dim]
  PagedKv kv;
  int64_t key_begin = 0;
  int64_t key_end = 0;
  float scale = 1.0f;
  float* out = nullptr;  int64_t ld_out = 0;  // [rows, heads·head_dim]
  float* lse = nullptr;  int64_t ld_lse = 0;  // [rows, heads], fp32
  // A batch of rows of different sequences (Hydragen's suffixes): row r attends without a mask
  // over keys [key_begins[r], key_ends[r]) of its own pages page_tables[r] (tables in the
  // backend's memory, Ops::Table); kv.pages, key_begin, key_end, start_pos and causal are then
  // unused. Null: every row over the same range of `kv`.
  float* const* const* page_tables = nullptr;
  const int64_t* key_begins = nullptr;
  const int64_t* key_ends = nullptr;
};

// The prefix part of Hydragen: `rows` queries of different sequences (one decode row each) that
// all share the KV pages of [key_begin, key_end) — `kv` is any one member's page table. The
// contract is PartialAttentionArgs without a mask (prefix keys precede every query), but the work
// is done as one matrix-matrix product per kv head: the heads/kv_heads query heads of a GQA group
// fold into rows, so the shared K/V is read once for all sequences instead of once per sequence.
struct SharedPrefixAttentionArgs {
  int64_t rows = 0;
  int32_t heads = 0;
  const float* q = nullptr;  int64_t ld_q = 0;  // [rows, heads·head_dim]
  PagedKv kv;
  int64_t key_begin = 0;
  int64_t key_end = 0;
  float scale = 1.0f;
  float* out = nullptr;  int64_t ld_out = 0;  // [rows, heads·head_dim]
  float* lse = nullptr;  int64_t ld_lse = 0;  // [rows, heads], fp32
};

// A part to merge: a PartialAttention / SharedPrefixAttention result for the same rows and heads.
struct AttentionPart {
  const float* out = nullptr;  int64_t ld_out = 0;  // [rows, heads·head_dim]
  const float* lse = nullptr;  int64_t ld_lse = 0;  // [rows, heads]
};

// Attention's online softmax stopped after some keys, to be resumed over the next ones (exact
// Hydragen: Ops::ResumesAttentionExactly). Per row and query head: the running max of the scaled
// scores, the sum of exp(score − max) over the keys seen, and acc = Σ exp(score − max)·v.
struct AttentionState {
  float* acc = nullptr;
  int64_t ld_acc = 0;    // [rows, heads·head_dim]
  float* max = nullptr;  // [rows, heads]
  float* sum = nullptr;  // [rows, heads]
  int64_t ld = 0;        // of max and sum
};

// How a router turns one token's logits into its k experts and their weights.
//  - kSoftmax (Jamba, Granite): p = softmax(logits) over every expert; the k largest p.
//  - kSigmoid (Nemotron 3, after DeepSeek-V3): p = sigmoid(logits). The choice ranks p + bias
//    (a per-expert correction learned for load balance, `bias`, may be null), and only among
//    the `top_groups` of `groups` equal groups of experts whose two best biased scores sum
//    highest. The weights are the unbiased p of the chosen.
// The rule must fit the experts (kernels/moe_routing.h's RoutingFits: config parsing checks it;
// the CUDA backend refuses a call that does not).
// Either way the k are chosen by descending score, the lower index first on ties (groups too);
// `renormalize` then divides the k weights by their sum (sigmoid: the sum + 1e-20, as
// transformers does), and every weight is multiplied by `scale`.
struct MoeRouting {
  enum class Score { kSoftmax, kSigmoid };
  Score score = Score::kSoftmax;
  bool renormalize = false;
  const float* bias = nullptr;  // [E], in the backend's memory (kSigmoid only)
  int32_t groups = 1;           // divides E; each group then holds at least two experts
  int32_t top_groups = 1;
  float scale = 1.0f;
};

// At most this many expert groups (MoeRouting::groups): a router keeps its groups' choice in a
// 64-bit mask.
inline constexpr int32_t kMaxMoeGroups = 64;

// Top-k mixture of experts: out[t] = Σ_j w_j · Expert_{e_j}(x[t]), the experts and weights from
// `routing` over router · route_x[t]. An expert is a gated MLP, down(act(gate·x) ⊙ up·x), or,
// when !gated, a plain one, down(act(up·x)) (Nemotron 3).
struct MoeArgs {
  int64_t tokens = 0;
  int32_t hidden = 0;  // the experts' input and output width
  int32_t intermediate = 0;
  int32_t num_experts = 0;
  int32_t top_k = 0;
  MoeRouting routing;
  bool gated = true;
  Activation act = Activation::kSilu;
  const float* x = nullptr;  int64_t ld_x = 0;  // [T, hidden]
  // The router's input when it is not `x` (Nemotron 3 routes on the hidden state and runs its
  // experts on a smaller projection of it): [T, router.cols]. Null: x.
  const float* route_x = nullptr;  int64_t ld_route_x = 0;
  // What the router reads: route_x, or x when it is null.
  const float* router_input() const { return route_x != nullptr ? route_x : x; }
  int64_t ld_router_input() const { return route_x != nullptr ? ld_route_x : ld_x; }
  WeightMatrix router;  // [E, router input width]
  // Per expert: [2·intermediate, hidden], rows gate ‖ up; when !gated, up alone [intermediate,
  // hidden].
  const WeightMatrix* gate_up = nullptr;
  const WeightMatrix* down = nullptr;  // per expert [hidden, intermediate]
  float* out = nullptr;  int64_t ld_out = 0;  // [T, hidden]
};

// How a device backend has run its passes so far: replayed from a captured CUDA graph, or
// captured into one (kernels/cuda/cuda_ops.h, --gpu-graphs). Zero on the host.
struct PassReplayCounts {
  int64_t replayed = 0;
  int64_t captured = 0;
};

class Ops {
 public:
  virtual ~Ops() = default;
  virtual std::string_view name() const = 0;
  virtual PassReplayCounts replay_counts() const { return {}; }

  // Where the ops' operands live: activations, workspaces, logits. Host memory for the CPU
  // backends; a device backend's own (pass it to Workspace for the activation scratch).
  virtual MemorySource& activation_memory() { return HostMemory(); }
  bool activations_on_host() { return &activation_memory() == &HostMemory(); }

  // The end of a pass: waits for the ops issued so far, then copies `count` floats at `src` (the
  // backend's memory) to host memory at `dst` (src == dst on the host copies nothing). Returns
  // "" or the first failure since the previous ReadBack: ops return nothing, and a device
  // backend runs them asynchronously, so this is where a failed op is reported; the copy is not
  // made then.
  virtual std::string ReadBack(const float* src, size_t count, float* dst);
  // The same end of a pass for rows of which only the greedy choice is wanted: out[r] (host
  // memory) = kernels::ArgmaxRow of row r of src ([rows, cols] with row stride ld_src, the
  // backend's memory), so that a device sends `rows` ints across instead of rows × cols floats.
  // The default reads src on the host: a device backend overrides it.
  virtual std::string ReadBackArgmax(const float* src, int64_t ld_src, int64_t rows, int64_t cols,
                                     int32_t* out);
  // The same end of a pass for rows sampled where they are: out[r] (host memory) is what
  // kernels::RowSampler::Sample gives for row r of src ([rules.size(), cols], row stride
  // ld_src) under rules[r], with the penalty tokens seen[rules[r].penalties_begin,
  // penalties_end): the token, and the logprobs the rule asks for. A device computes the rule
  // without sorting (kernels/threshold_draw.h): the same token except where a cumulative
  // probability lies within rounding of a cut. The rows are left as they are. The default
  // samples on the host, with a RowSampler per thread.
  virtual std::string ReadBackSampled(const float* src, int64_t ld_src, int64_t cols,
                                      std::span<const SamplingRow> rules,
                                      std::span<const PenaltyToken> seen, SampledToken* out);

  // Readies the calling thread to issue this backend's work: a GPU backend makes its device the
  // thread's current one. A thread other than the creator's calls it before its first op.
  virtual void BindCallingThread() {}

  // y[M,N] = x[M,K] · w[N,K]ᵀ + bias (bias may be null), with K = w.cols and N = w.rows.
  virtual void Linear(const float* x, int64_t ld_x, int64_t m, const WeightMatrix& w,
                      const float* bias, float* y, int64_t ld_y) = 0;

  // Row movement, so that layer graphs never touch activations themselves (on a GPU they live in
  // device memory). out[i] = row ids[i] of `table` widened to fp32: an embedding lookup. `ids`
  // is host memory; each must be in [0, table.rows).
  virtual void GatherRows(const WeightMatrix& table, std::span<const int32_t> ids, float* out,
                          int64_t ld_out) = 0;
  // dst[r, 0:cols] = src[r, 0:cols] for `rows` rows (no overlap).
  virtual void CopyRows(const float* src, int64_t ld_src, int64_t rows, int64_t cols, float* dst,
                        int64_t ld_dst) = 0;
  // dst[r, 0:cols] += src[r, 0:cols] (a residual or adapter add).
  virtual void AddRows(const float* src, int64_t ld_src, int64_t rows, int64_t cols, float* dst,
                       int64_t ld_dst) = 0;
  // x[r, 0:cols] *= factor, in place, each product rounded to fp32 (Granite's embedding,
  // residual and logit multipliers: a scaled residual add is ScaleRows then AddRows, the two
  // roundings of transformers' `residual + x * m`).
  virtual void ScaleRows(float* x, int64_t ld_x, int64_t rows, int64_t cols, float factor) = 0;
  // x[r, 0:cols] /= divisor, in place, each quotient rounded (Granite's logits ÷ logits_scaling:
  // a division, not a product with the rounded reciprocal, to round as transformers does).
  virtual void DivideRows(float* x, int64_t ld_x, int64_t rows, int64_t cols, float divisor) = 0;
  // Rows picked by index (`rows` is host memory, no index twice): dst[i] = src[rows[i]], and its
  // inverse dst[rows[i]] = src[i]. By default one CopyRows per row (ops.cc); a device backend
  // does it in one launch.
  virtual void GatherRowsAt(const float* src, int64_t ld_src, std::span<const int32_t> rows,
                            int64_t cols, float* dst, int64_t ld_dst);
  virtual void ScatterRowsTo(const float* src, int64_t ld_src, std::span<const int32_t> rows,
                             int64_t cols, float* dst, int64_t ld_dst);

  // A host table (KV page pointers, a decode batch's state blocks or positions) as the kernels
  // read it: on the host the table itself; a device backend copies it into device memory from
  // `ws` (a device block table), valid until ws is reset or rewound past it.
  template <typename T>
  const T* Table(std::span<const T> host, Workspace& ws) {
    return static_cast<const T*>(TableBytes(host.data(), host.size_bytes(), ws));
  }
  virtual const void* TableBytes(const void* host, size_t bytes, Workspace& ws) { return host; }
  // Tables laid out by the caller in `device` (the backend's memory, from its Workspace) and
  // written at `host`: a device backend copies them over (asynchronously; `host` may be reused
  // at once); on the host, where the caller writes `device` itself, nothing is copied.
  virtual void UploadTables(void* device, const void* host, size_t bytes);

  // out = weight ⊙ x / sqrt(mean(x²) + eps), per row of `dim` values.
  virtual void RmsNorm(const float* x, int64_t ld_x, int64_t rows, int64_t dim,
                       const float* weight, float eps, float* out, int64_t ld_out) = 0;

  // Gated RMSNorm of Mamba-2: v = y ⊙ silu(z), normalised separately in each of `groups`
  // contiguous channel groups, then scaled by weight.
  virtual void GatedRmsNorm(const float* y, int64_t ld_y, const float* z, int64_t ld_z,
                            int64_t rows, int64_t dim, int32_t groups, const float* weight,
                            float eps, float* out, int64_t ld_out) = 0;

  // A norm whose values are spread over the workers of a tensor-parallel group
  // (models/tensor_parallel.h): each worker sums the squares of its part of each row
  // (sums[r] = Σ_c x[r,c]²: in double on the host, rounded once; in fp32 on a GPU, as its
  // RmsNorm sums), the workers add their sums
  // together, then each scales its part: x[r,c] = weight[c] · (x[r,c] / sqrt(sums[r] / count +
  // eps)), `count` being the whole row's width. `sums` is in the backend's memory. By default
  // on the host (ops.cc); a device backend overrides both.
  virtual void RowSquareSums(const float* x, int64_t ld_x, int64_t rows, int64_t cols, float* sums);
  virtual void RmsNormBySums(float* x, int64_t ld_x, int64_t rows, int64_t cols, const float* sums,
                             int64_t count, const float* weight, float eps);

  // In-place NeoX ("rotate_half") rotary embedding over the full head_dim of each head, for T rows
  // at positions start_pos … start_pos+T-1.
  virtual void Rope(float* x, int64_t ld_x, int64_t tokens, int32_t heads, int32_t head_dim,
                    int64_t start_pos, float theta) = 0;
  // The same for rows of many sequences: row r is at position positions[r] (a table in the
  // backend's memory, Ops::Table). The default makes one Rope call per run of consecutive
  // positions, reading the table on the host: a device backend overrides it.
  virtual void RopeAt(float* x, int64_t ld_x, int64_t rows, int32_t heads, int32_t head_dim,
                      const int64_t* positions, float theta);

  // x[r,c] = act(x[r,c]), in place (a plain, ungated MLP's activation).
  virtual void Activate(Activation act, float* x, int64_t ld_x, int64_t rows, int64_t cols) = 0;

  // out[r,c] = act(gate[r,c]) · up[r,c].
  virtual void GatedActivation(Activation act, const float* gate, int64_t ld_gate,
                               const float* up, int64_t ld_up, int64_t rows, int64_t cols,
                               float* out, int64_t ld_out) = 0;

  // Gated MLP: out = down(act(x·gateᵀ) ⊙ (x·upᵀ)) with gate_up [2I, H] (rows gate ‖ up),
  // down [H, I]. Scratch from `ws`. By default composed of Linear and GatedActivation (ops.cc),
  // which is what the fast backends want; the reference spells it out on its own.
  virtual void GatedMlp(Activation act, const float* x, int64_t ld_x, int64_t rows,
                        const WeightMatrix& gate_up, const WeightMatrix& down, float* out,
                        int64_t ld_out, Workspace& ws);

  virtual void Moe(const MoeArgs& args, Workspace& ws) = 0;

  // The full form of each recurrent op: T tokens of one sequence, or (args.sequences set) a
  // varlen call over many sequences, one call per layer for a whole pass.
  virtual void CausalConv1d(const CausalConvArgs& args) = 0;
  // The decode form of each recurrent op: one token of one sequence (tokens == 1), or one token
  // of each of `tokens` sequences at once with a state_table (a decode batch: one call per layer
  // instead of one per sequence). Each row's output and state are bit for bit what the full op
  // gives for that token alone.
  virtual void CausalConv1dStep(const CausalConvArgs& args) = 0;

  virtual void SelectiveScan(const SelectiveScanArgs& args) = 0;
  virtual void SelectiveStateUpdate(const SelectiveScanArgs& args) = 0;

  virtual void SsdScan(const SsdScanArgs& args, Workspace& ws) = 0;
  virtual void SsdStateUpdate(const SsdScanArgs& args) = 0;

  // Copies T rows of K and V (each [T, kv_heads·head_dim]) into the paged cache at positions
  // start_pos … start_pos+T-1. The pages must exist.
  virtual void WriteKv(const float* k, int64_t ld_k, const float* v, int64_t ld_v, int64_t tokens,
                       int64_t start_pos, const PagedKv& kv) = 0;
  // The same for rows of many sequences: row r goes to position positions[r] of the pages
  // page_tables[r] (tables in the backend's memory); `kv` gives the layout. The default makes
  // one WriteKv call per run of rows with the same pages and consecutive positions, reading the
  // tables on the host: a device backend overrides it.
  virtual void WriteKvAt(const float* k, int64_t ld_k, const float* v, int64_t ld_v,
                         int64_t rows, float* const* const* page_tables, const int64_t* positions,
                         const PagedKv& kv);

  virtual void Attention(const AttentionArgs& args, Workspace& ws) = 0;

  // Attention over a key range, with its log-sum-exp (see PartialAttentionArgs). Per row: cost
  // and memory traffic like Attention's.
  virtual void PartialAttention(const PartialAttentionArgs& args, Workspace& ws) = 0;

  // Attention of many sequences' decode rows over one shared key range (Hydragen's prefix part).
  virtual void SharedPrefixAttention(const SharedPrefixAttentionArgs& args, Workspace& ws) = 0;

  // Merges attention parts over disjoint key ranges of the same queries into the attention over
  // their union (docs/ARCHITECTURE.md, "Hydragen"), per row and head, stably in fp32:
  //   L = log Σ_i exp(lse_i),   out = Σ_i exp(lse_i − L)·out_i.
  // A part with lse = −inf weighs nothing (its out is not read). `lse` may be null; otherwise it
  // receives L, so merges chain. `out` may be parts[0].out with the same row stride.
  virtual void MergeAttention(std::span<const AttentionPart> parts, int64_t rows, int32_t heads,
                              int32_t head_dim, float* out, int64_t ld_out, float* lse,
                              int64_t ld_lse) = 0;

  // Exact Hydragen (docs/ARCHITECTURE.md, "Hydragen"). True where the two ops below are built and
  // a row's attention cut at page boundaries into AdvanceSharedAttention's ranges and a
  // FinishAttention gives, bit for bit, what Attention gives the row; the model then prefers
  // them to SharedPrefixAttention and MergeAttention. Backends without them keep the default.
  virtual bool ResumesAttentionExactly() const { return false; }
  // Advances the states of `args.rows` rows over their shared page-aligned range (args.out and
  // args.lse unused); `start` first empties them (max −inf, sum 0, acc 0). State row r belongs
  // to query row r.
  virtual void AdvanceSharedAttention(const SharedPrefixAttentionArgs& args,
                                      const AttentionState& state, bool start, Workspace& ws);
  // Resumes each row's state over its own keys (PartialAttentionArgs' batch form: page_tables,
  // key_begins, key_ends; lse unused) and writes the normalised output; the states are used up.
  virtual void FinishAttention(const PartialAttentionArgs& args, const AttentionState& state,
                               Workspace& ws);
};

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_OPS_H_
