// Compiled grammars by what they were compiled from, so that a client that sends the same JSON
// Schema or tool list with every request (as agents do) pays for compiling it once: 16 tools
// take ~1.4 ms to compile and a lookup microseconds (docs/BENCHMARKS.md, "Tool calls").
//
// The least recently used entries go first once the cache holds more than its entry count or
// its bytes (keys and grammars' programs). Errors are not kept: a bad schema is compiled and
// refused each time. Thread-safe: the compile runs outside the lock, so two requests compiling
// one new grammar at once may both compile it (the result is the same).
#ifndef TANDEM_ENGINE_GRAMMAR_CACHE_H_
#define TANDEM_ENGINE_GRAMMAR_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "engine/grammar.h"

namespace tandem::engine {

class GrammarCache {
 public:
  explicit GrammarCache(size_t max_bytes = size_t{64} << 20, size_t max_entries = 256)
      : max_bytes_(max_bytes), max_entries_(max_entries) {}

  // The grammar cached under `key`, else what `compile` returns (kept when it fits).
  absl::StatusOr<std::shared_ptr<const Grammar>> GetOrCompile(
      const std::string& key, const std::function<absl::StatusOr<Grammar>()>& compile);

  size_t entries() const;
  size_t bytes() const;
  int64_t hits() const;
  int64_t compiles() const;  // misses that compiled, refused ones included

 private:
  using Entry = std::pair<std::string, std::shared_ptr<const Grammar>>;
  static size_t Cost(const Entry& entry);

  const size_t max_bytes_;
  const size_t max_entries_;
  mutable std::mutex mu_;
  std::list<Entry> recent_;  // most recently used first
  absl::flat_hash_map<std::string, std::list<Entry>::iterator> by_key_;
  size_t bytes_ = 0;
  int64_t hits_ = 0;
  int64_t compiles_ = 0;
};

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_GRAMMAR_CACHE_H_
