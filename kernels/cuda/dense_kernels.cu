#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/dense_kernels.h"
#include "kernels/cuda/warp_math.cuh"

namespace tandem::kernels::cuda {
namespace {

constexpr int kNormThreads = 256;

bool Aligned(const void* p, size_t alignment) {
  return reinterpret_cast<uintptr_t>(p) % alignment == 0;
}

// The sum of `v` over the block, returned to every thread. Starts with a barrier so that calls
// may follow one another (the partials are reused).
__device__ float BlockSum(float v) {
  __shared__ float partial[kNormThreads / kWarp];
  __shared__ float total;
  __syncthreads();
  v = WarpSum(v);
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = WarpSum(lane < kNormThreads / kWarp ? partial[lane] : 0.0f);
    if (lane == 0) total = v;
  }
  __syncthreads();
  return total;
}

__device__ float Silu(float x) { return x / (1.0f + expf(-x)); }
__device__ float Gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f)); }
// The product rounded on its own, as the host's (no contraction to speak of here: nothing to add).
__device__ float ReluSquared(float x) { return x > 0.0f || x != x ? __fmul_rn(x, x) : 0.0f; }
__device__ float Activated(Activation act, float x) {
  switch (act) {
    case Activation::kSilu:
      return Silu(x);
    case Activation::kGelu:
      return Gelu(x);
    case Activation::kReluSquared:
      return ReluSquared(x);
  }
  return x;
}

// One block per row.
__global__ void RmsNormKernel(const float* x, int64_t ld_x, int64_t dim, const float* weight,
                              float eps, float* out, int64_t ld_out) {
  const float* xr = x + blockIdx.x * ld_x;
  float* o = out + blockIdx.x * ld_out;
  float ss = 0.0f;
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) ss += xr[c] * xr[c];
  ss = BlockSum(ss);
  const float inv = static_cast<float>(1.0 / sqrt(static_cast<double>(ss) / dim + eps));
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) o[c] = weight[c] * (xr[c] * inv);
}

// One block per row: the row's sum of squares.
__global__ void RowSquareSumsKernel(const float* x, int64_t ld_x, int64_t cols, float* sums) {
  const float* xr = x + blockIdx.x * ld_x;
  float ss = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) ss += xr[c] * xr[c];
  ss = BlockSum(ss);
  if (threadIdx.x == 0) sums[blockIdx.x] = ss;
}

__global__ void RmsNormBySumsKernel(float* x, int64_t ld_x, int64_t cols, const float* sums,
                                    int64_t count, const float* weight, float eps) {
  float* xr = x + blockIdx.x * ld_x;
  const float inv =
      static_cast<float>(1.0 / sqrt(static_cast<double>(sums[blockIdx.x]) / count + eps));
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) xr[c] = weight[c] * (xr[c] * inv);
}

// One block per (row, group): v = y ⊙ silu(z) is recomputed in the second pass rather than
// kept, so any group width fits.
__global__ void GatedRmsNormKernel(const float* y, int64_t ld_y, const float* z, int64_t ld_z,
                                   int64_t group_size, const float* weight, float eps, float* out,
                                   int64_t ld_out) {
  const int64_t row = blockIdx.x, c0 = blockIdx.y * group_size;
  const float* yr = y + row * ld_y + c0;
  const float* zr = z + row * ld_z + c0;
  float ss = 0.0f;
  for (int64_t c = threadIdx.x; c < group_size; c += blockDim.x) {
    const float v = yr[c] * Silu(zr[c]);
    ss += v * v;
  }
  ss = BlockSum(ss);
  const float inv = static_cast<float>(1.0 / sqrt(static_cast<double>(ss) / group_size + eps));
  float* o = out + row * ld_out + c0;
  for (int64_t c = threadIdx.x; c < group_size; c += blockDim.x) {
    o[c] = weight[c0 + c] * ((yr[c] * Silu(zr[c])) * inv);
  }
}

