// Every CpuOps kernel at the sizes of a ~100M-parameter hybrid model: hidden 768, din 1536,
// Mamba-1 N 16, Mamba-2 heads 24 × P 64 with N 16/128, attention 12 heads × 64, pages of 16,
// for decode (T = 1) and prefill (T = 512). Counters: GFLOP/s (useful FLOPs of the formula) or
// GB/s (bytes the op must touch).
#include <benchmark/benchmark.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/kernels/bench_util.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/reference/reference_ops.h"

namespace tandem::kernels {
namespace {

using bench::Random;

Ops& Backend(int which) {
  static CpuOps cpu(bench::ThreadsFromEnv());
  static ReferenceOps ref;
  if (which == 1) return ref;
  return cpu;
}

void Rate(benchmark::State& state, const char* name, double per_iteration) {
  state.counters[name] =
      benchmark::Counter(per_iteration, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_RmsNorm(benchmark::State& state) {
  const int64_t T = state.range(0), H = 768;
  auto x = Random(T * H, 1), w = Random(H, 2);
  std::vector<float> out(T * H);
  for (auto _ : state) Backend(0).RmsNorm(x.data(), H, T, H, w.data(), 1e-6f, out.data(), H);
  Rate(state, "GB/s", 8.0 * T * H * 1e-9);
}
BENCHMARK(BM_RmsNorm)->Arg(1)->Arg(512)->UseRealTime();

void BM_GatedRmsNorm(benchmark::State& state) {
  const int64_t T = state.range(0), D = 1536;
  auto y = Random(T * D, 1), z = Random(T * D, 2), w = Random(D, 3);
  std::vector<float> out(T * D);
  for (auto _ : state) {
    Backend(0).GatedRmsNorm(y.data(), D, z.data(), D, T, D, 1, w.data(), 1e-5f, out.data(), D);
  }
  Rate(state, "GB/s", 12.0 * T * D * 1e-9);
}
BENCHMARK(BM_GatedRmsNorm)->Arg(1)->Arg(512)->UseRealTime();

void BM_Rope(benchmark::State& state) {
  const int64_t T = state.range(0), heads = 12, dh = 64;
  auto x = Random(T * heads * dh, 1);
  for (auto _ : state) Backend(0).Rope(x.data(), heads * dh, T, heads, dh, 100, 10000.0f);
  Rate(state, "GB/s", 8.0 * T * heads * dh * 1e-9);
}
BENCHMARK(BM_Rope)->Arg(1)->Arg(512)->UseRealTime();

void BM_GatedActivation(benchmark::State& state) {
  const int64_t T = state.range(0), I = 2048;
  auto gu = Random(T * 2 * I, 1, -4, 4);
  std::vector<float> out(T * I);
  for (auto _ : state) {
    Backend(0).GatedActivation(Activation::kSilu, gu.data(), 2 * I, gu.data() + I, 2 * I, T, I,
                               out.data(), I);
  }
  Rate(state, "GB/s", 12.0 * T * I * 1e-9);
}
BENCHMARK(BM_GatedActivation)->Arg(1)->Arg(512)->UseRealTime();

void BM_GatedMlp(benchmark::State& state) {
  const int64_t T = state.range(0), H = 768, I = 2048;
  auto x = Random(T * H, 1), gu = Random(2 * I * H, 2), down = Random(H * I, 3);
  std::vector<float> out(T * H);
  Workspace ws;
  for (auto _ : state) {
    ws.Reset();
    Backend(0).GatedMlp(Activation::kSilu, x.data(), H, T, WeightMatrix::F32(gu.data(), 2 * I, H),
                        WeightMatrix::F32(down.data(), H, I), out.data(), H, ws);
  }
  Rate(state, "GFLOP/s", 6.0 * T * H * I * 1e-9);
}
BENCHMARK(BM_GatedMlp)->Arg(1)->Arg(512)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_Moe(benchmark::State& state) {
  const int64_t T = state.range(0), H = 768, I = 1024;
  const int32_t E = 8, K = 2;
  std::vector<std::vector<float>> gu, down;
  std::vector<WeightMatrix> gp, dp;
  for (int e = 0; e < E; ++e) {
    gu.push_back(Random(2 * I * H, 10 + e));
    down.push_back(Random(H * I, 20 + e));
    gp.push_back(WeightMatrix::F32(gu.back().data(), 2 * I, H));
    dp.push_back(WeightMatrix::F32(down.back().data(), H, I));
  }
  auto x = Random(T * H, 1), router = Random(E * H, 2);
  std::vector<float> out(T * H);
  MoeArgs a;
  a.tokens = T;
  a.hidden = H;
  a.intermediate = I;
  a.num_experts = E;
  a.top_k = K;
  a.x = x.data();
  a.ld_x = H;
  a.router = WeightMatrix::F32(router.data(), E, H);
  a.gate_up = gp.data();
  a.down = dp.data();
  a.out = out.data();
  a.ld_out = H;
  Workspace ws;
  for (auto _ : state) {
    ws.Reset();
    Backend(0).Moe(a, ws);
  }
  Rate(state, "GFLOP/s", (6.0 * T * K * H * I + 2.0 * T * E * H) * 1e-9);
}
BENCHMARK(BM_Moe)->Arg(1)->Arg(512)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Args: T, channels.
void BM_CausalConv1d(benchmark::State& state) {
  const int64_t T = state.range(0), C = state.range(1), K = 4;
  auto u = Random(T * C, 1), w = Random(C * K, 2), b = Random(C, 3);
  std::vector<float> st((K - 1) * C), out(T * C);
  CausalConvArgs a;
  a.tokens = T;
  a.channels = static_cast<int32_t>(C);
  a.kernel = static_cast<int32_t>(K);
  a.u = u.data();
  a.ld_u = C;
  a.weight = w.data();
  a.bias = b.data();
  a.state = st.data();
  a.out = out.data();
  a.ld_out = C;
  for (auto _ : state) {
    if (T == 1) {
      Backend(0).CausalConv1dStep(a);
    } else {
      Backend(0).CausalConv1d(a);
    }
  }
  Rate(state, "GB/s", 4.0 * (2 * T * C + 2 * (K - 1) * C + K * C) * 1e-9);
}
BENCHMARK(BM_CausalConv1d)
    ->Args({1, 1536})
    ->Args({512, 1536})
    ->Args({1, 1792})
    ->Args({512, 1792})
    ->UseRealTime();

// Args: T, backend (0 cpu, 1 reference). Mamba-1: din 1536, N 16.
void BM_SelectiveScan(benchmark::State& state) {
  const int64_t T = state.range(0), D = 1536, N = 16;
  auto u = Random(T * D, 1), delta = Random(T * D, 2, -4, 1), db = Random(D, 3);
  auto A = Random(D * N, 4, -3, -0.1f), B = Random(T * N, 5), C = Random(T * N, 6);
  auto Dv = Random(D, 7), z = Random(T * D, 8);
  std::vector<float> st(D * N), y(T * D);
  SelectiveScanArgs a;
  a.tokens = T;
  a.inner = static_cast<int32_t>(D);
  a.state_size = static_cast<int32_t>(N);
  a.u = u.data();
  a.ld_u = D;
  a.delta = delta.data();
  a.ld_delta = D;
  a.delta_bias = db.data();
  a.a = A.data();
  a.b = B.data();
  a.ld_b = N;
  a.c = C.data();
  a.ld_c = N;
  a.d = Dv.data();
  a.z = z.data();
  a.ld_z = D;
  a.state = st.data();
  a.y = y.data();
  a.ld_y = D;
  for (auto _ : state) {
    if (T == 1) {
      Backend(state.range(1)).SelectiveStateUpdate(a);
    } else {
      Backend(state.range(1)).SelectiveScan(a);
    }
  }
  state.SetLabel(state.range(1) == 0 ? "cpu" : "reference");
  // Per token and (d, n): exp, 2 mul-adds for the update, 1 for the readout ≈ 7 FLOPs.
  Rate(state, "GFLOP/s", 7.0 * T * D * N * 1e-9);
}
BENCHMARK(BM_SelectiveScan)
    ->Args({1, 0})
    ->Args({512, 0})
    ->Args({512, 1})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// Args: T, N, CPU max chunk, backend (0 cpu, 1 reference). Mamba-2: 24 heads × P 64, 1 group;
// the caller asks for chunk_size 256 (the checkpoints' value) and the CPU backend caps it.
void BM_SsdScan(benchmark::State& state) {
  const int64_t T = state.range(0), N = state.range(1), H = 24, P = 64;
  auto x = Random(T * H * P, 1), dt = Random(T * H, 2, -5, 0), dtb = Random(H, 3);
  auto A = Random(H, 4, -3, -0.1f), B = Random(T * N, 5), C = Random(T * N, 6), Dv = Random(H, 7);
  std::vector<float> st(H * P * N), y(T * H * P);
  SsdScanArgs a;
  a.tokens = T;
  a.heads = static_cast<int32_t>(H);
  a.head_dim = static_cast<int32_t>(P);
  a.groups = 1;
  a.state_size = static_cast<int32_t>(N);
  a.chunk_size = 256;
  static CpuOps* cpu = dynamic_cast<CpuOps*>(&Backend(0));
  cpu->set_ssd_max_chunk(static_cast<int32_t>(state.range(2)));
  a.x = x.data();
  a.ld_x = H * P;
  a.dt = dt.data();
  a.ld_dt = H;
  a.dt_bias = dtb.data();
  a.a = A.data();
  a.b = B.data();
  a.ld_b = N;
  a.c = C.data();
  a.ld_c = N;
  a.d = Dv.data();
  a.state = st.data();
  a.y = y.data();
  a.ld_y = H * P;
  Workspace ws;
  for (auto _ : state) {
    ws.Reset();
    if (T == 1) {
      Backend(state.range(3)).SsdStateUpdate(a);
    } else {
      Backend(state.range(3)).SsdScan(a, ws);
    }
  }
  state.SetLabel(state.range(3) == 0 ? "cpu, chunk " + std::to_string(state.range(2))
                                     : "reference");
  // FLOPs of the recurrence (update 4, readout 2 per (t, h, p, n)), whatever the algorithm.
  Rate(state, "GFLOP/s", 6.0 * T * H * P * N * 1e-9);
}
BENCHMARK(BM_SsdScan)
    ->Args({1, 16, 32, 0})
    ->Args({1, 128, 32, 0})
    ->Args({512, 16, 32, 0})
    ->Args({512, 16, 256, 0})
    ->Args({512, 128, 16, 0})
    ->Args({512, 128, 32, 0})
    ->Args({512, 128, 64, 0})
    ->Args({512, 128, 256, 0})
    ->Args({512, 128, 256, 1})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// Args: T (queries), context before them, kv heads, backend. 12 heads × 64, pages of 16.
void BM_Attention(benchmark::State& state) {
  const int64_t T = state.range(0), ctx = state.range(1), heads = 12, dh = 64, pt = 16;
  const int32_t kvh = static_cast<int32_t>(state.range(2));
  const int64_t total = ctx + T, num_pages = (total + pt - 1) / pt;
  std::vector<std::vector<float>> storage;
  std::vector<float*> pages;
  for (int64_t p = 0; p < num_pages; ++p) {
    storage.push_back(Random(2 * kvh * pt * dh, 100 + p));
    pages.push_back(storage.back().data());
  }
  PagedKv kv;
  kv.pages = pages.data();
  kv.page_tokens = pt;
  kv.num_kv_heads = kvh;
  kv.head_dim = dh;
  auto q = Random(T * heads * dh, 1);
  std::vector<float> out(T * heads * dh);
  AttentionArgs a;
  a.tokens = T;
  a.start_pos = ctx;
  a.heads = heads;
  a.q = q.data();
  a.ld_q = heads * dh;
  a.kv = kv;
  a.scale = 0.125f;
  a.out = out.data();
  a.ld_out = heads * dh;
  Workspace ws;
  for (auto _ : state) {
    ws.Reset();
    Backend(state.range(3)).Attention(a, ws);
  }
  state.SetLabel(state.range(3) == 0 ? "cpu" : "reference");
  // QKᵀ and PV over the causal triangle: 4·dh FLOPs per (query, key, head).
  const double pairs = static_cast<double>(T) * ctx + T * (T + 1) / 2.0;
  Rate(state, "GFLOP/s", 4.0 * dh * heads * pairs * 1e-9);
}
BENCHMARK(BM_Attention)
    ->Args({1, 511, 12, 0})
    ->Args({1, 4095, 12, 0})
    ->Args({1, 4095, 4, 0})
    ->Args({512, 0, 12, 0})
    ->Args({512, 0, 4, 0})
    ->Args({512, 0, 12, 1})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

void BM_WriteKv(benchmark::State& state) {
  const int64_t T = state.range(0), kvh = 12, dh = 64, pt = 16;
  const int64_t num_pages = (T + pt - 1) / pt;
  std::vector<std::vector<float>> storage;
  std::vector<float*> pages;
  for (int64_t p = 0; p < num_pages; ++p) {
    storage.emplace_back(2 * kvh * pt * dh);
    pages.push_back(storage.back().data());
  }
  PagedKv kv;
  kv.pages = pages.data();
  kv.page_tokens = pt;
  kv.num_kv_heads = static_cast<int32_t>(kvh);
  kv.head_dim = static_cast<int32_t>(dh);
  auto k = Random(T * kvh * dh, 1), v = Random(T * kvh * dh, 2);
  for (auto _ : state) {
    Backend(0).WriteKv(k.data(), kvh * dh, v.data(), kvh * dh, T, 0, kv);
  }
  Rate(state, "GB/s", 16.0 * T * kvh * dh * 1e-9);
}
BENCHMARK(BM_WriteKv)->Arg(1)->Arg(512)->UseRealTime();

}  // namespace
}  // namespace tandem::kernels

namespace tandem::kernels {
namespace {

// The cost of one parallel loop with trivial bodies: the floor under every multithreaded op.
void BM_ThreadPoolRun(benchmark::State& state) {
  ThreadPool pool(bench::ThreadsFromEnv());
  std::vector<int64_t> sink(64 * pool.size());
  for (auto _ : state) {
    pool.Run(pool.size(), [&](int64_t i) { sink[i * 64] += i; });
  }
  benchmark::DoNotOptimize(sink.data());
  state.SetLabel(std::to_string(pool.size()) + " threads");
}
BENCHMARK(BM_ThreadPoolRun)->UseRealTime();

}  // namespace
}  // namespace tandem::kernels
