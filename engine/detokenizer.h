// Incremental detokenization: token ids in, one at a time; text deltas out. The deltas of a
// sequence, concatenated (with Flush() at the end), equal tokenizer.Decode(ids) byte for byte —
// U+FFFD where Decode puts it, the leading space dropped where Decode drops it — and each delta
// is valid UTF-8 on its own (never half a code point).
//
// How, without re-decoding the whole output each step: Decode renders a sequence as a head (the
// first tokens, up to the first that produces text — this is where the leading-space and
// first-token rules act) followed by units that render the same wherever they stand: a single
// token, or a maximal run of byte-fallback tokens (whose bytes are assembled together, so a run
// is one unit). The head is decoded with Decode itself; each later unit is decoded by Decode
// right after a fixed "anchor" token that absorbs the first-token rules, and the anchor's text is
// cut off. That costs O(1) per token (a byte run: O(its length) once; the head: O(its length)
// per token while it still renders as nothing, usually for one token), and exactness comes from
// the tokenizer's own Decode rather than from a second copy of its rules.
//
// Byte runs: tokenizers' (Hugging Face) ByteFallback decoder turns a whole run into one U+FFFD
// per byte when any of it is not valid UTF-8, so a later byte can change how earlier bytes
// render: such a run is held back until a non-byte token (or Flush) ends it. SentencePiece
// replaces only the offending bytes, so its runs are emitted code point by code point. Which of
// the two a tokenizer does is probed once, from its Decode.
//
// Byte-level BPE tokenizers (models::Tokenizer::decodes_as_byte_stream) need none of this: their
// Decode is the lossy UTF-8 of all the tokens' bytes, so the output is one byte stream, emitted
// as far as later bytes cannot change it (a token may end inside a character).
//
// Ids outside the vocabulary are ignored (as Decode ignores them); with skip_special_tokens the
// special ids are ignored too.
#ifndef TANDEM_ENGINE_DETOKENIZER_H_
#define TANDEM_ENGINE_DETOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "models/tokenizer.h"

namespace tandem::engine {

// What streaming needs to know about one tokenizer's Decode, found once (one TokenToPiece per id
// and a few hundred Decode calls; 2 bytes per id) and shared, read-only, by every sequence's
// Detokenizer on any thread. Keeps a reference to the tokenizer, which must outlive it.
class DetokenizerVocab {
 public:
  explicit DetokenizerVocab(const models::Tokenizer& tokenizer);

  const models::Tokenizer& tokenizer() const { return *tokenizer_; }
  // The byte of a byte-fallback token ("<0xE2>"), or -1.
  int ByteOf(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < kind_.size() && kind_[id] >= 0 ? kind_[id] : -1;
  }
  // Whether Decode ignores the id whatever skip_special_tokens says: outside the vocabulary, or
  // a hole in it (no token; tokenizer.json may have those).
  bool Ignored(int32_t id) const {
    return id < 0 || static_cast<size_t>(id) >= kind_.size() || kind_[id] == kHole;
  }
  // Whether byte runs may be emitted per code point (else: held until the run ends).
  bool streams_byte_runs() const { return streams_byte_runs_; }
  // Whether the whole output is one byte stream (a byte-level BPE).
  bool byte_stream() const { return byte_stream_; }
  bool has_anchor() const { return anchor_ >= 0; }

 private:
  friend class Detokenizer;
  // Text of `ids` (no head among them) as it renders after the anchor.
  std::string DecodeAfterAnchor(absl::Span<const int32_t> ids) const;

  static constexpr int16_t kOrdinary = -1;
  static constexpr int16_t kHole = -2;

  const models::Tokenizer* tokenizer_;
  std::vector<int16_t> kind_;  // per id: its byte (byte-fallback tokens), kOrdinary or kHole
  int32_t anchor_ = -1;
  std::string anchor_text_;
  bool streams_byte_runs_ = false;
  bool byte_stream_ = false;
};

class Detokenizer {
 public:
  Detokenizer(std::shared_ptr<const DetokenizerVocab> vocab, bool skip_special_tokens);
  // Probes the tokenizer itself; prefer sharing a DetokenizerVocab between sequences.
  Detokenizer(const models::Tokenizer& tokenizer, bool skip_special_tokens);

  // Optional, before the first Add: the output continues the text of `prompt`, so its first
  // token is not at the start of the text (no leading-space rule). Then the deltas concatenate
  // to Decode(prompt ++ output) minus its prefix Decode(prompt). (When Decode(prompt) is empty
  // the output is still the head and the prompt's ids are kept as its context.) One exception: a
  // prompt that ends inside a byte-fallback run has already rendered those bytes (as U+FFFD),
  // and the output's bytes start a new run rather than completing the prompt's.
  void StartAfterPrompt(absl::Span<const int32_t> prompt);
  // Optional, before the first Add: special ids whose text is kept even when skipping them.
  void ShowSpecial(std::vector<int32_t> ids) { shown_special_ = std::move(ids); }

  // Appends to *delta the text that `id` completes (often all of its text, possibly nothing).
  void Add(int32_t id, std::string* delta);
  std::string Add(int32_t id) {
    std::string delta;
    Add(id, &delta);
    return delta;
  }
  // The sequence ended: appends whatever was held back (an unfinished byte run is decoded as
  // Decode would decode it at the end of the text).
  void Flush(std::string* delta);
  std::string Flush() {
    std::string delta;
    Flush(&delta);
    return delta;
  }

 private:
  bool Dropped(int32_t id) const;
  void EmitRunChunks(bool final, std::string* delta);
  bool HeadRunAtBoundary() const;

  std::shared_ptr<const DetokenizerVocab> vocab_;
  const models::Tokenizer& tok_;
  bool skip_special_;
  std::vector<int32_t> shown_special_;
  // Until the text is non-empty, the ids so far (the head), decoded together each time.
  bool head_done_ = false;
  std::vector<int32_t> head_;
  // The byte run being assembled after the head: its ids and bytes; [0, run_emitted_) already
  // emitted (streaming tokenizers only).
  std::vector<int32_t> run_ids_;
  std::string run_bytes_;
  size_t run_emitted_ = 0;
  // Byte-stream tokenizers: bytes that may still be part of a character.
  std::string stream_bytes_;
};

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_DETOKENIZER_H_