// One block per (token, head), one thread per rotated pair. The frequency and angle are rounded
// to fp32 as in transformers; cos/sin of that angle in double, as the CPU backends do.
// Row t is at position start_pos + t, or positions[t] when given (a decode batch).
__global__ void RopeKernel(float* x, int64_t ld_x, int32_t head_dim, int64_t start_pos,
                           const int64_t* positions, float theta) {
  const int32_t half = head_dim / 2, i = threadIdx.x;
  if (i >= half) return;
  float* v = x + blockIdx.x * ld_x + int64_t{blockIdx.y} * head_dim;
  const float inv_freq =
      1.0f / powf(theta, static_cast<float>(2 * i) / static_cast<float>(head_dim));
  const int64_t position = positions != nullptr ? positions[blockIdx.x] : start_pos + blockIdx.x;
  const float angle = static_cast<float>(position) * inv_freq;
  const float c = static_cast<float>(cos(static_cast<double>(angle)));
  const float s = static_cast<float>(sin(static_cast<double>(angle)));
  const float a = v[i], b = v[i + half];
  v[i] = a * c - b * s;
  v[i + half] = b * c + a * s;
}

__global__ void GatedActivationKernel(Activation act, const float* gate, int64_t ld_gate,
                                      const float* up, int64_t ld_up, int64_t rows, int64_t cols,
                                      float* out, int64_t ld_out) {
  const int64_t total = rows * cols;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = e / cols, c = e % cols;
    const float g = gate[r * ld_gate + c];
    out[r * ld_out + c] = Activated(act, g) * up[r * ld_up + c];
  }
}

__global__ void ActivateKernel(Activation act, float* x, int64_t ld_x, int64_t rows,
                               int64_t cols) {
  const int64_t total = rows * cols;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    float& v = x[(e / cols) * ld_x + e % cols];
    v = Activated(act, v);
  }
}

// The weight element type of a format: what one weight occupies in a row.
template <WeightFormat F>
using WeightElement =
    std::conditional_t<F == WeightFormat::kF32, float,
                       std::conditional_t<F == WeightFormat::kI8, int8_t, uint16_t>>;

// One weight element widened to fp32 (int8 unscaled: the row scale is applied to the sum).
template <WeightFormat F>
__device__ float LoadWeight(const void* row, int64_t p) {
  if constexpr (F == WeightFormat::kF32) {
    return static_cast<const float*>(row)[p];
  } else if constexpr (F == WeightFormat::kBF16) {
    return __uint_as_float(static_cast<uint32_t>(static_cast<const uint16_t*>(row)[p]) << 16);
  } else if constexpr (F == WeightFormat::kF16) {
    return __half2float(__ushort_as_half(static_cast<const uint16_t*>(row)[p]));
  } else {
    return static_cast<float>(static_cast<const int8_t*>(row)[p]);
  }
}

// One block per output row, threads over its columns.
template <WeightFormat F>
__global__ void GatherRowsKernel(const void* table, const float* row_scales, int64_t cols,
                                 const int32_t* ids, float* out, int64_t ld_out) {
  const int64_t row = ids[blockIdx.x];
  const void* src = static_cast<const WeightElement<F>*>(table) + row * cols;
  const float scale = F == WeightFormat::kI8 ? row_scales[row] : 1.0f;
  float* o = out + blockIdx.x * ld_out;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) o[c] = scale * LoadWeight<F>(src, c);
}

// add = false: dst = src; add = true: dst += src. Grid-stride over rows × cols.
__global__ void RowsKernel(bool add, const float* src, int64_t ld_src, int64_t rows, int64_t cols,
                           float* dst, int64_t ld_dst) {
  const int64_t total = rows * cols;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = e / cols, c = e % cols;
    const float v = src[r * ld_src + c];
    dst[r * ld_dst + c] = add ? dst[r * ld_dst + c] + v : v;
  }
}

__global__ void ScaleRowsKernel(float* x, int64_t ld_x, int64_t rows, int64_t cols,
                                float factor, bool divide) {
  const int64_t total = rows * cols;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    float& v = x[(e / cols) * ld_x + e % cols];
    v = divide ? __fdiv_rn(v, factor) : __fmul_rn(v, factor);
  }
}

// One block per listed row: dst[i] = src[rows[i]] (gather) or dst[rows[i]] = src[i].
__global__ void IndexedCopyKernel(bool scatter, const float* src, int64_t ld_src,
                                  const int32_t* rows, int64_t cols, float* dst, int64_t ld_dst) {
  const int64_t i = blockIdx.x, r = rows[i];
  const float* s = src + (scatter ? i : r) * ld_src;
  float* d = dst + (scatter ? r : i) * ld_dst;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) d[c] = s[c];
}

cudaError_t LaunchRows(cudaStream_t stream, bool add, const float* src, int64_t ld_src,
                       int64_t rows, int64_t cols, float* dst, int64_t ld_dst) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  const int threads = 256;
  const unsigned blocks =
      static_cast<unsigned>(std::min<int64_t>((rows * cols + threads - 1) / threads, 65535));
  RowsKernel<<<blocks, threads, 0, stream>>>(add, src, ld_src, rows, cols, dst, ld_dst);
  return cudaGetLastError();
}

