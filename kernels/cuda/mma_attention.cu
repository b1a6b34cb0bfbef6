#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/key_splits.cuh"
#include "kernels/cuda/key_splits.h"
#include "kernels/cuda/mma_attention.h"
#include "kernels/cuda/paged_kv.cuh"
#include "kernels/cuda/shared_memory_limit.h"
#include "kernels/cuda/varlen_sequence.cuh"
#include "kernels/cuda/warp_math.cuh"

namespace tandem::kernels::cuda {
namespace {

// A block of four warps takes 64 virtual rows (a query row and one query head of its GQA group)
// of one KV head, 16 per warp (the m of the m16n8k8 product), and walks the keys in tiles of 32
// staged in shared memory; the scores and the online softmax stay in the warp's registers, and
// the probabilities go through shared memory to become the A operand of P·V.
constexpr int kMmaWarps = 4;
constexpr int kMmaThreads = kMmaWarps * kWarp;
constexpr int kMmaRows = 16 * kMmaWarps;
constexpr int kMmaKeys = 32;
// From this many virtual rows the tensor-core kernel is worth its tiles.
constexpr int64_t kMmaMinRows = 32;
// Key splits (for calls of few blocks over many keys, Hydragen's prefix) take at least this many
// keys each: the block stages its queries once per split, and the parts are merged after.
constexpr int64_t kMinMmaSplitKeys = 512;
// Blocks of the 128-dim tile (~112 KB of shared memory) resident on a multiprocessor at once:
// two on Hopper (228 KB); on Ampere (164 KB) one, where these splits make two full waves.
constexpr int64_t kMmaBlocksPerMultiprocessor = 2;

// Shared-memory row strides. The fragments read column tq (0-3) of rows g (0-7): with a stride
// of 4 (mod 32 banks) the 32 lanes hit 32 banks; P·V reads V's rows tq and columns g, which needs
// a stride of 8 (mod 32). Strides stay multiples of 4 for the 16-byte stores.
constexpr int Padded(int width, int residue) { return width + (residue - width % 32 + 32) % 32; }

template <int kHeadDim>
struct MmaTile {
  static constexpr int kQStride = Padded(kHeadDim, 4);
  static constexpr int kKStride = Padded(kHeadDim, 4);
  static constexpr int kVStride = Padded(kHeadDim, 8);
  static constexpr int kPStride = Padded(kMmaKeys, 4);
  static constexpr int kQFloats = kMmaRows * kQStride;
  // Keys and values are staged already split into their TF32 halves (big, then small): each is
  // read by all four warps, so splitting once as it lands saves the conversions per use.
  static constexpr int kKWords = kMmaKeys * kKStride;
  static constexpr int kVWords = kMmaKeys * kVStride;
  static constexpr int kPFloats = kMmaWarps * 16 * kPStride;
  static constexpr size_t kBytes =
      sizeof(float) * (kQFloats + 2 * kKWords + 2 * kVWords + kPFloats);
};

__device__ __forceinline__ uint32_t ToTf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

// x = big + small, each representable in TF32 (small holds the bits big rounds away).
__device__ __forceinline__ void SplitTf32(float x, uint32_t& big, uint32_t& small) {
  big = ToTf32(x);
  small = ToTf32(x - __uint_as_float(big));
}

__device__ __forceinline__ void MmaTf32(float (&d)[4], const uint32_t (&a)[4],
                                        const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// An A fragment (16 × 8, row-major) split into TF32 halves.
struct AFragment {
  uint32_t big[4], small[4];
  __device__ explicit AFragment(const float (&a)[4]) {
#pragma unroll
    for (int i = 0; i < 4; ++i) SplitTf32(a[i], big[i], small[i]);
  }
};

// d += a·b to about fp32 precision: big·small and small·big first (the small terms), then
// big·big; small·small lies below fp32 rounding. b comes split.
__device__ __forceinline__ void Mma3xTf32(float (&d)[4], const AFragment& a,
                                          const uint32_t (&b_big)[2],
                                          const uint32_t (&b_small)[2]) {
  MmaTf32(d, a.small, b_big);
  MmaTf32(d, a.big, b_small);
  MmaTf32(d, a.big, b_big);
}

// Stores x rounded to TF32 at big: four consecutive elements.
__device__ __forceinline__ void StoreTf32(float4 x, uint32_t* big) {
  *reinterpret_cast<uint4*>(big) = make_uint4(ToTf32(x.x), ToTf32(x.y), ToTf32(x.z), ToTf32(x.w));
}

// Stores x's TF32 halves at big[i], small[i]: four consecutive elements.
__device__ __forceinline__ void StoreSplit(float4 x, uint32_t* big, uint32_t* small) {
  uint4 b, s;
  SplitTf32(x.x, b.x, s.x);
  SplitTf32(x.y, b.y, s.y);
  SplitTf32(x.z, b.z, s.z);
  SplitTf32(x.w, b.w, s.w);
  *reinterpret_cast<uint4*>(big) = b;
  *reinterpret_cast<uint4*>(small) = s;
}

// The keys virtual row v may see: [key_begin, limit).
__device__ __forceinline__ int64_t RowLimit(const PartialAttentionArgs& a, int64_t v,
                                            int32_t group) {
  if (v >= a.rows * group) return a.key_begin;  // a row past the end sees nothing
  return a.causal ? min(a.key_end, a.start_pos + v / group + 1) : a.key_end;
}

// Block (blockIdx.x, KV head blockIdx.y) of the call: split `split` of `splits` of the keys
// (SplitSpan), its output to d. kExact: three TF32 products per product; else one (the big
// halves alone, TensorCorePrecision::kTf32).
template <int kHeadDim, bool kExact>
__device__ void MmaAttend(const PartialAttentionArgs& a, const SplitDest& d, int split,
                          int splits) {
  using Tile = MmaTile<kHeadDim>;
  extern __shared__ float4 shared4[];
  float* shared = reinterpret_cast<float*>(shared4);
  auto qs = reinterpret_cast<float(*)[Tile::kQStride]>(shared);
  uint32_t* words = reinterpret_cast<uint32_t*>(shared + Tile::kQFloats);
  auto k_big = reinterpret_cast<uint32_t(*)[Tile::kKStride]>(words);
  auto k_small = reinterpret_cast<uint32_t(*)[Tile::kKStride]>(words + Tile::kKWords);
  auto v_big = reinterpret_cast<uint32_t(*)[Tile::kVStride]>(words + 2 * Tile::kKWords);
  auto v_small =
      reinterpret_cast<uint32_t(*)[Tile::kVStride]>(words + 2 * Tile::kKWords + Tile::kVWords);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int g = lane >> 2, tq = lane & 3;  // the fragment coordinates of mma.m16n8k8
  auto ps = reinterpret_cast<float(*)[Tile::kPStride]>(
      shared + Tile::kQFloats + 2 * Tile::kKWords + 2 * Tile::kVWords + warp * 16 * Tile::kPStride);
  const int32_t kv_head = blockIdx.y, group = a.heads / a.kv.num_kv_heads;
  const int64_t virtual_rows = a.rows * group, v0 = int64_t{blockIdx.x} * kMmaRows;
  constexpr int kVec = kHeadDim / 4;

  for (int i = threadIdx.x; i < kMmaRows * kVec; i += kMmaThreads) {
    const int r = i / kVec, e = (i % kVec) * 4;
    const int64_t v = v0 + r;
    float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (v < virtual_rows) {
      const int64_t t = v / group;
      const int32_t head = kv_head * group + static_cast<int32_t>(v % group);
      x = *reinterpret_cast<const float4*>(a.q + t * a.ld_q + int64_t{head} * kHeadDim + e);
    }
    *reinterpret_cast<float4*>(&qs[r][e]) = x;
  }

  // This split's keys; this thread's two rows of the warp's 16 (g and g + 8) see them up to
  // their limits.
  const KeySpan span = SplitSpan(a.key_begin, a.key_end, split, splits);
  const int row0 = warp * 16 + g;
  const int64_t limit[2] = {min(span.end, RowLimit(a, v0 + row0, group)),
                            min(span.end, RowLimit(a, v0 + row0 + 8, group))};
  // Rows grow with t, so the block's last live row sees the most keys.
  const int64_t last = min(virtual_rows, v0 + kMmaRows) - 1;
  const int64_t tile_end = min(span.end, RowLimit(a, last, group));

  float o[kHeadDim / 8][4];
#pragma unroll
  for (int n = 0; n < kHeadDim / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};

  // The next tile's keys and values are loaded into registers while this one is multiplied, so
  // the loads' latency hides behind the tensor cores instead of stalling the block at each tile.
  constexpr int kLoads = kMmaKeys * kVec / kMmaThreads;
  static_assert(kMmaKeys * kVec % kMmaThreads == 0, "a tile is whole float4s per thread");
  float4 next_keys[kLoads], next_values[kLoads];
  auto load_tile = [&](int64_t k0) {
#pragma unroll
    for (int l = 0; l < kLoads; ++l) {
      const int i = threadIdx.x + l * kMmaThreads;
      const int64_t pos = k0 + i / kVec;
      const int e = (i % kVec) * 4;
      next_keys[l] = next_values[l] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (pos < tile_end) {
        next_keys[l] = *reinterpret_cast<const float4*>(KeyAt(a.kv, pos, kv_head) + e);
        next_values[l] = *reinterpret_cast<const float4*>(ValueAt(a.kv, pos, kv_head) + e);
      }
    }
  };
  if (span.begin < tile_end) load_tile(span.begin);

  for (int64_t k0 = span.begin; k0 < tile_end; k0 += kMmaKeys) {
    __syncthreads();  // the previous tile is consumed (and, the first time, qs is written)
#pragma unroll
    for (int l = 0; l < kLoads; ++l) {
      const int i = threadIdx.x + l * kMmaThreads;
      const int j = i / kVec, e = (i % kVec) * 4;
      if constexpr (kExact) {
        StoreSplit(next_keys[l], &k_big[j][e], &k_small[j][e]);
        StoreSplit(next_values[l], &v_big[j][e], &v_small[j][e]);
      } else {
        StoreTf32(next_keys[l], &k_big[j][e]);
        StoreTf32(next_values[l], &v_big[j][e]);
      }
    }
    __syncthreads();
    if (k0 + kMmaKeys < tile_end) load_tile(k0 + kMmaKeys);

    // S = Q·Kᵀ for the warp's 16 rows and the tile's 32 keys (four n-tiles of 8 keys). The
    // small terms accumulate apart from big·big: two independent chains of products per n-tile
    // instead of one, which the tensor cores' latency wants.
    float s[kMmaKeys / 8][4], s_small[kMmaKeys / 8][4];
#pragma unroll
    for (int n = 0; n < kMmaKeys / 8; ++n) {
#pragma unroll
      for (int i = 0; i < 4; ++i) s[n][i] = s_small[n][i] = 0.0f;
    }
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 8; ++kk) {
      const int c = kk * 8 + tq;
      const float af[4] = {qs[row0][c], qs[row0 + 8][c], qs[row0][c + 4], qs[row0 + 8][c + 4]};
      const AFragment q_frag(af);
#pragma unroll
      for (int n = 0; n < kMmaKeys / 8; ++n) {
        const uint32_t big[2] = {k_big[n * 8 + g][c], k_big[n * 8 + g][c + 4]};
        if constexpr (kExact) {
          const uint32_t small[2] = {k_small[n * 8 + g][c], k_small[n * 8 + g][c + 4]};
          MmaTf32(s_small[n], q_frag.small, big);
          MmaTf32(s_small[n], q_frag.big, small);
        }
        MmaTf32(s[n], q_frag.big, big);
      }
    }
#pragma unroll
    for (int n = 0; n < kMmaKeys / 8; ++n) {
#pragma unroll
      for (int i = 0; i < 4; ++i) s[n][i] += s_small[n][i];
    }

    // The online softmax: this thread holds, per n-tile, keys 2tq and 2tq+1 of rows g (s[n][0],
    // s[n][1]) and g + 8 (s[n][2], s[n][3]); a row's four threads are lanes 4g .. 4g+3.
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < kMmaKeys / 8; ++n) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t key = k0 + n * 8 + 2 * tq + (i & 1);
        const int r = i >> 1;
        s[n][i] = key < limit[r] ? s[n][i] * a.scale : -INFINITY;
        tile_max[r] = fmaxf(tile_max[r], s[n][i]);
      }
    }
    float rescale[2], tile_sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
      const float new_max = fmaxf(row_max[r], tile_max[r]);
      rescale[r] = new_max == -INFINITY ? 1.0f : expf(row_max[r] - new_max);
      row_max[r] = new_max;
    }
