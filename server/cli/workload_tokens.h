// Model token ids for synthetic workloads, shared by every load generator (`tandem bench-engine`
// through the engine, `tandem bench` over gRPC) so that a workload means the same prompts to
// both: seeded random prompts for generated sessions, and a trace's tokens (Mooncake hash_ids
// expanded by cache/trace.h) mapped into a model's vocabulary.
#ifndef TANDEM_SERVER_CLI_WORKLOAD_TOKENS_H_
#define TANDEM_SERVER_CLI_WORKLOAD_TOKENS_H_

#include <cstdint>
#include <vector>

#include "cache/trace.h"

namespace tandem::cli {

// A token id in [4, vocab): ids below 4 are special in every tokenizer we ship. `vocab` > 4.
int32_t MapToVocab(uint64_t x, int32_t vocab);

// A 64-bit mixing function (splitmix64's finaliser): nearby seeds give unrelated streams.
uint64_t MixBits(uint64_t x);

// `n` pseudo-random ids in [4, vocab), a function of `stream` alone.
std::vector<int32_t> RandomTokens(size_t n, uint64_t stream, int32_t vocab);

// Request i's prompt from `trace`, cut to its first `max_tokens` and mapped into [4, vocab).
// Equal trace tokens map to equal ids, so prefixes the trace shares stay shared.
std::vector<int32_t> TracePrompt(const cache::Trace& trace, size_t i, size_t max_tokens,
                                 int32_t vocab);

}  // namespace tandem::cli

#endif  // TANDEM_SERVER_CLI_WORKLOAD_TOKENS_H_
