// Deterministic pseudo-random prompts shared by the engine and server tests.
#ifndef TANDEM_TESTS_TEST_TOKENS_H_
#define TANDEM_TESTS_TEST_TOKENS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tandem::testing {

// n pseudo-random prompt ids in [4, vocab) (ids below 4 are special), the same for the same seed.
inline std::vector<int32_t> Tokens(size_t n, uint32_t seed, int32_t vocab) {
  std::vector<int32_t> out(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& t : out) {
    x = x * 1664525u + 1013904223u;
    t = 4 + static_cast<int32_t>((x >> 8) % static_cast<uint32_t>(vocab - 4));
  }
  return out;
}

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_TEST_TOKENS_H_