#pragma unroll
    for (int n = 0; n < kMmaKeys / 8; ++n) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = i >> 1;
        const float p = row_max[r] == -INFINITY ? 0.0f : expf(s[n][i] - row_max[r]);
        tile_sum[r] += p;
        ps[g + 8 * r][n * 8 + 2 * tq + (i & 1)] = p;
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      tile_sum[r] += __shfl_xor_sync(0xffffffffu, tile_sum[r], 1);
      tile_sum[r] += __shfl_xor_sync(0xffffffffu, tile_sum[r], 2);
      row_sum[r] = row_sum[r] * rescale[r] + tile_sum[r];
    }
#pragma unroll
    for (int n = 0; n < kHeadDim / 8; ++n) {
      o[n][0] *= rescale[0], o[n][1] *= rescale[0];
      o[n][2] *= rescale[1], o[n][3] *= rescale[1];
    }
    __syncwarp();

    // O += P·V: P is the warp's 16 × 32 block of ps, V the tile's 32 × head_dim.
#pragma unroll
    for (int kk = 0; kk < kMmaKeys / 8; ++kk) {
      const int c = kk * 8 + tq;
      const float af[4] = {ps[g][c], ps[g + 8][c], ps[g][c + 4], ps[g + 8][c + 4]};
      const AFragment p_frag(af);
#pragma unroll
      for (int n = 0; n < kHeadDim / 8; ++n) {
        const uint32_t big[2] = {v_big[c][n * 8 + g], v_big[c + 4][n * 8 + g]};
        if constexpr (kExact) {
          const uint32_t small[2] = {v_small[c][n * 8 + g], v_small[c + 4][n * 8 + g]};
          Mma3xTf32(o[n], p_frag, big, small);
        } else {
          MmaTf32(o[n], p_frag.big, big);
        }
      }
    }
    __syncwarp();  // every lane has read ps before the next tile rewrites it
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t v = v0 + row0 + 8 * r;
    if (v >= virtual_rows) continue;
    const int64_t t = v / group;
    const int32_t head = kv_head * group + static_cast<int32_t>(v % group);
    float* out = d.Out(split, t, head, kHeadDim);
    const float sum = row_sum[r];
