// Speed of the CUDA kernels against what the device can do, measured in one run: its copy
// bandwidth (a device-to-device cudaMemcpy of 1 GiB, reads plus writes) is the ceiling for every
// memory-bound kernel here. Prints a markdown table for docs/BENCHMARKS.md; scripts/gpu-check.sh
// runs it and puts the table in its report.
//
//   cuda_kernels_bench [--iterations 50]
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/cublas_linear.h"
#include "kernels/cuda/dense_kernels.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/sampling_kernels.h"
#include "kernels/cuda/sequence_kernels.h"
#include "kernels/sampling_row.h"
#include "kernels/weight_matrix.h"

namespace tandem::kernels::cuda {
namespace {

void Check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(status));
    std::exit(1);
  }
}

template <typename T>
DeviceBuffer<T> Filled(size_t count, T value) {
  DeviceBuffer<T> buffer;
  Check(buffer.Upload(std::vector<T>(count, value)), "upload");
  return buffer;
}

DeviceBuffer<float> Random(size_t count, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> host(count);
  for (float& v : host) v = dist(gen);
  DeviceBuffer<float> buffer;
  Check(buffer.Upload(host), "upload");
  return buffer;
}

// Mean seconds per call of `fn` over `iterations` calls after 3 warm-up calls.
double Time(int iterations, const std::function<cudaError_t()>& fn) {
  for (int i = 0; i < 3; ++i) Check(fn(), "warm-up launch");
  cudaEvent_t start, stop;
  Check(cudaEventCreate(&start), "event");
  Check(cudaEventCreate(&stop), "event");
  Check(cudaEventRecord(start), "record");
  for (int i = 0; i < iterations; ++i) Check(fn(), "launch");
  Check(cudaEventRecord(stop), "record");
  Check(cudaEventSynchronize(stop), "synchronize");
  float ms = 0;
  Check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms * 1e-3 / iterations;
}

struct Row {
  std::string what;
  double seconds;
  double bytes;      // bytes the kernel must move at least
  double flops = 0;  // floating-point operations, for the compute-bound rows (prefill GEMMs)
};