constexpr int kLinearRows = 8;   // x rows per tile: one weight read serves all of them
constexpr int kLinearWarps = 8;  // output columns per block

// Output j of a row from its dot product: int8's row scale, then the bias, each rounded on its
// own. Left to nvcc the two could fuse into one multiply-add in one kernel instantiation and not
// in another, and a row's bits would depend on the instantiation its batch took (seen on an H200
// between the one-row and eight-row decode kernels).
template <WeightFormat F>
__device__ __forceinline__ float LinearOutput(float dot, const float* row_scales, const float* bias,
                                              int64_t j) {
  const float scaled = F == WeightFormat::kI8 ? __fmul_rn(dot, row_scales[j]) : dot;
  return bias != nullptr ? __fadd_rn(scaled, bias[j]) : scaled;
}

// Warp w of block (bx, by) computes y[by·8 .. by·8+7][bx·8 + w]: its lanes stride over k, so
// the weight row is read coalesced, and each lane keeps one partial sum per x row.
template <WeightFormat F>
__device__ void LinearTile(const float* x, int64_t ld_x, int64_t m, const void* w,
                           const float* row_scales, int64_t n, int64_t k, const float* bias,
                           float* y, int64_t ld_y, int64_t tile) {
  const int lane = threadIdx.x % kWarp;
  const int64_t j = int64_t{blockIdx.x} * kLinearWarps + threadIdx.x / kWarp;
  const int64_t r0 = tile * kLinearRows;
  if (j >= n) return;
  const int rows = m - r0 < kLinearRows ? static_cast<int>(m - r0) : kLinearRows;
  const void* wrow = static_cast<const WeightElement<F>*>(w) + j * k;
  float acc[kLinearRows] = {};
  const float* xb = x + r0 * ld_x;
  for (int64_t p = lane; p < k; p += kWarp) {
    const float wv = LoadWeight<F>(wrow, p);
#pragma unroll
    for (int r = 0; r < kLinearRows; ++r) {
      if (r < rows) acc[r] += xb[r * ld_x + p] * wv;
    }
  }
#pragma unroll
  for (int r = 0; r < kLinearRows; ++r) {
    if (r >= rows) break;  // the tile's missing rows: no sums to add up (a decode step has one)
    const float s = WarpSum(acc[r]);
    if (lane == 0) y[(r0 + r) * ld_y + j] = LinearOutput<F>(s, row_scales, bias, j);
  }
}

template <WeightFormat F>
__global__ void LinearKernel(const float* x, int64_t ld_x, int64_t m, const void* w,
                             const float* row_scales, int64_t n, int64_t k, const float* bias,
                             float* y, int64_t ld_y) {
  LinearTile<F>(x, ld_x, m, w, row_scales, n, k, bias, y, ld_y, blockIdx.y);
}

// Weight elements in 16 bytes: what one lane loads at a time in the vectorised decode kernel.
template <WeightFormat F>
constexpr int kWeightsPer16Bytes = F == WeightFormat::kF32  ? 4
                                   : F == WeightFormat::kI8 ? 16
                                                            : 8;

// 16 bytes of a weight row from element p (a multiple of kWeightsPer16Bytes), as loaded.
template <WeightFormat F>
__device__ __forceinline__ uint4 LoadRaw16(const void* row, int64_t p) {
  return *reinterpret_cast<const uint4*>(static_cast<const WeightElement<F>*>(row) + p);
}

// 16 loaded bytes widened to fp32 (int8 unscaled, as LoadWeight).
template <WeightFormat F>
__device__ __forceinline__ void Widen16(const uint4& v, float (&out)[kWeightsPer16Bytes<F>]) {
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
  if constexpr (F == WeightFormat::kF32) {
#pragma unroll
    for (int i = 0; i < 4; ++i) out[i] = __uint_as_float(words[i]);
  } else if constexpr (F == WeightFormat::kI8) {
    // Without int-to-float conversions, which an SM runs at 16 a clock (as many as 16 bytes of
    // weights take to arrive at full bandwidth): each byte, its sign bit flipped (b + 128, 0 to
    // 255), becomes the low mantissa byte of 2^23, and 2^23 + 128 is subtracted. Every step is
    // exact, so the value is the conversion's.
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t biased = words[i] ^ 0x80808080u;
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const uint32_t bits = __byte_perm(biased, 0x4B000000u, 0x7440u + b);
        out[4 * i + b] = __fsub_rn(__uint_as_float(bits), 8388736.0f);
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if constexpr (F == WeightFormat::kBF16) {
        out[2 * i] = __uint_as_float(words[i] << 16);
        out[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
      } else {
        const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&words[i]));
        out[2 * i] = f.x, out[2 * i + 1] = f.y;
      }
    }
  }
}