#pragma unroll
    for (int n = 0; n < kHeadDim / 8; ++n) {
      out[n * 8 + 2 * tq] = sum > 0.0f ? o[n][2 * r] / sum : 0.0f;
      out[n * 8 + 2 * tq + 1] = sum > 0.0f ? o[n][2 * r + 1] / sum : 0.0f;
    }
    float* lse = d.Lse(split, t, head);
    if (tq == 0 && lse != nullptr) *lse = sum > 0.0f ? row_max[r] + logf(sum) : -INFINITY;
  }
}

template <int kHeadDim, bool kExact>
__global__ void __launch_bounds__(kMmaThreads, kMmaBlocksPerMultiprocessor)
    MmaAttentionKernel(PartialAttentionArgs a, SplitDest d, int splits) {
  MmaAttend<kHeadDim, kExact>(a, d, blockIdx.z, splits);
}

// A varlen pass (AttentionArgs::cu_seqlens): blockIdx.z is the sequence; blocks past its rows
// return.
template <int kHeadDim, bool kExact>
__global__ void __launch_bounds__(kMmaThreads, kMmaBlocksPerMultiprocessor)
    VarlenMmaAttentionKernel(AttentionArgs a) {
  const PartialAttentionArgs p = SequenceOf(a, blockIdx.z);
  if (int64_t{blockIdx.x} * kMmaRows >= p.rows * (a.heads / a.kv.num_kv_heads)) return;
  const SplitDest d{p.out, p.ld_out, 0, nullptr, 0, 0};
  MmaAttend<kHeadDim, kExact>(p, d, 0, 1);
}

