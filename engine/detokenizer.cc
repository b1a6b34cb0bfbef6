#include "engine/detokenizer.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "models/byte_level.h"
#include "models/unicode_utf8.h"

namespace tandem::engine {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";

// Whether the bytes from `pos` on could still become one well-formed sequence when more arrive.
// Saying yes too often only delays text, so the check looks at the lead and continuation bytes
// and not at the narrower second-byte ranges of E0, ED, F0 and F4.
bool MaybeIncomplete(const std::string& bytes, size_t pos) {
  const unsigned char lead = static_cast<unsigned char>(bytes[pos]);
  const size_t need = lead >= 0xC2 && lead <= 0xDF   ? 2
                      : lead >= 0xE0 && lead <= 0xEF ? 3
                      : lead >= 0xF0 && lead <= 0xF4 ? 4
                                                     : 0;
  if (need <= bytes.size() - pos) return false;
  for (size_t i = pos + 1; i < bytes.size(); ++i) {
    if ((static_cast<unsigned char>(bytes[i]) & 0xC0) != 0x80) return false;
  }
  return true;
}

// Without an anchor (a tokenizer where no token renders stably on its own) the units are
// rendered from TokenBytes, invalid bytes becoming U+FFFD one by one.
std::string RenderBytes(const std::string& bytes) {
  std::string out;
  for (size_t i = 0; i < bytes.size();) {
    const size_t n = models::Utf8SequenceLength(bytes, i);
    if (n == 0) {
      out += kReplacement;
      ++i;
    } else {
      out.append(bytes, i, n);
      i += n;
    }
  }
  return out;
}

bool StartsWithSpace(const std::string& s) {
  return !s.empty() && (s[0] == ' ' || s[0] == '\t' || s[0] == '\n' || s[0] == '\r');
}

}  // namespace

DetokenizerVocab::DetokenizerVocab(const models::Tokenizer& tokenizer)
    : tokenizer_(&tokenizer), byte_stream_(tokenizer.decodes_as_byte_stream()) {
  const models::Tokenizer& t = tokenizer;
  kind_.assign(std::max(t.vocab_size(), 0), kOrdinary);
  for (int32_t id = 0; id < t.vocab_size(); ++id) {
    const std::string piece = t.TokenToPiece(id);
    unsigned char byte;
    if (piece.empty() && !t.IsSpecial(id)) {
      kind_[id] = kHole;
    } else if (models::ParseByteFallbackPiece(piece, &byte)) {
      // Only when the tokenizer renders it as that byte (a tokenizer.json without a ByteFallback
      // decoder spells "<0x41>" out).
      const std::string bytes = t.TokenBytes(id);
      if (bytes.size() == 1 && static_cast<unsigned char>(bytes[0]) == byte) kind_[id] = byte;
    }
  }
  // The anchor: an ordinary token whose text is the same alone, doubled, and per TokenBytes, and
  // starts with no space — so no first-token rule can touch it or what follows it.
  const int32_t limit = std::min(t.vocab_size(), 50000);
  for (int32_t id = 0; id < limit && anchor_ < 0; ++id) {
    if (t.IsSpecial(id) || ByteOf(id) >= 0) continue;
    const std::string text = t.Decode({id}, false);
    if (text.empty() || StartsWithSpace(text) || !models::IsValidUtf8(text)) continue;
    if (t.TokenBytes(id) != text || t.Decode({id, id}, false) != text + text) continue;
    anchor_ = id;
    anchor_text_ = text;
  }
  if (anchor_ < 0) return;

  // Does Decode replace only the bad bytes of a run (sentencepiece) or the whole run (tokenizers'
  // ByteFallback)? Anything else, or no byte tokens to ask with: hold runs back, which is exact.
  const auto byte_id = [&](int byte) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    const std::string piece = std::string("<0x") + kHex[byte >> 4] + kHex[byte & 15] + ">";
    const int32_t id = t.PieceToId(piece);
    return id >= 0 && ByteOf(id) == byte ? id : -1;
  };
  const int32_t c3 = byte_id(0xC3), a9 = byte_id(0xA9), ff = byte_id(0xFF), e2 = byte_id(0xE2),
                x82 = byte_id(0x82), x41 = byte_id(0x41);
  if (c3 < 0 || a9 < 0 || ff < 0 || e2 < 0 || x82 < 0 || x41 < 0) return;
  const std::vector<int32_t> mixed = {c3, a9, ff, x41}, truncated = {e2, x82, x41};
  streams_byte_runs_ = DecodeAfterAnchor(mixed) ==
                           "\xC3\xA9\xEF\xBF\xBD"
                           "A" &&
                       DecodeAfterAnchor(truncated) ==
                           "\xEF\xBF\xBD\xEF\xBF\xBD"
                           "A";
}

