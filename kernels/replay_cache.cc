#include "kernels/replay_cache.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace tandem::kernels {

ReplayCache::ReplayCache(DestroyGraph destroy, Limits limits) : destroy_(destroy), limits_(limits) {
  limits_.graphs = std::max<size_t>(limits_.graphs, 1);
  limits_.tracked = std::max(limits_.tracked, limits_.graphs);
}

ReplayCache::~ReplayCache() { Clear(); }

void ReplayCache::Clear() {
  for (auto& [hash, bucket] : entries_) {
    for (Entry& entry : bucket) {
      if (entry.graph != nullptr) destroy_(entry.graph);
    }
  }
  entries_.clear();
  tracked_ = 0;
  graphs_ = 0;
}

ReplayCache::Entry* ReplayCache::Find(const LaunchSignature& signature, uint64_t hash) {
  auto it = entries_.find(hash);
  if (it == entries_.end()) return nullptr;
  const std::span<const std::byte> bytes = signature.bytes();
  for (Entry& entry : it->second) {
    if (std::equal(entry.signature.begin(), entry.signature.end(), bytes.begin(), bytes.end())) {
      return &entry;
    }
  }
  return nullptr;
}

void ReplayCache::ForgetUncaptured() {
  const auto forget = [&](auto which) {
    for (auto it = entries_.begin(); it != entries_.end();) {
      std::vector<Entry>& bucket = it->second;
      const auto kept = std::remove_if(bucket.begin(), bucket.end(), which);
      tracked_ -= static_cast<size_t>(std::distance(kept, bucket.end()));
      bucket.erase(kept, bucket.end());
      it = bucket.empty() ? entries_.erase(it) : std::next(it);
    }
  };
  // Refused signatures are kept, so that they are not captured (and refused) again, unless
  // they and the graphs take more than half the list: new shapes need the room to be seen twice.
  forget([](const Entry& e) { return e.graph == nullptr && !e.refused; });
  if (tracked_ > limits_.tracked / 2) forget([](const Entry& e) { return e.graph == nullptr; });
}

void ReplayCache::EvictLeastRecentlyUsedGraph() {
  Entry* oldest = nullptr;
  for (auto& [hash, bucket] : entries_) {
    for (Entry& entry : bucket) {
      if (entry.graph != nullptr && (oldest == nullptr || entry.last_used < oldest->last_used)) {
        oldest = &entry;
      }
    }
  }
  if (oldest == nullptr) return;
  destroy_(oldest->graph);
  oldest->graph = nullptr;
  oldest->seen = 0;  // seen again, it is captured again
  --graphs_;
}

ReplayCache::Decision ReplayCache::Decide(const LaunchSignature& signature) {
  ++clock_;
  const uint64_t hash = signature.Hash();  // once: it reads the whole signature
  Entry* entry = Find(signature, hash);
  if (entry == nullptr) {
    if (tracked_ >= limits_.tracked) ForgetUncaptured();
    Entry fresh;
    fresh.signature.assign(signature.bytes().begin(), signature.bytes().end());
    fresh.seen = 1;
    fresh.last_used = clock_;
    entries_[hash].push_back(std::move(fresh));
    ++tracked_;
    return {};
  }
  entry->last_used = clock_;
  if (entry->graph != nullptr) {
    ++replays_;
    return {Plan::kReplay, entry->graph};
  }
  if (entry->refused || ++entry->seen < 2) return {};
  return {Plan::kCapture, nullptr};
}

void ReplayCache::Store(const LaunchSignature& signature, Graph graph) {
  if (graph == nullptr) return;
  Entry* entry = Find(signature, signature.Hash());
  if (entry == nullptr) {  // forgotten since the decision: keep nothing
    destroy_(graph);
    return;
  }
  if (entry->graph != nullptr) {
    destroy_(std::exchange(entry->graph, nullptr));
    --graphs_;
  }
  if (graphs_ >= limits_.graphs) EvictLeastRecentlyUsedGraph();
  entry->graph = graph;
  entry->last_used = ++clock_;
  ++graphs_;
  ++captures_;
}

void ReplayCache::Refuse(const LaunchSignature& signature) {
  Entry* entry = Find(signature, signature.Hash());
  if (entry == nullptr) return;
  entry->refused = true;
  if (entry->graph != nullptr) {
    destroy_(std::exchange(entry->graph, nullptr));
    --graphs_;
  }
}

}  // namespace tandem::kernels