template <int kHeadDim, bool kExact>
cudaError_t Launch(cudaStream_t stream, const PartialAttentionArgs& a, const KeySplits& splits) {
  constexpr size_t bytes = MmaTile<kHeadDim>::kBytes;
  // More than the 48 KB of shared memory a launch gets without asking.
  const cudaError_t set = AllowSharedMemory<MmaAttentionKernel<kHeadDim, kExact>>(bytes);
  if (set != cudaSuccess) return set;
  const int64_t virtual_rows = a.rows * (a.heads / a.kv.num_kv_heads);
  const dim3 grid(Blocks(virtual_rows, kMmaRows), static_cast<unsigned>(a.kv.num_kv_heads),
                  static_cast<unsigned>(splits.count));
  const SplitDest d =
      SplitDest::For(splits, a.rows, a.heads, kHeadDim, a.out, a.ld_out, a.lse, a.ld_lse);
  MmaAttentionKernel<kHeadDim, kExact><<<grid, kMmaThreads, bytes, stream>>>(a, d, splits.count);
  const cudaError_t launched = cudaGetLastError();
  if (launched != cudaSuccess) return launched;
  return MergeKeySplits(stream, splits, a.rows, a.heads, kHeadDim, a.out, a.ld_out, a.lse,
                        a.ld_lse);
}