// Steps of a lane's 16-byte weight loads issued before the first of them is used: with one
// step (what the compiler made of an unrolled loop) a bf16 row moved at 0.5 of the copy
// bandwidth on an H200, the loads of a warp's short life too few to cover the memory's latency.
constexpr int kVectorLinearSteps = 4;

// LinearTile with 16-byte loads: a lane takes kWeightsPer16Bytes consecutive weights (and the
// same x elements, as float4s) per step, so a warp moves 512 bytes of weights per load instead
// of 32 × one element (64 bytes in bf16, 32 in int8), which left decode far below the memory
// bandwidth. Needs k a multiple of kWeightsPer16Bytes and 16-byte aligned rows of x and of W
// (checked by the launch). The per-row sums are fixed by k alone, as in LinearTile: the loads
// run ahead in groups of kVectorLinearSteps, the arithmetic is each step's in order, one fused
// multiply-add per weight into the row's sum, spelled out so that every instantiation (kRows 1
// for a decode step, kLinearRows otherwise: a row's registers bound the occupancy) gives a row
// the same bits.
template <WeightFormat F, int kCols, int kRows>
__global__ void VectorLinearKernel(const float* x, int64_t ld_x, int64_t m, const void* w,
                                   const float* row_scales, int64_t n, int64_t k, const float* bias,
                                   float* y, int64_t ld_y) {
  constexpr int kPer = kWeightsPer16Bytes<F>;
  constexpr int64_t kStride = int64_t{kWarp} * kPer;  // weights a warp's step covers
  const int lane = threadIdx.x % kWarp;
  const int64_t j0 = (int64_t{blockIdx.x} * kLinearWarps + threadIdx.x / kWarp) * kCols;
  const int64_t r0 = int64_t{blockIdx.y} * kRows;
  if (j0 >= n) return;
  const int rows = m - r0 < kRows ? static_cast<int>(m - r0) : kRows;
  // A warp's last columns past n re-read column j0 (their sums are not written).
  const void* wrow[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
    wrow[c] = static_cast<const WeightElement<F>*>(w) + (j0 + c < n ? j0 + c : j0) * k;
  }
  const float* xb = x + r0 * ld_x;
  float acc[kCols][kRows] = {};
  for (int64_t base = int64_t{lane} * kPer; base < k; base += kVectorLinearSteps * kStride) {
    uint4 raw[kVectorLinearSteps][kCols];
#pragma unroll
    for (int step = 0; step < kVectorLinearSteps; ++step) {
      const int64_t p = base + step * kStride;
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        raw[step][c] = p < k ? LoadRaw16<F>(wrow[c], p) : make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int step = 0; step < kVectorLinearSteps; ++step) {
      const int64_t p = base + step * kStride;
      if (p >= k) break;
      float wv[kCols][kPer];
#pragma unroll
      for (int c = 0; c < kCols; ++c) Widen16<F>(raw[step][c], wv[c]);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        if (r < rows) {
          const float4* xr = reinterpret_cast<const float4*>(xb + r * ld_x + p);
#pragma unroll
          for (int q = 0; q < kPer / 4; ++q) {
            const float4 xv = xr[q];
#pragma unroll
            for (int c = 0; c < kCols; ++c) {
              float& a = acc[c][r];
              a = __fmaf_rn(xv.x, wv[c][4 * q], a);
              a = __fmaf_rn(xv.y, wv[c][4 * q + 1], a);
              a = __fmaf_rn(xv.z, wv[c][4 * q + 2], a);
              a = __fmaf_rn(xv.w, wv[c][4 * q + 3], a);
            }
          }
        }
      }
    }
  }
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
    const int64_t j = j0 + c;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      // The tile's missing rows have no sums to add up (each five shuffles, the tail of every
      // warp's work).
      if (r >= rows) break;
      const float s = WarpSum(acc[c][r]);
      if (lane == 0 && j < n) y[(r0 + r) * ld_y + j] = LinearOutput<F>(s, row_scales, bias, j);
    }
  }
}

