#include "engine/grammar_cache.h"

namespace tandem::engine {

size_t GrammarCache::Cost(const Entry& entry) {
  // The key is held twice: in the entry and in the index.
  return 2 * entry.first.size() + entry.second->memory_bytes();
}

absl::StatusOr<std::shared_ptr<const Grammar>> GrammarCache::GetOrCompile(
    const std::string& key, const std::function<absl::StatusOr<Grammar>()>& compile) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = by_key_.find(key); it != by_key_.end()) {
      recent_.splice(recent_.begin(), recent_, it->second);
      ++hits_;
      return it->second->second;
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++compiles_;
  }
  absl::StatusOr<Grammar> compiled = compile();
  if (!compiled.ok()) return compiled.status();
  auto grammar = std::make_shared<const Grammar>(*std::move(compiled));
  Entry entry{key, grammar};
  const size_t cost = Cost(entry);
  if (cost > max_bytes_ || max_entries_ == 0) return grammar;
  std::lock_guard<std::mutex> lock(mu_);
  if (by_key_.contains(key)) return grammar;  // compiled meanwhile by another request
  recent_.push_front(std::move(entry));
  by_key_.emplace(key, recent_.begin());
  bytes_ += cost;
  while (bytes_ > max_bytes_ || recent_.size() > max_entries_) {
    bytes_ -= Cost(recent_.back());
    by_key_.erase(recent_.back().first);
    recent_.pop_back();
  }
  return grammar;
}

size_t GrammarCache::entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return recent_.size();
}

size_t GrammarCache::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

int64_t GrammarCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

int64_t GrammarCache::compiles() const {
  std::lock_guard<std::mutex> lock(mu_);
  return compiles_;
}

}  // namespace tandem::engine
