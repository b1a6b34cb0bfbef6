// Vocabularies for the benchmarks of structured output and tool calls (the bundled model's
// tokens, and a 131,072-token vocabulary grown from them, the size of Llama 3's or Nemotron's),
// and the timing of a constrained step's vocabulary walk.
#ifndef TANDEM_BENCH_BENCH_VOCABULARY_H_
#define TANDEM_BENCH_BENCH_VOCABULARY_H_

#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/output_constraint.h"
#include "models/tokenizer.h"

namespace tandem::bench {

// The bundled model's non-special tokens and their bytes; empty when it does not load.
inline std::vector<std::pair<int32_t, std::string>> BundledTokens() {
  auto tokenizer =
      models::LoadTokenizer(std::string(TANDEM_SOURCE_DIR) + "/bundled/tandem-tiny-chat");
  if (!tokenizer.ok()) return {};
  std::vector<std::pair<int32_t, std::string>> tokens;
  for (int32_t id = 0; id < (*tokenizer)->vocab_size(); ++id) {
    if (!(*tokenizer)->IsSpecial(id)) tokens.emplace_back(id, (*tokenizer)->TokenBytes(id));
  }
  return tokens;
}

// The bundled tokens and pairs of them, drawn at random, to 131,072 distinct tokens: the shape of
// a large BPE vocabulary, whose long tokens are merges of shorter ones.
inline std::vector<std::pair<int32_t, std::string>> LargeTokens() {
  std::vector<std::pair<int32_t, std::string>> tokens = BundledTokens();
  if (tokens.empty()) return tokens;
  std::set<std::string> seen;
  for (const auto& t : tokens) seen.insert(t.second);
  std::mt19937 gen(5);
  while (tokens.size() < 131072) {
    const std::string joined = tokens[gen() % 4000].second + tokens[gen() % 4000].second;
    if (seen.insert(joined).second) {
      tokens.emplace_back(static_cast<int32_t>(tokens.size()) + 8, joined);
    }
  }
  return tokens;
}

// Times the walk that finds the tokens `constraint` allows next (the end token is 2), and counts
// them.
inline void TimeAllowedTokens(benchmark::State& state, engine::OutputConstraint& constraint) {
  std::vector<int32_t> allowed;
  const std::vector<int32_t> end = {2};
  for (auto _ : state) {
    if (!constraint.AllowedTokens(end, &allowed).ok()) state.SkipWithError("walk failed");
    benchmark::DoNotOptimize(allowed.data());
  }
  state.counters["allowed"] = static_cast<double>(allowed.size());
}

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_BENCH_VOCABULARY_H_