// One block per row (kernels::ArgmaxRow's rule: see BlockArgmax).
constexpr int kArgmaxThreads = 256;

__global__ void ArgmaxRowsKernel(const float* src, int64_t ld_src, int64_t cols, int32_t* out) {
  __shared__ BlockScratch<kArgmaxThreads> scratch;
  const int32_t argmax = BlockArgmax(src + int64_t{blockIdx.x} * ld_src, cols, scratch);
  if (threadIdx.x == 0) out[blockIdx.x] = argmax;
}

// Prefill shapes: a block computes a 64 × 64 tile of y from 64 × 16 slices of x and of the
// weights staged in shared memory (the weights widened to fp32 as they are staged), each thread
// a 4 × 4 sub-tile. A weight element is then read from global memory once per 64 rows of x,
// where the decode kernel above reads it once per 8. Still fp32 on the CUDA cores: the tensor
// cores want 16-bit activations, which the fp32 engine does not have.
constexpr int kTileRows = 64;
constexpr int kTileCols = 64;
constexpr int kTileDepth = 16;
constexpr int kTileThreads = 256;  // 16 × 16, each 4 × 4 outputs
// From this many rows of x the tiled kernel is used.
constexpr int64_t kTiledLinearMinRows = 16;

template <WeightFormat F>
__device__ void TiledLinearTile(const float* x, int64_t ld_x, int64_t m, const void* w,
                                const float* row_scales, int64_t n, int64_t k, const float* bias,
                                float* y, int64_t ld_y, int64_t tile) {
  // Stored k-major so that the inner loop reads a row of each; +4 staggers the banks.
  __shared__ float xs[kTileDepth][kTileRows + 4];
  __shared__ float ws[kTileDepth][kTileCols + 4];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t row0 = tile * kTileRows, col0 = int64_t{blockIdx.x} * kTileCols;
  float acc[4][4] = {};
  for (int64_t p0 = 0; p0 < k; p0 += kTileDepth) {
    for (int i = threadIdx.x; i < kTileRows * kTileDepth; i += kTileThreads) {
      const int r = i / kTileDepth, p = i % kTileDepth;
      const int64_t gr = row0 + r, gp = p0 + p;
      xs[p][r] = gr < m && gp < k ? x[gr * ld_x + gp] : 0.0f;
    }
    for (int i = threadIdx.x; i < kTileCols * kTileDepth; i += kTileThreads) {
      const int c = i / kTileDepth, p = i % kTileDepth;
      const int64_t gc = col0 + c, gp = p0 + p;
      ws[p][c] = gc < n && gp < k
                     ? LoadWeight<F>(static_cast<const WeightElement<F>*>(w) + gc * k, gp)
                     : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int p = 0; p < kTileDepth; ++p) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = xs[p][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = ws[p][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t r = row0 + ty + 16 * i;
    if (r >= m) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t c = col0 + tx + 16 * j;
      if (c >= n) continue;
      y[r * ld_y + c] = LinearOutput<F>(acc[i][j], row_scales, bias, c);
    }
  }
}

template <WeightFormat F>
__global__ void TiledLinearKernel(const float* x, int64_t ld_x, int64_t m, const void* w,
                                  const float* row_scales, int64_t n, int64_t k, const float* bias,
                                  float* y, int64_t ld_y) {
  TiledLinearTile<F>(x, ld_x, m, w, row_scales, n, k, bias, y, ld_y, blockIdx.y);
}

// Grouped: expert e = blockIdx.z multiplies rows [offsets[e], offsets[e+1]) of x by its own
// weights (data and scales from device tables), with no bias; tiles past its rows return. The
// row counts stay on the device, so MoE never waits for the host.
template <WeightFormat F, bool kTiled>
__global__ void GroupedLinearKernel(const float* x, int64_t ld_x, const int64_t* offsets,
                                    const void* const* weights, const float* const* scales,
                                    int64_t n, int64_t k, float* y, int64_t ld_y) {
  const int64_t e = blockIdx.z;
  const int64_t first = offsets[e], rows = offsets[e + 1] - first;
  const int64_t tile = blockIdx.y;
  if (tile * (kTiled ? kTileRows : kLinearRows) >= rows) return;
  const float* row_scales = scales != nullptr ? scales[e] : nullptr;
  if constexpr (kTiled) {
    TiledLinearTile<F>(x + first * ld_x, ld_x, rows, weights[e], row_scales, n, k, nullptr,
                       y + first * ld_y, ld_y, tile);
  } else {
    LinearTile<F>(x + first * ld_x, ld_x, rows, weights[e], row_scales, n, k, nullptr,
                  y + first * ld_y, ld_y, tile);
  }
}

template <WeightFormat F>
cudaError_t LaunchLinear(cudaStream_t stream, const float* x, int64_t ld_x, int64_t m,
                         const WeightMatrix& w, const float* bias, float* y, int64_t ld_y,
                         bool same_for_every_row) {
  if (!same_for_every_row && m >= kTiledLinearMinRows) {
    const dim3 grid(static_cast<unsigned>((w.rows + kTileCols - 1) / kTileCols),
                    static_cast<unsigned>((m + kTileRows - 1) / kTileRows));
    TiledLinearKernel<F><<<grid, kTileThreads, 0, stream>>>(x, ld_x, m, w.data, w.row_scales,
                                                            w.rows, w.cols, bias, y, ld_y);
    return cudaGetLastError();
  }
  const dim3 grid(static_cast<unsigned>((w.rows + kLinearWarps - 1) / kLinearWarps),
                  static_cast<unsigned>((m + kLinearRows - 1) / kLinearRows));
  // int8 weights with several rows of x: each lane's 16 weights need 64 bytes of x per row, and
  // at 8 rows those x loads outweigh the weights' (measured on an H200: 8 × 4096 → 14336 took
  // 253 µs vectorised, 185 µs one element at a time; one row took 50 against 108).
  const bool x_loads_dominate = !same_for_every_row && F == WeightFormat::kI8 && m > 1;
  const bool vectorised = w.cols % kWeightsPer16Bytes<F> == 0 && ld_x % 4 == 0 && Aligned(x, 16) &&
                          Aligned(w.data, 16) && !x_loads_dominate;
  if (vectorised) {
    // 16-bit rows are short (8 KB at k = 4096): two columns per warp keep twice the bytes in
    // flight over a warp's short life.
    constexpr int kCols = F == WeightFormat::kBF16 || F == WeightFormat::kF16 ? 2 : 1;
    const unsigned column_blocks =
        static_cast<unsigned>((w.rows + kLinearWarps * kCols - 1) / (kLinearWarps * kCols));
    if (m == 1) {
      VectorLinearKernel<F, kCols, 1><<<column_blocks, kLinearWarps * kWarp, 0, stream>>>(
          x, ld_x, m, w.data, w.row_scales, w.rows, w.cols, bias, y, ld_y);
    } else {
      VectorLinearKernel<F, kCols, kLinearRows>
          <<<dim3(column_blocks, grid.y), kLinearWarps * kWarp, 0, stream>>>(
              x, ld_x, m, w.data, w.row_scales, w.rows, w.cols, bias, y, ld_y);
    }
  } else {
    LinearKernel<F><<<grid, kLinearWarps * kWarp, 0, stream>>>(x, ld_x, m, w.data, w.row_scales,
                                                               w.rows, w.cols, bias, y, ld_y);
  }
  return cudaGetLastError();
}

// fn(std::integral_constant<WeightFormat, F>) for the F that `format` is: one instantiation of a
// kernel per format, chosen at run time.
template <typename Fn>
cudaError_t WithFormat(WeightFormat format, Fn&& fn) {
  switch (format) {
    case WeightFormat::kF32:
      return fn(std::integral_constant<WeightFormat, WeightFormat::kF32>{});
    case WeightFormat::kBF16:
      return fn(std::integral_constant<WeightFormat, WeightFormat::kBF16>{});
    case WeightFormat::kF16:
      return fn(std::integral_constant<WeightFormat, WeightFormat::kF16>{});
    case WeightFormat::kI8:
      return fn(std::integral_constant<WeightFormat, WeightFormat::kI8>{});
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t GatherRows(cudaStream_t stream, const WeightMatrix& table, const int32_t* ids,
                       int64_t count, float* out, int64_t ld_out) {
  if (count <= 0 || table.cols <= 0) return cudaSuccess;
  if (count > INT32_MAX || !Aligned(table.data, WeightElementBytes(table.format)) ||
      (table.format == WeightFormat::kI8 && table.row_scales == nullptr)) {
    return cudaErrorInvalidValue;
  }
  return WithFormat(table.format, [&](auto format) {
    GatherRowsKernel<decltype(format)::value><<<static_cast<unsigned>(count), 256, 0, stream>>>(
        table.data, table.row_scales, table.cols, ids, out, ld_out);
    return cudaGetLastError();
  });
}

cudaError_t CopyRows(cudaStream_t stream, const float* src, int64_t ld_src, int64_t rows,
                     int64_t cols, float* dst, int64_t ld_dst) {
  return LaunchRows(stream, false, src, ld_src, rows, cols, dst, ld_dst);
}

cudaError_t AddRows(cudaStream_t stream, const float* src, int64_t ld_src, int64_t rows,
                    int64_t cols, float* dst, int64_t ld_dst) {
  return LaunchRows(stream, true, src, ld_src, rows, cols, dst, ld_dst);
}

cudaError_t ScaleRows(cudaStream_t stream, float* x, int64_t ld_x, int64_t rows, int64_t cols,
                      float factor, bool divide) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  const int threads = 256;
  const unsigned blocks =
      static_cast<unsigned>(std::min<int64_t>((rows * cols + threads - 1) / threads, 65535));
  ScaleRowsKernel<<<blocks, threads, 0, stream>>>(x, ld_x, rows, cols, factor, divide);
  return cudaGetLastError();
}

cudaError_t IndexedCopyRows(cudaStream_t stream, bool scatter, const float* src, int64_t ld_src,
                            const int32_t* rows, int64_t count, int64_t cols, float* dst,
                            int64_t ld_dst) {
  if (count <= 0 || cols <= 0) return cudaSuccess;
  if (count > INT32_MAX) return cudaErrorInvalidValue;
  IndexedCopyKernel<<<static_cast<unsigned>(count), 256, 0, stream>>>(scatter, src, ld_src, rows,
                                                                      cols, dst, ld_dst);
  return cudaGetLastError();
}

cudaError_t RmsNorm(cudaStream_t stream, const float* x, int64_t ld_x, int64_t rows, int64_t dim,
                    const float* weight, float eps, float* out, int64_t ld_out) {
  if (rows <= 0 || dim <= 0) return cudaSuccess;
  if (rows > INT32_MAX) return cudaErrorInvalidValue;
  RmsNormKernel<<<static_cast<unsigned>(rows), kNormThreads, 0, stream>>>(x, ld_x, dim, weight, eps,
                                                                          out, ld_out);
  return cudaGetLastError();
}

cudaError_t RowSquareSums(cudaStream_t stream, const float* x, int64_t ld_x, int64_t rows,
                          int64_t cols, float* sums) {
  if (rows <= 0) return cudaSuccess;
  if (rows > INT32_MAX) return cudaErrorInvalidValue;
  RowSquareSumsKernel<<<static_cast<unsigned>(rows), kNormThreads, 0, stream>>>(x, ld_x, cols,
                                                                               sums);
  return cudaGetLastError();
}

cudaError_t RmsNormBySums(cudaStream_t stream, float* x, int64_t ld_x, int64_t rows, int64_t cols,
                          const float* sums, int64_t count, const float* weight, float eps) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  if (rows > INT32_MAX) return cudaErrorInvalidValue;
  RmsNormBySumsKernel<<<static_cast<unsigned>(rows), kNormThreads, 0, stream>>>(
      x, ld_x, cols, sums, count, weight, eps);
  return cudaGetLastError();
}

cudaError_t GatedRmsNorm(cudaStream_t stream, const float* y, int64_t ld_y, const float* z,
                         int64_t ld_z, int64_t rows, int64_t dim, int32_t groups,
                         const float* weight, float eps, float* out, int64_t ld_out) {
  if (rows <= 0 || dim <= 0) return cudaSuccess;
  if (groups <= 0 || dim % groups != 0 || rows > INT32_MAX || groups > 65535) {
    return cudaErrorInvalidValue;
  }
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(groups));
  GatedRmsNormKernel<<<grid, kNormThreads, 0, stream>>>(y, ld_y, z, ld_z, dim / groups, weight, eps,
                                                        out, ld_out);
  return cudaGetLastError();
}