int Main(int argc, char** argv) {
  int iterations = 50;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--iterations")) iterations = std::atoi(argv[i + 1]);
  }
  cudaDeviceProp prop;
  Check(cudaGetDeviceProperties(&prop, 0), "no CUDA device");

  const size_t copy_bytes = size_t{1} << 30;
  DeviceBuffer<uint8_t> src = Filled<uint8_t>(copy_bytes, 1), dst = Filled<uint8_t>(copy_bytes, 0);
  const double copy_seconds = Time(
      10, [&] { return cudaMemcpy(dst.get(), src.get(), copy_bytes, cudaMemcpyDeviceToDevice); });
  const double bandwidth = 2.0 * copy_bytes / copy_seconds;
  src = DeviceBuffer<uint8_t>();
  dst = DeviceBuffer<uint8_t>();

  std::vector<Row> rows;
  // cuBLAS as CudaOps::Linear uses it from 16 rows, here on the legacy default stream that Time()
  // records its events on; without it (none on the machine) its rows are left out.
  std::string cublas_error;
  std::unique_ptr<CublasLinear> cublas;
  if (std::shared_ptr<const CublasLibrary> library = CublasLibrary::Default(&cublas_error)) {
    cublas = CublasLinear::Create(library, nullptr, &cublas_error);
  }
  if (cublas == nullptr) std::fprintf(stderr, "no cuBLAS rows: %s\n", cublas_error.c_str());
  // Linear: decode shapes of a 7-8B model (4096 -> 14336 MLP up, 14336 -> 4096 down) per format,
  // and a 512-row prefill chunk (the tiled kernel; compute-bound, so its TFLOP/s counts), that
  // chunk's MLP up also through cuBLAS in each precision it offers for the format.
  for (auto [k, n] : {std::pair<int64_t, int64_t>{4096, 14336}, {14336, 4096}}) {
    const std::vector<float> host_w = [&] {
      std::mt19937 gen(1);
      std::uniform_real_distribution<float> dist(-0.02f, 0.02f);
      std::vector<float> w(k * n);
      for (float& v : w) v = dist(gen);
      return w;
    }();
    for (WeightFormat format : {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kI8}) {
      std::vector<uint8_t> bytes(static_cast<size_t>(k * n) * WeightElementBytes(format));
      std::vector<float> scales(n);
      ConvertWeights(host_w.data(), n, k, format, bytes.data(), scales.data());
      DeviceBuffer<uint8_t> dw;
      DeviceBuffer<float> ds;
      Check(dw.Upload(bytes), "upload");
      Check(ds.Upload(scales), "upload");
      const WeightMatrix w{format, dw.get(), format == WeightFormat::kI8 ? ds.get() : nullptr, n,
                           k};
      for (int64_t m : {1, 8, 512}) {
        DeviceBuffer<float> x = Random(m * k, 2), y = Filled<float>(m * n, 0.0f);
        const double s = Time(
            iterations, [&] { return Linear(nullptr, x.get(), k, m, w, nullptr, y.get(), n); });
        rows.push_back({"Linear " + std::to_string(m) + " × " + std::to_string(k) + " → " +
                            std::to_string(n) + " " + std::string(WeightFormatName(format)),
                        s, static_cast<double>(w.bytes()), 2.0 * m * k * n});
        for (const bool tensor_cores : {false, true}) {
          if (cublas == nullptr || m != 512 || k != 4096 ||
              !CublasLinear::Takes(m, w, k, n, tensor_cores)) {
            continue;
          }
          const double t = Time(iterations, [&] {
            const std::string failure =
                cublas->Run(tensor_cores, x.get(), k, m, w, nullptr, y.get(), n);
            if (failure.empty()) return cudaSuccess;
            std::fprintf(stderr, "%s\n", failure.c_str());
            return cudaErrorUnknown;
          });
          const char* how = !tensor_cores                  ? ", cuBLAS exact f32"
                            : format == WeightFormat::kF32 ? ", cuBLAS TF32"
                                                           : ", cuBLAS tensor cores";
          rows.push_back(
              {"Linear 512 × 4096 → 14336 " + std::string(WeightFormatName(format)) + how, t,
               static_cast<double>(w.bytes()), 2.0 * m * k * n});
        }
      }
    }
  }

  // Decode attention: one query row, 32 heads over 8 KV heads of 128, 16K keys in 16-token pages.
  {
    const int32_t heads = 32, kv_heads = 8, dh = 128, page_tokens = 16;
    const int64_t keys = 16384, pages = keys / page_tokens;
    const int64_t page_floats = 2 * int64_t{kv_heads} * page_tokens * dh;
    DeviceBuffer<float> cache = Random(pages * page_floats, 3), q = Random(heads * dh, 4);
    DeviceBuffer<float> out = Filled<float>(heads * dh, 0.0f), lse = Filled<float>(heads, 0.0f);
    std::vector<float*> table(pages);
    for (int64_t p = 0; p < pages; ++p) table[p] = cache.get() + p * page_floats;
    DeviceBuffer<float*> dtable;
    Check(dtable.Upload(table), "upload");
    PartialAttentionArgs a;
    a.rows = 1;
    a.start_pos = keys - 1;
    a.causal = true;
    a.heads = heads;
    a.q = q.get();
    a.ld_q = a.ld_out = heads * dh;
    a.kv = {dtable.get(), page_tokens, kv_heads, dh, 0};
    a.key_end = keys;
    a.scale = 0.088f;
    a.out = out.get();
    a.lse = lse.get();
    a.ld_lse = heads;
    int multiprocessors = 1;
    Check(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, 0), "sms");
    // Scratch for the most key splits any call below takes.
    DeviceBuffer<float> partial = Filled<float>(kMaxKeySplits * heads * dh, 0.0f);
    DeviceBuffer<float> partial_lse = Filled<float>(kMaxKeySplits * heads, 0.0f);
    const KeySplits one_sequence_splits{PartialAttentionSplits(a, multiprocessors), partial.get(),
                                        partial_lse.get()};
    const double unsplit = Time(iterations, [&] { return PartialAttention(nullptr, a); });
    const double split_one =
        Time(iterations, [&] { return PartialAttention(nullptr, a, one_sequence_splits); });
    rows.push_back({"Attention decode, one sequence, 32 heads / 8 KV × 128, 16K keys, unsplit",
                    unsplit, 2.0 * keys * kv_heads * dh * sizeof(float)});
    rows.push_back({"Attention decode, one sequence, the same, " +
                        std::to_string(one_sequence_splits.count) + " key splits merged",
                    split_one, 2.0 * keys * kv_heads * dh * sizeof(float)});

    // The same decode row as the engine issues it (a decode batch of one, per-row tables):
    // the keys split across the GPU's multiprocessors and merged, against one block per KV head.
    {
      std::vector<float* const*> one_table = {dtable.get()};
      std::vector<int64_t> last = {keys - 1};
      DeviceBuffer<float* const*> drow_table;
      DeviceBuffer<int64_t> dlast;
      Check(drow_table.Upload(one_table), "upload");
      Check(dlast.Upload(last), "upload");
      AttentionArgs d;
      d.tokens = 1;
      d.heads = heads;
      d.q = q.get();
      d.ld_q = d.ld_out = heads * dh;
      d.kv = a.kv;
      d.scale = a.scale;
      d.out = out.get();
      d.page_tables = drow_table.get();
      d.positions = dlast.get();
      const KeySplits splits{DecodeAttentionSplits(d, multiprocessors), partial.get(),
                             partial_lse.get()};
      const double split = Time(iterations, [&] { return DecodeAttention(nullptr, d, splits); });
      const double whole = Time(iterations, [&] { return DecodeAttention(nullptr, d); });
      const double bytes = 2.0 * keys * kv_heads * dh * sizeof(float);
      rows.push_back({"Attention decode batch of 1, 16K keys, " + std::to_string(splits.count) +
                          " key splits merged",
                      split, bytes});
      rows.push_back({"Attention decode batch of 1, 16K keys, unsplit", whole, bytes});
    }

    // Hydragen's prefix part: 256 sequences' decode rows over that 16K shared prefix, as one
    // tiled call (shared K/V tiles) against each row over the prefix on its own (per-row
    // tables: what attention without Hydragen reads). The ratio is the Hydragen speedup goal.
    const int64_t members = 256;
    DeviceBuffer<float> mq = Random(members * heads * dh, 5);
    DeviceBuffer<float> mout = Filled<float>(members * heads * dh, 0.0f);
    DeviceBuffer<float> mlse = Filled<float>(members * heads, 0.0f);
    PartialAttentionArgs shared = a;
    shared.rows = members;
    shared.causal = false;
    shared.q = mq.get();
    shared.out = mout.get();
    shared.lse = mlse.get();
    // With the key splits the backend would take (CudaOps::PartialAttention), and without.
    const int shared_count = PartialAttentionSplits(shared, multiprocessors);
    DeviceBuffer<float> shared_parts =
        Filled<float>(KeySplits::OutFloats(shared_count, members, heads, dh), 0.0f);
    DeviceBuffer<float> shared_parts_lse =
        Filled<float>(KeySplits::LseFloats(shared_count, members, heads), 0.0f);
    const KeySplits shared_splits{shared_count, shared_parts.get(), shared_parts_lse.get()};
    const double tiled =
        Time(iterations, [&] { return PartialAttention(nullptr, shared, shared_splits); });
    const double tiled_unsplit =
        Time(iterations, [&] { return PartialAttention(nullptr, shared); });
    const double tiled_tf32 = Time(iterations, [&] {
      return PartialAttention(nullptr, shared, shared_splits, TensorCorePrecision::kTf32);
    });
    std::vector<float* const*> per_row(members, dtable.get());
    std::vector<int64_t> begins(members, 0), ends(members, keys);
    DeviceBuffer<float* const*> dper_row;
    DeviceBuffer<int64_t> dbegins, dends;
    Check(dper_row.Upload(per_row), "upload");
    Check(dbegins.Upload(begins), "upload");
    Check(dends.Upload(ends), "upload");
    PartialAttentionArgs each = shared;
    each.page_tables = dper_row.get();
    each.key_begins = dbegins.get();
    each.key_ends = dends.get();
    const double one_each = Time(iterations, [&] { return PartialAttention(nullptr, each); });
    const double flops = 4.0 * members * heads * keys * dh;
    rows.push_back({"Hydragen prefix: 256 rows × 32 heads over 16K shared keys, tiled, " +
                        std::to_string(shared_count) + " key splits merged",
                    tiled, 2.0 * keys * kv_heads * dh * sizeof(float), flops});
    rows.push_back({"Hydragen prefix: the same, tiled, unsplit", tiled_unsplit,
                    2.0 * keys * kv_heads * dh * sizeof(float), flops});
    rows.push_back({"Hydragen prefix: the same, tiled, split, TF32 (--gpu-tensor-cores)",
                    tiled_tf32, 2.0 * keys * kv_heads * dh * sizeof(float), flops});
    rows.push_back({"Hydragen prefix: the same rows each over the keys alone", one_each,
                    2.0 * keys * kv_heads * dh * sizeof(float) * members, flops});

    // Prefill attention: a 2,048-token chunk, causal, over the first 2,048 positions.
    PartialAttentionArgs prefill = a;
    prefill.rows = 2048;
    prefill.start_pos = 0;
    prefill.causal = true;
    prefill.key_end = prefill.rows;
    DeviceBuffer<float> pq = Random(prefill.rows * heads * dh, 6);
    DeviceBuffer<float> pout = Filled<float>(prefill.rows * heads * dh, 0.0f);
    prefill.q = pq.get();
    prefill.out = pout.get();
    prefill.lse = nullptr;
    const double prefill_s = Time(iterations, [&] { return PartialAttention(nullptr, prefill); });
    const double prefill_tf32 = Time(iterations, [&] {
      return PartialAttention(nullptr, prefill, {}, TensorCorePrecision::kTf32);
    });
    // Row t sees t + 1 keys: on average (rows + 1) / 2.
    rows.push_back({"Attention prefill: 2,048 rows causal, 32 heads / 8 KV × 128", prefill_s,
                    2.0 * prefill.rows * kv_heads * dh * sizeof(float),
                    4.0 * prefill.rows * heads * (prefill.rows + 1) / 2.0 * dh});
    rows.push_back({"Attention prefill: the same, TF32 (--gpu-tensor-cores)", prefill_tf32,
                    2.0 * prefill.rows * kv_heads * dh * sizeof(float),
                    4.0 * prefill.rows * heads * (prefill.rows + 1) / 2.0 * dh});
  }

  // The recurrent ops over a 2,048-token prefill of one sequence, in the shapes of a Mamba-2 2.7B
  // layer (80 heads × 64 × N 128, conv over x ‖ B ‖ C) and a Jamba-1.5-Mini layer (8,192
  // channels × N 16). They run token by token (sequence_kernels.h), so what bounds them is the
  // latency per tile of tokens: "bytes" counts the inputs read once and the outputs written,
  // "flops" the recurrence's multiply-adds (state update and output, 4 flops per state element).
  {
    const int64_t tokens = 2048;
    const int32_t heads = 80, p = 64, n = 128;
    const int64_t width = int64_t{heads} * p, conv_channels = width + 2 * n;
    DeviceBuffer<float> xbc = Random(tokens * conv_channels, 16),
                        conv_out = Filled<float>(tokens * conv_channels, 0.0f),
                        conv_weight = Random(conv_channels * 4, 17),
                        conv_state = Filled<float>(3 * conv_channels, 0.0f),
                        dt = Random(tokens * heads, 18), bias = Filled<float>(heads, -2.0f),
                        a_vec = Filled<float>(heads, -1.0f), d = Filled<float>(heads, 1.0f),
                        state = Filled<float>(width * n, 0.0f),
                        y = Filled<float>(tokens * width, 0.0f);
    CausalConvArgs conv;
    conv.tokens = tokens;
    conv.channels = static_cast<int32_t>(conv_channels);
    conv.kernel = 4;
    conv.silu = true;
    conv.u = xbc.get();
    conv.ld_u = conv.ld_out = conv_channels;
    conv.weight = conv_weight.get();
    conv.state = conv_state.get();
    conv.out = conv_out.get();
    const double conv_seconds = Time(iterations, [&] { return CausalConv1d(nullptr, conv); });
    rows.push_back({"Causal conv1d, 2,048-token prefill × 5,376 channels, width 4", conv_seconds,
                    2.0 * tokens * conv_channels * 4, 2.0 * 4 * tokens * conv_channels});
    SsdScanArgs ssd;
    ssd.tokens = tokens;
    ssd.heads = heads;
    ssd.head_dim = p;
    ssd.groups = 1;
    ssd.state_size = n;
    ssd.x = conv_out.get();
    ssd.ld_x = ssd.ld_b = ssd.ld_c = conv_channels;
    ssd.b = conv_out.get() + width;
    ssd.c = conv_out.get() + width + n;
    ssd.dt = dt.get();
    ssd.ld_dt = heads;
    ssd.dt_bias = bias.get();
    ssd.a = a_vec.get();
    ssd.d = d.get();
    ssd.state = state.get();
    ssd.y = y.get();
    ssd.ld_y = width;
    // Each count of rows per warp (4 is the default here): the rows of a warp share its loads of
    // B and C.
    for (int rows_per_warp : {1, 2, 4}) {
      const double ssd_seconds =
          Time(iterations, [&] { return SsdScanWithRowsPerWarp(nullptr, ssd, rows_per_warp); });
      rows.push_back({"SSD scan, 2,048-token prefill × 80 heads × 64 × N 128, " +
                          std::to_string(rows_per_warp) + " rows per warp",
                      ssd_seconds, (tokens * (2.0 * width + 2 * n + heads) + 2.0 * width * n) * 4,
                      4.0 * tokens * width * n});
    }

    const int32_t inner = 8192, jamba_n = 16;
    DeviceBuffer<float> u = Random(tokens * inner, 19), delta = Random(tokens * inner, 20),
                        delta_bias = Filled<float>(inner, -2.0f),
                        a_mat = Filled<float>(int64_t{inner} * jamba_n, -1.0f),
                        bc = Random(tokens * 2 * jamba_n, 21), z = Random(tokens * inner, 22),
                        d_inner = Filled<float>(inner, 1.0f),
                        jamba_state = Filled<float>(int64_t{inner} * jamba_n, 0.0f),
                        jamba_y = Filled<float>(tokens * inner, 0.0f);
    SelectiveScanArgs scan;
    scan.tokens = tokens;
    scan.inner = inner;
    scan.state_size = jamba_n;
    scan.u = u.get();
    scan.delta = delta.get();
    scan.z = z.get();
    scan.y = jamba_y.get();
    scan.ld_u = scan.ld_delta = scan.ld_z = scan.ld_y = inner;
    scan.delta_bias = delta_bias.get();
    scan.a = a_mat.get();
    scan.b = bc.get();
    scan.c = bc.get() + jamba_n;
    scan.ld_b = scan.ld_c = 2 * jamba_n;
    scan.d = d_inner.get();
    scan.state = jamba_state.get();
    for (int rows_per_warp : {1, 2, 4}) {  // 4: the default
      const double scan_seconds = Time(
          iterations, [&] { return SelectiveScanWithRowsPerWarp(nullptr, scan, rows_per_warp); });
      rows.push_back({"Selective scan, 2,048-token prefill × 8,192 channels × N 16, " +
                          std::to_string(rows_per_warp) + " rows per warp",
                      scan_seconds,
                      (tokens * (4.0 * inner + 2 * jamba_n) + 2.0 * inner * jamba_n) * 4,
                      4.0 * tokens * inner * jamba_n});
    }
  }

  // Mamba-2 decode step of a 2.7B-sized layer: 80 heads × 64 × N 128 of state, read and written.
  {
    const int32_t heads = 80, p = 64, n = 128;
    const int64_t state_floats = int64_t{heads} * p * n;
    DeviceBuffer<float> state = Random(state_floats, 5), x = Random(heads * p, 6),
                        dt = Random(heads, 7), bias = Filled<float>(heads, -2.0f),
                        a_vec = Filled<float>(heads, -1.0f), b = Random(n, 8), c = Random(n, 9),
                        d = Filled<float>(heads, 1.0f), y = Filled<float>(heads * p, 0.0f);
    SsdScanArgs s;
    s.tokens = 1;
    s.heads = heads;
    s.head_dim = p;
    s.groups = 1;
    s.state_size = n;
    s.x = x.get();
    s.ld_x = s.ld_y = heads * p;
    s.dt = dt.get();
    s.ld_dt = heads;
    s.dt_bias = bias.get();
    s.a = a_vec.get();
    s.b = b.get();
    s.c = c.get();
    s.ld_b = s.ld_c = n;
    s.d = d.get();
    s.state = state.get();
    s.y = y.get();
    const double t = Time(iterations, [&] { return SsdScan(nullptr, s); });
    rows.push_back({"SSD decode step, 80 heads × 64 × N 128", t, 2.0 * state_floats * 4});

    // The same step for 64 sequences: one launch through a state table (a decode batch, as the
    // engine issues it) against one launch per sequence (as it did before).
    const int64_t sequences = 64;
    DeviceBuffer<float> states = Random(sequences * state_floats, 10),
                        xs = Random(sequences * heads * p, 11), dts = Random(sequences * heads, 12),
                        bs = Random(sequences * n, 13), cs = Random(sequences * n, 14),
                        ys = Filled<float>(sequences * heads * p, 0.0f);
    std::vector<float*> table(sequences);
    for (int64_t i = 0; i < sequences; ++i) table[i] = states.get() + i * state_floats;
    DeviceBuffer<float*> dtable;
    Check(dtable.Upload(table), "upload");
    SsdScanArgs batch = s;
    batch.tokens = sequences;
    batch.x = xs.get();
    batch.dt = dts.get();
    batch.b = bs.get();
    batch.c = cs.get();
    batch.y = ys.get();
    batch.state = nullptr;
    batch.state_table = dtable.get();
    const double batched = Time(iterations, [&] { return SsdScan(nullptr, batch); });
    const double one_each = Time(iterations, [&] {
      cudaError_t status = cudaSuccess;
      for (int64_t i = 0; i < sequences && status == cudaSuccess; ++i) {
        SsdScanArgs one = s;
        one.x = xs.get() + i * heads * p;
        one.dt = dts.get() + i * heads;
        one.b = bs.get() + i * n;
        one.c = cs.get() + i * n;
        one.y = ys.get() + i * heads * p;
        one.state = table[i];
        status = SsdScan(nullptr, one);
      }
      return status;
    });
    const double moved = 2.0 * sequences * state_floats * 4;
    rows.push_back({"SSD decode step × 64 sequences, one launch (decode batch)", batched, moved});
    rows.push_back({"SSD decode step × 64 sequences, one launch each", one_each, moved});
  }

  {
    // Picking 64 sequences' tokens from a 128K vocabulary: sampled on the device (temperature,
    // top-p 0.9), the argmax, and what sampling on the host would need first: every row copied
    // back to pinned memory.
    const int64_t sequences = 64, vocab = 131072;
    DeviceBuffer<float> logits = Random(sequences * vocab, 15);
    std::vector<SamplingRow> host_rules(sequences);
    for (int64_t i = 0; i < sequences; ++i) {
      host_rules[i].greedy = false;
      host_rules[i].temperature = 0.7f;
      host_rules[i].top_p = 0.9f;
      host_rules[i].uniform = (i + 0.5) / sequences;
    }
    DeviceBuffer<SamplingRow> rules;
    Check(rules.Upload(host_rules), "upload");
    DeviceBuffer<PenaltyToken> seen = Filled<PenaltyToken>(1, PenaltyToken{});
    DeviceBuffer<int32_t> tokens = Filled<int32_t>(sequences, 0);
    DeviceBuffer<SampledToken> sampled_tokens = Filled<SampledToken>(sequences, SampledToken{});
    DeviceBuffer<float> scratch = Filled<float>(sequences * vocab, 0.0f);
    const double moved = static_cast<double>(sequences) * vocab * 4;
    // With the blocks per row SampleRows picks (a cluster of several where the device has them
    // and the rows leave multiprocessors idle), and with one block per row; then one row alone.
    auto sample = [&](int64_t count, int blocks) {
      return Time(iterations, [&] {
        return SampleRows(nullptr, logits.get(), vocab, count, vocab, rules.get(), seen.get(), 0,
                          scratch.get(), sampled_tokens.get(), blocks);
      });
    };
    rows.push_back({"Sample 64 rows × 128K vocabulary (T 0.7, top-p 0.9)", sample(sequences, 0),
                    moved});
    rows.push_back({"the same, one block per row", sample(sequences, 1), moved});
    rows.push_back({"Sample 1 row × 128K vocabulary", sample(1, 0), moved / sequences});
    rows.push_back({"the same, one block", sample(1, 1), moved / sequences});
    const double argmax = Time(iterations, [&] {
      return ArgmaxRows(nullptr, logits.get(), vocab, sequences, vocab, tokens.get());
    });
    rows.push_back({"Argmax 64 rows × 128K vocabulary", argmax, moved});
    void* pinned = nullptr;
    Check(cudaMallocHost(&pinned, static_cast<size_t>(moved)), "pinned memory");
    const double copied = Time(iterations, [&] {
      return cudaMemcpy(pinned, logits.get(), static_cast<size_t>(moved), cudaMemcpyDeviceToHost);
    });
    cudaFreeHost(pinned);
    rows.push_back({"Copy 64 rows × 128K vocabulary to the host (pinned)", copied, moved});
  }

  std::printf("%s (sm_%d%d), copy bandwidth %.0f GB/s (1 GiB device-to-device, read + write)\n\n",
              prop.name, prop.major, prop.minor, bandwidth / 1e9);
  std::printf("| kernel | µs | GB/s | ÷ copy bandwidth | TFLOP/s |\n|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    std::printf("| %s | %.1f | %.0f | %.2f | %.1f |\n", r.what.c_str(), r.seconds * 1e6,
                r.bytes / r.seconds / 1e9, r.bytes / r.seconds / bandwidth,
                r.flops / r.seconds / 1e12);
  }
  return 0;
}

}  // namespace
}  // namespace tandem::kernels::cuda

int main(int argc, char** argv) { return tandem::kernels::cuda::Main(argc, argv); }
