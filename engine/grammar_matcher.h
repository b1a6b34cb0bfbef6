// Which bytes a Grammar (engine/grammar.h) allows next, after the bytes so far.
//
// The matcher keeps every way the input so far can be parsed as a set of parse stacks. A stack
// is a chain of frames: its top frame is the position of the byte set the next byte must match;
// each frame below is where a rule returns to once it ends. A grammar may be ambiguous (JSON
// Schema's anyOf), so several stacks can be alive at once; a stack that has returned from the
// root means the input so far is a whole sentence (complete()).
//
// Frames live in an arena as (position, parent) pairs and are hash-consed: one pair, one frame.
// So stacks share their lower frames, advancing a stack by a byte touches its top only, and two
// stacks are equal exactly when their top frames are. A ParseState is the sorted list of its
// stacks' top frames, so equal states are equal vectors: the vocabulary walk
// (engine/token_trie.h) relies on that to memoise transitions and to see when a byte leaves the
// state unchanged. Mark() and Rewind() bracket such a walk so that the frames it made are dropped
// afterwards.
//
// A rule reference whose alternative ends right after it is a tail call: its caller's frame is
// dropped instead of kept, so right-recursive repetition (GrammarBuilder::Star) runs in constant
// stack depth however long the repeated text grows.
#ifndef TANDEM_ENGINE_GRAMMAR_MATCHER_H_
#define TANDEM_ENGINE_GRAMMAR_MATCHER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/grammar.h"

namespace tandem::engine {

// A set of parse stacks: the ids of their top frames in a GrammarMatcher's arena, ascending, or
// kCompleteStack (first) for a stack that returned from the root.
using ParseState = std::vector<int32_t>;
inline constexpr int32_t kCompleteStack = -1;

class GrammarMatcher {
 public:
  // More stacks than this alive at once means the grammar is pathologically ambiguous: the step
  // that would exceed it fails (RESOURCE_EXHAUSTED) rather than slow the server down.
  static constexpr size_t kMaxStacks = 4096;

  // The matcher at the start of the input; RESOURCE_EXHAUSTED past kMaxStacks.
  static absl::StatusOr<GrammarMatcher> Create(std::shared_ptr<const Grammar> grammar);

  // Consumes `bytes` if the grammar allows them after the input so far: OK and the state
  // advanced, or INVALID_ARGUMENT (state unchanged) naming the first refused byte.
  absl::Status Accept(std::string_view bytes);
  // Whether the input so far is a whole sentence of the grammar (it may still go on).
  bool complete() const { return IsComplete(state_); }
  // Whether some byte may follow the input so far.
  bool can_continue() const;
  const ParseState& state() const { return state_; }

  // The building block of walks over many candidate continuations. Advance writes into `next`
  // the state after `byte` (empty when refused; OK) or RESOURCE_EXHAUSTED past kMaxStacks.
  // `state` must be state() or a state Advance made since the last Mark().
  absl::Status Advance(const ParseState& state, uint8_t byte, ParseState* next);
  static bool IsComplete(const ParseState& state) {
    return !state.empty() && state.front() == kCompleteStack;
  }
  // Whether some stack of `state` can take `byte` (cheaper than Advance, builds nothing).
  bool Allows(const ParseState& state, uint8_t byte) const;

  // Mark() before a walk of Advance calls from state(), Rewind() after it: the frames made in
  // between are released. Accept must not run in between.
  size_t Mark() const { return frames_.size(); }
  void Rewind(size_t mark);

 private:
  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {}

  struct Frame {
    int32_t position;  // into the grammar's elements
    int32_t parent;    // the frame below, or -1
  };
  static uint64_t Key(int32_t position, int32_t parent) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(position)) << 32) |
           static_cast<uint32_t>(parent);
  }

  // The frame (position, parent), made if new.
  int32_t Intern(int32_t position, int32_t parent);
  // Adds to `out` every stack the partial stack (position, parent) expands to without consuming
  // a byte: rules are entered, ended alternatives return to their caller.
  void Expand(int32_t position, int32_t parent, ParseState* out);
  // Sorts and deduplicates `out`; false (and `out` cleared) when it holds more than kMaxStacks
  // stacks or Expand stopped adding to it.
  bool Canonical(ParseState* out);
  // Copies the frames `state_` uses into a fresh arena, dropping the rest.
  void Compact();

  std::shared_ptr<const Grammar> grammar_;
  std::vector<Frame> frames_;
  absl::flat_hash_map<uint64_t, int32_t> frame_ids_;
  ParseState state_;
  ParseState scratch_;
  bool overflowed_ = false;  // Expand dropped stacks since the last Canonical
  // Expand's work list, and the (position, parent) pairs expanded in the current Advance.
  std::vector<std::pair<int32_t, int32_t>> expand_work_;
  absl::flat_hash_set<uint64_t> expanded_;
};

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_GRAMMAR_MATCHER_H_