cudaError_t Rope(cudaStream_t stream, float* x, int64_t ld_x, int64_t tokens, int32_t heads,
                 int32_t head_dim, int64_t start_pos, const int64_t* positions, float theta) {
  if (tokens <= 0 || heads <= 0) return cudaSuccess;
  if (head_dim <= 0 || head_dim % 2 != 0 || head_dim > 2048 || heads > 65535 ||
      tokens > INT32_MAX) {
    return cudaErrorInvalidValue;
  }
  const dim3 grid(static_cast<unsigned>(tokens), static_cast<unsigned>(heads));
  const int threads = (head_dim / 2 + kWarp - 1) / kWarp * kWarp;
  RopeKernel<<<grid, threads, 0, stream>>>(x, ld_x, head_dim, start_pos, positions, theta);
  return cudaGetLastError();
}

cudaError_t GatedActivation(cudaStream_t stream, Activation act, const float* gate, int64_t ld_gate,
                            const float* up, int64_t ld_up, int64_t rows, int64_t cols, float* out,
                            int64_t ld_out) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  const int64_t total = rows * cols;
  const int threads = 256;
  const unsigned blocks =
      static_cast<unsigned>(std::min<int64_t>((total + threads - 1) / threads, 65535));
  GatedActivationKernel<<<blocks, threads, 0, stream>>>(act, gate, ld_gate, up, ld_up, rows, cols,
                                                        out, ld_out);
  return cudaGetLastError();
}