std::string DetokenizerVocab::DecodeAfterAnchor(absl::Span<const int32_t> ids) const {
  if (anchor_ >= 0) {
    std::vector<int32_t> with_anchor;
    with_anchor.reserve(ids.size() + 1);
    with_anchor.push_back(anchor_);
    with_anchor.insert(with_anchor.end(), ids.begin(), ids.end());
    std::string text = tokenizer_->Decode(with_anchor, false);
    if (text.compare(0, anchor_text_.size(), anchor_text_) == 0) {
      return text.substr(anchor_text_.size());
    }
  }
  std::string bytes;
  for (int32_t id : ids) bytes += tokenizer_->TokenBytes(id);
  return RenderBytes(bytes);
}

Detokenizer::Detokenizer(std::shared_ptr<const DetokenizerVocab> vocab, bool skip_special_tokens)
    : vocab_(std::move(vocab)), tok_(vocab_->tokenizer()), skip_special_(skip_special_tokens) {}

Detokenizer::Detokenizer(const models::Tokenizer& tokenizer, bool skip_special_tokens)
    : Detokenizer(std::make_shared<DetokenizerVocab>(tokenizer), skip_special_tokens) {}

bool Detokenizer::Dropped(int32_t id) const {
  return vocab_->Ignored(id) ||
         (skip_special_ && tok_.IsSpecial(id) &&
          std::find(shown_special_.begin(), shown_special_.end(), id) == shown_special_.end());
}

void Detokenizer::StartAfterPrompt(absl::Span<const int32_t> prompt) {
  if (vocab_->byte_stream()) return;  // no head, no first-token rule: nothing to carry over
  std::vector<int32_t> kept;
  for (int32_t id : prompt) {
    if (!Dropped(id)) kept.push_back(id);
  }
  if (!tok_.Decode(kept, false).empty()) {
    head_done_ = true;
    head_.clear();
  } else {
    head_ = std::move(kept);
  }
}

void Detokenizer::Add(int32_t id, std::string* delta) {
  if (Dropped(id)) return;
  if (vocab_->byte_stream()) {
    stream_bytes_ += tok_.TokenBytes(id);
    const size_t settled = models::SettledUtf8Prefix(stream_bytes_);
    *delta += models::Utf8Lossy(std::string_view(stream_bytes_).substr(0, settled));
    stream_bytes_.erase(0, settled);
    return;
  }
  const bool is_byte = vocab_->ByteOf(id) >= 0;
  if (!head_done_) {
    head_.push_back(id);
    // A run may still change how its bytes render, except (streaming tokenizers) at a boundary
    // of the left-to-right walk.
    if (is_byte && !(vocab_->streams_byte_runs() && HeadRunAtBoundary())) return;
    std::string text = tok_.Decode(head_, false);
    if (text.empty()) return;
    *delta += text;
    head_done_ = true;
    head_.clear();
    return;
  }
  if (is_byte) {
    run_ids_.push_back(id);
    run_bytes_.push_back(static_cast<char>(vocab_->ByteOf(id)));
    EmitRunChunks(/*final=*/false, delta);
    return;
  }
  EmitRunChunks(/*final=*/true, delta);
  *delta += vocab_->DecodeAfterAnchor({id});
}

bool Detokenizer::HeadRunAtBoundary() const {
  size_t start = head_.size();
  while (start > 0 && vocab_->ByteOf(head_[start - 1]) >= 0) --start;
  std::string bytes;
  for (size_t i = start; i < head_.size(); ++i) bytes.push_back(vocab_->ByteOf(head_[i]));
  for (size_t pos = 0; pos < bytes.size();) {
    const size_t n = models::Utf8SequenceLength(bytes, pos);
    if (n == 0 && MaybeIncomplete(bytes, pos)) return false;
    pos += n == 0 ? 1 : n;
  }
  return true;
}

void Detokenizer::EmitRunChunks(bool final, std::string* delta) {
  if (run_ids_.empty()) return;
  if (vocab_->streams_byte_runs()) {
    // Runs decode left to right one sequence (or one bad byte) at a time, so a run may be cut
    // wherever that walk stands.
    size_t pos = run_emitted_;
    while (pos < run_bytes_.size() && !final) {
      size_t n = models::Utf8SequenceLength(run_bytes_, pos);
      if (n == 0) {
        if (MaybeIncomplete(run_bytes_, pos)) break;
        n = 1;
      }
      *delta += vocab_->DecodeAfterAnchor(absl::MakeConstSpan(run_ids_).subspan(pos, n));
      pos += n;
    }
    run_emitted_ = pos;
    if (!final && run_emitted_ < run_ids_.size()) return;
  } else if (!final) {
    return;
  }
  if (run_emitted_ < run_ids_.size()) {
    *delta += vocab_->DecodeAfterAnchor(absl::MakeConstSpan(run_ids_).subspan(run_emitted_));
  }
  run_ids_.clear();
  run_bytes_.clear();
  run_emitted_ = 0;
}

void Detokenizer::Flush(std::string* delta) {
  if (vocab_->byte_stream()) {
    *delta += models::Utf8Lossy(stream_bytes_);
    stream_bytes_.clear();
    return;
  }
  if (!head_done_) {
    const std::string text = tok_.Decode(head_, false);
    if (text.empty()) return;
    *delta += text;
    head_done_ = true;
    head_.clear();
    return;
  }
  EmitRunChunks(/*final=*/true, delta);
}

}  // namespace tandem::engine