template <int kHeadDim, bool kExact>
cudaError_t LaunchVarlen(cudaStream_t stream, const AttentionArgs& a) {
  constexpr size_t bytes = MmaTile<kHeadDim>::kBytes;
  const cudaError_t set = AllowSharedMemory<VarlenMmaAttentionKernel<kHeadDim, kExact>>(bytes);
  if (set != cudaSuccess) return set;
  const dim3 grid(Blocks(a.max_seqlen * (a.heads / a.kv.num_kv_heads), kMmaRows),
                  static_cast<unsigned>(a.kv.num_kv_heads), static_cast<unsigned>(a.sequences));
  VarlenMmaAttentionKernel<kHeadDim, kExact><<<grid, kMmaThreads, bytes, stream>>>(a);
  return cudaGetLastError();
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

bool HeadDimBuilt(int32_t dh) { return dh == 64 || dh == 80 || dh == 96 || dh == 128; }

// The tile's shared memory for a built head dim.
size_t TileBytes(int32_t dh) {
  switch (dh) {
    case 64:
      return MmaTile<64>::kBytes;
    case 80:
      return MmaTile<80>::kBytes;
    case 96:
      return MmaTile<96>::kBytes;
    default:
      return MmaTile<128>::kBytes;
  }
}

// A built head dim whose tile fits the device's shared memory (the 128-dim tile's ~112 KB does
// not on sm_86 / sm_89 parts, which then take the CUDA-core kernels).
bool HeadDimRuns(int32_t dh) {
  return HeadDimBuilt(dh) && TileBytes(dh) <= BlockSharedMemoryLimit();
}

}  // namespace

bool MmaAttentionFits(const PartialAttentionArgs& a) {
  if (a.page_tables != nullptr || a.kv.num_kv_heads <= 0 || a.heads % a.kv.num_kv_heads != 0) {
    return false;
  }
  return HeadDimRuns(a.kv.head_dim) && a.ld_q % 4 == 0 && Aligned16(a.q) &&
         a.kv.layer_offset % 4 == 0 && a.kv.num_kv_heads <= 65535;
}

