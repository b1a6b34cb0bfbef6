#include "engine/logits_processors.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tandem::engine {
namespace {
size_t SlotOf(int32_t token, size_t mask) {
  // Fibonacci hashing spreads consecutive ids (common in prompts) over the table.
  return static_cast<size_t>(
             (static_cast<uint64_t>(static_cast<uint32_t>(token)) * 0x9E3779B97F4A7C15ULL) >> 32) &
         mask;
}
}  // namespace

void TokenCounts::Reserve(size_t distinct_tokens) {
  entries_.reserve(distinct_tokens);
  generated_entries_.reserve(distinct_tokens);
  size_t slots = 16;
  while (slots < 2 * distinct_tokens) slots *= 2;
  if (slots > slots_.size()) Rehash(slots);
}

void TokenCounts::Rehash(size_t slots) {
  slots_.assign(slots, -1);
  const size_t mask = slots - 1;
  for (size_t i = 0; i < entries_.size(); ++i) {
    size_t s = SlotOf(entries_[i].token, mask);
    while (slots_[s] >= 0) s = (s + 1) & mask;
    slots_[s] = static_cast<int32_t>(i);
  }
}

const TokenCounts::Entry* TokenCounts::Lookup(int32_t token) const {
  if (slots_.empty()) return nullptr;
  const size_t mask = slots_.size() - 1;
  for (size_t s = SlotOf(token, mask);; s = (s + 1) & mask) {
    if (slots_[s] < 0) return nullptr;
    if (entries_[slots_[s]].token == token) return &entries_[slots_[s]];
  }
}

TokenCounts::Entry& TokenCounts::Find(int32_t token) {
  // Keep the load factor at or below 1/2 so that probes stay short.
  if (2 * (entries_.size() + 1) > slots_.size()) Rehash(std::max<size_t>(16, 2 * slots_.size()));
  const size_t mask = slots_.size() - 1;
  size_t s = SlotOf(token, mask);
  for (; slots_[s] >= 0; s = (s + 1) & mask) {
    if (entries_[slots_[s]].token == token) return entries_[slots_[s]];
  }
  slots_[s] = static_cast<int32_t>(entries_.size());
  entries_.push_back(Entry{token, 0, false});
  return entries_.back();
}

void TokenCounts::AddPrompt(int32_t token) { Find(token).in_prompt = true; }

void TokenCounts::AddGenerated(int32_t token) {
  Entry& e = Find(token);
  if (e.generated++ == 0) generated_entries_.push_back(static_cast<int32_t>(&e - entries_.data()));
}

int32_t TokenCounts::generated(int32_t token) const {
  const Entry* e = Lookup(token);
  return e == nullptr ? 0 : e->generated;
}

bool TokenCounts::in_prompt(int32_t token) const {
  const Entry* e = Lookup(token);
  return e != nullptr && e->in_prompt;
}

void AppendPenaltyTokens(const TokenCounts& counts, std::vector<kernels::PenaltyToken>* out) {
  for (const TokenCounts::Entry& e : counts.entries()) out->push_back({e.token, e.generated});
}

}  // namespace tandem::engine