cudaError_t Activate(cudaStream_t stream, Activation act, float* x, int64_t ld_x, int64_t rows,
                     int64_t cols) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  const int threads = 256;
  const unsigned blocks =
      static_cast<unsigned>(std::min<int64_t>((rows * cols + threads - 1) / threads, 65535));
  ActivateKernel<<<blocks, threads, 0, stream>>>(act, x, ld_x, rows, cols);
  return cudaGetLastError();
}

cudaError_t ArgmaxRows(cudaStream_t stream, const float* src, int64_t ld_src, int64_t rows,
                       int64_t cols, int32_t* out) {
  if (rows <= 0) return cudaSuccess;
  if (cols <= 0 || cols > INT32_MAX || rows > INT32_MAX) return cudaErrorInvalidValue;
  ArgmaxRowsKernel<<<static_cast<unsigned>(rows), kArgmaxThreads, 0, stream>>>(src, ld_src, cols,
                                                                               out);
  return cudaGetLastError();
}

cudaError_t GroupedLinear(cudaStream_t stream, const float* x, int64_t ld_x, int64_t max_rows,
                          const int64_t* offsets, int32_t groups, WeightFormat format,
                          const void* const* weights, const float* const* scales, int64_t n,
                          int64_t k, float* y, int64_t ld_y, bool same_for_every_row) {
  if (max_rows <= 0 || groups <= 0 || n <= 0) return cudaSuccess;
  if (groups > 65535 || (format == WeightFormat::kI8 && scales == nullptr)) {
    return cudaErrorInvalidValue;
  }
  const bool tiled = !same_for_every_row && max_rows >= kTiledLinearMinRows;
  const int64_t tile_rows = tiled ? kTileRows : kLinearRows;
  const int64_t cols_per_block = tiled ? kTileCols : kLinearWarps;
  const int64_t row_tiles = (max_rows + tile_rows - 1) / tile_rows;
  if (row_tiles > 65535) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>((n + cols_per_block - 1) / cols_per_block),
                  static_cast<unsigned>(row_tiles), static_cast<unsigned>(groups));
  return WithFormat(format, [&](auto f) {
    constexpr WeightFormat F = decltype(f)::value;
    if (tiled) {
      GroupedLinearKernel<F, true>
          <<<grid, kTileThreads, 0, stream>>>(x, ld_x, offsets, weights, scales, n, k, y, ld_y);
    } else {
      GroupedLinearKernel<F, false><<<grid, kLinearWarps * kWarp, 0, stream>>>(
          x, ld_x, offsets, weights, scales, n, k, y, ld_y);
    }
    return cudaGetLastError();
  });
}

cudaError_t Linear(cudaStream_t stream, const float* x, int64_t ld_x, int64_t m,
                   const WeightMatrix& w, const float* bias, float* y, int64_t ld_y,
                   bool same_for_every_row) {
  if (m <= 0 || w.rows <= 0) return cudaSuccess;
  if ((m + kLinearRows - 1) / kLinearRows > 65535 ||
      (w.rows + kLinearWarps - 1) / kLinearWarps > INT32_MAX ||
      !Aligned(w.data, WeightElementBytes(w.format)) ||
      (w.format == WeightFormat::kI8 && w.row_scales == nullptr)) {
    return cudaErrorInvalidValue;
  }
  return WithFormat(w.format, [&](auto format) {
    return LaunchLinear<decltype(format)::value>(stream, x, ld_x, m, w, bias, y, ld_y,
                                                 same_for_every_row);
  });
}

}  // namespace tandem::kernels::cuda