bool MmaAttentionTakes(const PartialAttentionArgs& a) {
  return MmaAttentionFits(a) && a.rows * (a.heads / a.kv.num_kv_heads) >= kMmaMinRows;
}

bool VarlenMmaAttentionFits(const AttentionArgs& a) {
  // max_seqlen sizes the grid: every sequence's rows must be within it.
  if (a.sequences <= 0 || a.sequences > 65535 || a.cu_seqlens == nullptr ||
      a.page_tables == nullptr || a.positions == nullptr || a.kv.num_kv_heads <= 0 ||
      a.heads % a.kv.num_kv_heads != 0 || a.max_seqlen < 1) {
    return false;
  }
  return HeadDimRuns(a.kv.head_dim) && a.ld_q % 4 == 0 && Aligned16(a.q) &&
         a.kv.layer_offset % 4 == 0 && a.kv.num_kv_heads <= 65535;
}

bool VarlenMmaAttentionTakes(const AttentionArgs& a) {
  return VarlenMmaAttentionFits(a) && a.max_seqlen * (a.heads / a.kv.num_kv_heads) >= kMmaMinRows;
}

int MmaAttentionSplits(const PartialAttentionArgs& a, int multiprocessors) {
  if (!MmaAttentionTakes(a)) return 1;
  const int64_t blocks =
      int64_t{Blocks(a.rows * (a.heads / a.kv.num_kv_heads), kMmaRows)} * a.kv.num_kv_heads;
  // As many splits as fill the resident slots once (a second, partial wave would leave most of
  // the GPU idle while it runs), each split at least kMinMmaSplitKeys keys.
  const int64_t slots = int64_t{multiprocessors} * kMmaBlocksPerMultiprocessor;
  const int64_t fill = slots / blocks;
  const int64_t most = (a.key_end - a.key_begin) / kMinMmaSplitKeys;
  return static_cast<int>(std::clamp<int64_t>(std::min(fill, most), 1, kMaxKeySplits));
}

namespace {

// launch.template operator()<kHeadDim, kExact>() for the call's head dim and precision.
template <typename Launcher>
cudaError_t ForHeadDim(int32_t head_dim, TensorCorePrecision precision, Launcher launch) {
  const bool exact = precision == TensorCorePrecision::kFp32;
  switch (head_dim) {
    case 64:
      return exact ? launch.template operator()<64, true>()
                   : launch.template operator()<64, false>();
    case 80:
      return exact ? launch.template operator()<80, true>()
                   : launch.template operator()<80, false>();
    case 96:
      return exact ? launch.template operator()<96, true>()
                   : launch.template operator()<96, false>();
    default:
      return exact ? launch.template operator()<128, true>()
                   : launch.template operator()<128, false>();
  }
}

}  // namespace

cudaError_t LaunchMmaAttention(cudaStream_t stream, const PartialAttentionArgs& a,
                               const KeySplits& splits, TensorCorePrecision precision) {
  // Fits, not Takes: the batch-invariant mode sends rows too few to fill a tile here as well
  // (the fast mode checks Takes before it calls).
  if (!MmaAttentionFits(a) || splits.count < 1 || splits.count > kMaxKeySplits ||
      (splits.count > 1 && (splits.out == nullptr || splits.lse == nullptr))) {
    return cudaErrorInvalidValue;
  }
  return ForHeadDim(a.kv.head_dim, precision, [&]<int kHeadDim, bool kExact>() {
    return Launch<kHeadDim, kExact>(stream, a, splits);
  });
}

cudaError_t LaunchVarlenMmaAttention(cudaStream_t stream, const AttentionArgs& a,
                                     TensorCorePrecision precision) {
  if (!VarlenMmaAttentionFits(a)) return cudaErrorInvalidValue;
  return ForHeadDim(a.kv.head_dim, precision, [&]<int kHeadDim, bool kExact>() {
    return LaunchVarlen<kHeadDim, kExact>(stream, a);
  });
}

}  // namespace tandem::kernels::cuda
