#include "server/cli/workload_tokens.h"

namespace tandem::cli {

int32_t MapToVocab(uint64_t x, int32_t vocab) {
  return 4 + static_cast<int32_t>(x % static_cast<uint64_t>(vocab - 4));
}

uint64_t MixBits(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  return x ^ (x >> 33);
}

std::vector<int32_t> RandomTokens(size_t n, uint64_t stream, int32_t vocab) {
  std::vector<int32_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = MapToVocab(MixBits(stream * 1000003 + i), vocab);
  return out;
}

std::vector<int32_t> TracePrompt(const cache::Trace& trace, size_t i, size_t max_tokens,
                                 int32_t vocab) {
  std::vector<cache::TokenId> input, output;
  trace.Tokens(i, &input, &output);
  if (input.size() > max_tokens) input.resize(max_tokens);
  std::vector<int32_t> prompt(input.size());
  for (size_t k = 0; k < input.size(); ++k) {
    prompt[k] = MapToVocab(static_cast<uint64_t>(input[k]), vocab);
  }
  return prompt;
}

}  // namespace tandem::cli
