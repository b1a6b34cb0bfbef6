// Request traces for the simulator: each request is a prompt (token ids) that arrives at some
// time, and the tokens its decoding produces. Traces come from JSONL files or from the seeded
// generators in workloads.h.
//
// File formats (one JSON object per line; blank lines are skipped):
//  * Mooncake (kvcache-ai/Mooncake FAST'25 release):
//      {"timestamp": ms, "input_length": n, "output_length": m, "hash_ids": [h0, h1, ...]}
//    Each hash id names a 512-token block; block i covers prompt tokens [512 i, 512 (i+1)), the
//    last block is partial, so hash_ids must have ceil(n / 512) entries. A block's tokens are a
//    deterministic function of (hash id, offset), so equal ids give equal tokens and shared
//    leading ids give shared prefixes — the only reuse the trace encodes. Output tokens are
//    fresh per request (a function of the line number) and never match anything: the trace's
//    later turns name their reused history through hash_ids, not through our invented outputs.
//  * Sessions (Marconi's format):
//      {"session_id": s, "turn_id": t, "ts": seconds, "input_tokens": [...],
//       "output_tokens": [...]}   ("num_input_tokens"/"num_output_tokens" are checked if present)
//    input_tokens already holds the conversation history plus the new user turn.
// A malformed line gives INVALID_ARGUMENT naming the file, the line number and the field.
#ifndef TANDEM_CACHE_TRACE_H_
#define TANDEM_CACHE_TRACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cache/prefix_cache.h"

namespace tandem::cache {

inline constexpr size_t kMooncakeBlockTokens = 512;

struct TraceRequest {
  double arrival_s = 0;
  uint64_t session = 0;
  uint32_t turn = 0;
  size_t input_tokens = 0;
  size_t output_tokens = 0;
  // Where the tokens come from: a stream (input = stream[0, input_tokens), output = the next
  // output_tokens), or Mooncake blocks.
  uint32_t stream = 0;
  std::vector<uint32_t> blocks;
  uint64_t output_seed = 0;
};

class Trace {
 public:
  std::string name;
  std::vector<TraceRequest> requests;
  // Token streams that requests point into (a session's whole conversation, for instance).
  std::vector<std::vector<TokenId>> streams;

  size_t size() const { return requests.size(); }
  // Materialises request i's prompt and output tokens.
  void Tokens(size_t i, std::vector<TokenId>* input, std::vector<TokenId>* output) const;
  uint64_t total_input_tokens() const;
};

// The token at `offset` of Mooncake block `hash_id` (non-negative, < 2^30).
TokenId MooncakeToken(uint32_t hash_id, uint32_t offset);

absl::StatusOr<Trace> ReadMooncakeTrace(const std::string& path);
absl::StatusOr<Trace> ReadSessionTrace(const std::string& path);
// Picks the format from the first non-blank line's keys.
absl::StatusOr<Trace> ReadTrace(const std::string& path);

// Parsing from memory; `source` names the input in error messages.
absl::StatusOr<Trace> ParseMooncakeTrace(const std::string& text, const std::string& source);
absl::StatusOr<Trace> ParseSessionTrace(const std::string& text, const std::string& source);

}  // namespace tandem::cache

#endif  // TANDEM_CACHE_TRACE_H_
