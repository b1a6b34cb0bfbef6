#include "models/hf_bpe_tokenizer.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "models/byte_level.h"
#include "models/split_patterns.h"
#include "models/status_macros.h"
#include "models/tokenizer_bpe_model.h"
#include "models/unicode_nfc.h"
#include "models/unicode_utf8.h"
#include "nlohmann/json.hpp"

namespace tandem::models {
namespace {

using json = nlohmann::json;

// Debian's Abseil has its own string_view type; the flat_hash_maps are looked up through it.
absl::string_view AV(std::string_view s) { return absl::string_view(s.data(), s.size()); }

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = false;
};

struct NormalizerStep {
  enum Kind { kPrepend, kReplace, kStrip, kNfc } kind;
  std::string a, b;  // Prepend: a = prefix. Replace: a -> b.
  bool left = false, right = false;
};

enum class PrependScheme { kAlways, kFirst, kNever };

struct Metaspace {
  std::string replacement = "\xE2\x96\x81";
  PrependScheme prepend = PrependScheme::kAlways;
  bool split = true;
};

// One pre-tokenizer of the pipeline: Metaspace (SentencePiece conversions), a Split by one of
// the known regexes, or ByteLevel (each byte to its character of GPT-2's alphabet, after an
// optional prefix space and GPT-2's regex split).
struct PreTokenizerStep {
  enum Kind { kMetaspace, kSplit, kByteLevel } kind = kMetaspace;
  Metaspace metaspace;
  SplitPattern pattern = SplitPattern::kGpt2;  // kSplit
  bool add_prefix_space = false;               // kByteLevel
  bool use_regex = true;                       // kByteLevel
};

struct DecoderStep {
  enum Kind { kReplace, kByteFallback, kFuse, kStrip, kMetaspace, kByteLevel } kind;
  std::string a, b;  // Replace: a -> b. Strip: a = content (one character). Metaspace: a = rep.
  size_t start = 0, stop = 0;
  PrependScheme prepend = PrependScheme::kAlways;
};

// A piece of the input after added-token splitting: either an added token or text to
// normalize, pre-tokenize and run through BPE. `offset` is its byte offset in the input.
struct Segment {
  std::string_view text;
  size_t offset = 0;
  int32_t added_id = -1;
};

// Leftmost-longest matching of added tokens, as `tokenizers`' AddedVocabulary does.
class AddedTokenMatcher {
 public:
  void Add(const AddedToken* token) {
    if (token->content.empty()) return;
    auto& list = by_first_byte_[static_cast<unsigned char>(token->content[0])];
    list.push_back(token);
    empty_ = false;
  }

  // Longest first, so the first candidate that matches at a position is the longest there.
  void Finish() {
    for (auto& list : by_first_byte_) {
      std::stable_sort(list.begin(), list.end(), [](const AddedToken* x, const AddedToken* y) {
        return x->content.size() > y->content.size();
      });
    }
  }

  // Says whether a match of `token` at bytes [begin, end) of the text being split must be read
  // as plain text instead.
  using Reject = std::function<bool(const AddedToken& token, size_t begin, size_t end)>;

  // Splits `text` (at byte `base` of the input) into segments; unmatched text keeps added_id -1.
  // A rejected match stays part of the text around it and the scan resumes after it, as
  // `tokenizers` does when encode_special_tokens skips a special token.
  void Split(std::string_view text, size_t base, std::vector<Segment>* out,
             const Reject* reject = nullptr) const {
    if (empty_) {
      out->push_back({text, base, -1});
      return;
    }
    size_t last = 0;  // end of the previous match
    size_t i = 0;
    while (i < text.size()) {
      const AddedToken* match = nullptr;
      for (const AddedToken* t : by_first_byte_[static_cast<unsigned char>(text[i])]) {
        if (text.compare(i, t->content.size(), t->content) == 0 && SingleWordOk(*t, text, i)) {
          match = t;
          break;
        }
      }
      if (match == nullptr) {
        ++i;
        continue;
      }
      if (reject != nullptr && (*reject)(*match, i, i + match->content.size())) {
        i += match->content.size();
        continue;
      }
      size_t start = i, stop = i + match->content.size();
      if (match->lstrip) {
        while (start > last) {
          size_t p = start - 1;
          while (p > last && (static_cast<unsigned char>(text[p]) & 0xC0) == 0x80) --p;
          const size_t n = Utf8SequenceLength(text, p);
          if (n == 0 || !IsUnicodeWhitespace(DecodeUtf8(text, p, n))) break;
          start = p;
        }
      }
      if (match->rstrip) {
        while (stop < text.size()) {
          const size_t n = Utf8SequenceLength(text, stop);
          if (n == 0 || !IsUnicodeWhitespace(DecodeUtf8(text, stop, n))) break;
          stop += n;
        }
      }
      if (start > last) out->push_back({text.substr(last, start - last), base + last, -1});
      out->push_back({text.substr(start, stop - start), base + start, match->id});
      last = stop;
      i = stop;
    }
    if (last < text.size()) out->push_back({text.substr(last), base + last, -1});
  }

 private:
  // `tokenizers`' word test is the regex class \w (Alphabetic, marks, decimal digits, connector
  // punctuation, joiners). Without Unicode tables this treats ASCII and Latin-1 exactly and other
  // characters as word characters unless whitespace or in a common punctuation, symbol,
  // number-form, format, private-use or emoji range.
  static bool IsWordChar(std::string_view s, size_t pos, size_t n) {
    const char32_t c = DecodeUtf8(s, pos, n);
    if (c < 0x80) {
      return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    }
    if (c < 0xC0) return c == 0xAA || c == 0xB5 || c == 0xBA;
    if (c < 0x100) return c != 0xD7 && c != 0xF7;
    if (c == 0x200C || c == 0x200D || c == 0x2071 || c == 0x207F) return true;
    if (IsUnicodeWhitespace(c)) return false;
    static constexpr std::pair<char32_t, char32_t> kNonWord[] = {
        {0x2000, 0x206F},   {0x2070, 0x208F},   {0x20A0, 0x20FF}, {0x2100, 0x2101},
        {0x2150, 0x215F},   {0x2190, 0x245F},   {0x2460, 0x24B5}, {0x24EA, 0x24FF},
        {0x2500, 0x27FF},   {0x2900, 0x2BFF},   {0x2E00, 0x2E7F}, {0x3000, 0x3004},
        {0x3008, 0x3020},   {0x3030, 0x3030},   {0x3036, 0x3037}, {0x303D, 0x303F},
        {0xE000, 0xF8FF},   {0xFE10, 0xFE1F},   {0xFE30, 0xFE4F}, {0xFE50, 0xFE6F},
        {0xFEFF, 0xFEFF},   {0xFF01, 0xFF0F},   {0xFF1A, 0xFF20}, {0xFF3B, 0xFF3E},
        {0xFF40, 0xFF40},   {0xFF5B, 0xFF65},   {0xFFF0, 0xFFFF}, {0x1F000, 0x1FBFF},
        {0xE0000, 0xE00FF}, {0xF0000, 0x10FFFF}};
    for (const auto& [lo, hi] : kNonWord) {
      if (c >= lo && c <= hi) return false;
    }
    return true;
  }

  static bool SingleWordOk(const AddedToken& t, std::string_view s, size_t start) {
    if (!t.single_word) return true;
    const size_t stop = start + t.content.size();
    if (start > 0) {
      size_t p = start - 1;
      while (p > 0 && (static_cast<unsigned char>(s[p]) & 0xC0) == 0x80) --p;
      const size_t n = Utf8SequenceLength(s, p);
      if (n != 0 && IsWordChar(s, p, n)) return false;
    }
    if (stop < s.size()) {
      const size_t n = Utf8SequenceLength(s, stop);
      if (n != 0 && IsWordChar(s, stop, n)) return false;
    }
    return true;
  }

  std::array<std::vector<const AddedToken*>, 256> by_first_byte_;
  bool empty_ = true;
};

class HfBpeTokenizer final : public Tokenizer {
 public:
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text,
                                              bool add_special_tokens) const override {
    return EncodeRanges(text, {}, add_special_tokens);
  }
  std::string Decode(absl::Span<const int32_t> ids, bool skip_special_tokens) const override;
  std::string TokenToPiece(int32_t id) const override {
    return (id >= 0 && id < vocab_size()) ? id_to_token_[id] : std::string();
  }
  std::string TokenBytes(int32_t id) const override;
  bool strips_leading_space() const override { return strips_leading_space_; }
  bool decodes_as_byte_stream() const override {
    return has_decoder_ && decoders_.size() == 1 && decoders_[0].kind == DecoderStep::kByteLevel;
  }
  int32_t PieceToId(std::string_view piece) const override {
    if (auto it = added_by_content_.find(AV(piece)); it != added_by_content_.end())
      return it->second;
    return model_.TokenToId(piece);
  }
  int32_t vocab_size() const override { return static_cast<int32_t>(id_to_token_.size()); }
  bool IsSpecial(int32_t id) const override { return id >= 0 && id < vocab_size() && special_[id]; }

 protected:
  absl::StatusOr<std::vector<int32_t>> EncodeRanges(std::string_view text,
                                                    absl::Span<const TextRange> plain,
                                                    bool add_special_tokens) const override;

 private:
  friend class HfBpeLoader;

  // `align`, when given, receives for each normalized byte the input bytes it came from.
  std::string Normalize(std::string_view text, std::vector<TextRange>* align = nullptr) const;
  void PreTokenize(std::string_view text, size_t offset, std::vector<std::string>* words) const;
  std::vector<std::string> RunDecoders(std::vector<std::string> tokens, bool per_token) const;

  BpeModel model_;
  std::vector<AddedToken> added_;
  absl::flat_hash_map<std::string, int32_t> added_by_content_;
  AddedTokenMatcher raw_matcher_;         // added tokens with normalized = false
  AddedTokenMatcher normalized_matcher_;  // added tokens with normalized = true
  std::vector<NormalizerStep> normalizers_;
  std::vector<PreTokenizerStep> pre_tokenizers_;
  std::vector<DecoderStep> decoders_;
  bool has_decoder_ = false;
  std::vector<int32_t> prefix_ids_, suffix_ids_;
  // id -> token string (added tokens win), and whether the id is a special added token.
  std::vector<std::string> id_to_token_;
  std::vector<bool> special_;
  bool strips_leading_space_ = false;
};

// Applies the normalizer steps. `align`, when given, tracks for every byte of the result the
// input bytes it stands for (an inserted prefix stands for the first byte, a replacement for
// the bytes it replaced), so matches in normalized text can be traced back to the input.
std::string Normalized(std::string text, const std::vector<NormalizerStep>& steps,
                       std::vector<TextRange>* align) {
  if (align != nullptr) {
    align->clear();
    for (size_t i = 0; i < text.size(); ++i) align->push_back({i, i + 1});
  }
  for (const NormalizerStep& s : steps) {
    switch (s.kind) {
      case NormalizerStep::kPrepend:
        if (!text.empty()) {
          text.insert(0, s.a);
          if (align != nullptr) align->insert(align->begin(), s.a.size(), align->front());
        }
        break;
      case NormalizerStep::kReplace: {
        if (s.a.empty()) break;
        std::string out;
        std::vector<TextRange> out_align;
        size_t pos = 0;
        for (size_t f = text.find(s.a); f != std::string::npos; f = text.find(s.a, pos)) {
          out.append(text, pos, f - pos);
          out += s.b;
          if (align != nullptr) {
            out_align.insert(out_align.end(), align->begin() + pos, align->begin() + f);
            const TextRange replaced{(*align)[f].begin, (*align)[f + s.a.size() - 1].end};
            out_align.insert(out_align.end(), s.b.size(), replaced);
          }
          pos = f + s.a.size();
        }
        out.append(text, pos, std::string::npos);
        if (align != nullptr) {
          out_align.insert(out_align.end(), align->begin() + pos, align->end());
          *align = std::move(out_align);
        }
        text = std::move(out);
        break;
      }
      case NormalizerStep::kNfc:
        text = NfcNormalize(text, align);
        break;
      case NormalizerStep::kStrip: {
        size_t begin = 0, end = text.size();
        if (s.left) {
          while (begin < end) {
            const size_t n = Utf8SequenceLength(text, begin);
            if (n == 0 || !IsUnicodeWhitespace(DecodeUtf8(text, begin, n))) break;
            begin += n;
          }
        }
        if (s.right) {
          while (end > begin) {
            size_t p = end - 1;
            while (p > begin && (static_cast<unsigned char>(text[p]) & 0xC0) == 0x80) --p;
            const size_t n = Utf8SequenceLength(text, p);
            if (n == 0 || !IsUnicodeWhitespace(DecodeUtf8(text, p, n))) break;
            end = p;
          }
        }
        text = text.substr(begin, end - begin);
        if (align != nullptr) {
          *align = std::vector<TextRange>(align->begin() + begin, align->begin() + end);
        }
        break;
      }
    }
  }
  return text;
}

std::string HfBpeTokenizer::Normalize(std::string_view text, std::vector<TextRange>* align) const {
  return Normalized(std::string(text), normalizers_, align);
}

void HfBpeTokenizer::PreTokenize(std::string_view text, size_t offset,
                                 std::vector<std::string>* words) const {
  std::vector<std::string> current = {std::string(text)};
  std::vector<std::string_view> split;
  for (const PreTokenizerStep& step : pre_tokenizers_) {
    std::vector<std::string> next;
    if (step.kind != PreTokenizerStep::kMetaspace) {
      for (std::string& piece : current) {
        if (step.kind == PreTokenizerStep::kByteLevel && step.add_prefix_space &&
            piece.compare(0, 1, " ") != 0) {
          piece = " " + piece;
        }
        split.clear();
        if (step.kind == PreTokenizerStep::kSplit) {
          SplitWithPattern(step.pattern, piece, &split);
        } else if (step.use_regex) {
          SplitWithPattern(SplitPattern::kGpt2, piece, &split);
        } else {
          split.push_back(piece);
        }
        for (std::string_view s : split) {
          next.push_back(step.kind == PreTokenizerStep::kByteLevel ? ByteLevelEncode(s)
                                                                    : std::string(s));
        }
      }
      current = std::move(next);
      continue;
    }
    const Metaspace& m = step.metaspace;
    for (std::string& piece : current) {
      std::string s = absl::StrReplaceAll(piece, {{" ", m.replacement}});
      const bool starts = s.compare(0, m.replacement.size(), m.replacement) == 0;
      if (!starts && (m.prepend == PrependScheme::kAlways ||
                      (m.prepend == PrependScheme::kFirst && offset == 0))) {
        s.insert(0, m.replacement);
      }
      if (!m.split) {
        next.push_back(std::move(s));
        continue;
      }
      // Each replacement character starts a new word (SplitDelimiterBehavior::MergedWithNext).
      size_t begin = 0;
      for (size_t pos = s.find(m.replacement, 1); pos != std::string::npos;
           pos = s.find(m.replacement, pos + 1)) {
        if (pos > begin) {
          next.push_back(s.substr(begin, pos - begin));
          begin = pos;
        }
      }
      if (begin < s.size()) next.push_back(s.substr(begin));
    }
    current = std::move(next);
  }
  for (std::string& w : current) {
    if (!w.empty()) words->push_back(std::move(w));
  }
}

absl::StatusOr<std::vector<int32_t>> HfBpeTokenizer::EncodeRanges(std::string_view text,
                                                                  absl::Span<const TextRange> plain,
                                                                  bool add_special_tokens) const {
  if (!IsValidUtf8(text)) return absl::InvalidArgumentError("text is not valid UTF-8");
  std::vector<int32_t> ids;
  if (add_special_tokens) ids = prefix_ids_;
  // Special added tokens that touch a plain range are read as text (split_special_tokens);
  // without plain ranges nothing is rejected and this is the `tokenizers` pipeline as is.
  const AddedTokenMatcher::Reject reject_raw = [&](const AddedToken& t, size_t b, size_t e) {
    return t.special && Touches(plain, b, e);
  };
  std::vector<Segment> raw;
  raw_matcher_.Split(text, 0, &raw, plain.empty() ? nullptr : &reject_raw);
  std::vector<std::string> words;
  std::vector<Segment> parts;
  std::vector<TextRange> align;
  for (const Segment& seg : raw) {
    if (seg.added_id >= 0) {
      ids.push_back(seg.added_id);
      continue;
    }
    if (seg.text.empty()) continue;
    const std::string normalized = Normalize(seg.text, plain.empty() ? nullptr : &align);
    const AddedTokenMatcher::Reject reject_normalized = [&](const AddedToken& t, size_t b,
                                                            size_t e) {
      return t.special && e > b &&
             Touches(plain, seg.offset + align[b].begin, seg.offset + align[e - 1].end);
    };
    parts.clear();
    normalized_matcher_.Split(normalized, seg.offset, &parts,
                              plain.empty() ? nullptr : &reject_normalized);
    for (const Segment& part : parts) {
      if (part.added_id >= 0) {
        ids.push_back(part.added_id);
        continue;
      }
      if (part.text.empty()) continue;
      words.clear();
      // After normalization only "is this the input's first piece" survives of the offset.
      PreTokenize(part.text, part.offset == seg.offset ? seg.offset : seg.offset + 1, &words);
      for (const std::string& w : words) model_.Tokenize(w, &ids);
    }
  }
  if (add_special_tokens) ids.insert(ids.end(), suffix_ids_.begin(), suffix_ids_.end());
  return ids;
}

std::vector<std::string> HfBpeTokenizer::RunDecoders(std::vector<std::string> tokens,
                                                     bool per_token) const {
  for (const DecoderStep& d : decoders_) {
    switch (d.kind) {
      case DecoderStep::kReplace:
        for (std::string& t : tokens) t = absl::StrReplaceAll(t, {{d.a, d.b}});
        break;
      case DecoderStep::kMetaspace:
        for (size_t i = 0; i < tokens.size(); ++i) {
          // `tokenizers` drops every replacement character of the first token.
          const bool drop = !per_token && i == 0 && d.prepend != PrependScheme::kNever;
          tokens[i] = absl::StrReplaceAll(tokens[i], {{d.a, drop ? "" : " "}});
        }
        break;
      case DecoderStep::kByteFallback: {
        std::vector<std::string> out;
        out.reserve(tokens.size());
        std::string pending;
        const auto flush = [&] {
          if (pending.empty()) return;
          if (per_token || IsValidUtf8(pending)) {
            out.push_back(pending);
          } else {
            for (size_t i = 0; i < pending.size(); ++i) out.push_back("\xEF\xBF\xBD");
          }
          pending.clear();
        };
        for (std::string& t : tokens) {
          unsigned char byte;
          if (ParseByteFallbackPiece(t, &byte)) {
            pending.push_back(static_cast<char>(byte));
          } else {
            flush();
            out.push_back(std::move(t));
          }
        }
        flush();
        tokens = std::move(out);
        break;
      }
      case DecoderStep::kByteLevel: {
        // Each token's characters back to the bytes they stand for (a token with a character
        // outside the alphabet keeps its own UTF-8); the whole as one string, ill-formed
        // UTF-8 replaced, as `tokenizers` does. A single token's bytes are returned raw: a
        // character may span tokens, and the streaming detokenizer joins them.
        std::string bytes;
        for (const std::string& t : tokens) {
          if (!ByteLevelDecode(t, &bytes)) bytes += t;
        }
        tokens.assign(1, per_token ? std::move(bytes) : Utf8Lossy(bytes));
        break;
      }
      case DecoderStep::kFuse:
        if (!per_token) {
          std::string all;
          for (const std::string& t : tokens) all += t;
          tokens.assign(1, std::move(all));
        }
        break;
      case DecoderStep::kStrip:
        if (per_token) break;
        for (std::string& t : tokens) {
          size_t begin = 0, end = t.size();
          for (size_t k = 0; k < d.start && t.compare(begin, d.a.size(), d.a) == 0; ++k) {
            begin += d.a.size();
          }
          for (size_t k = 0; k < d.stop && end >= begin + d.a.size() &&
                             t.compare(end - d.a.size(), d.a.size(), d.a) == 0;
               ++k) {
            end -= d.a.size();
          }
          t = t.substr(begin, end - begin);
        }
        break;
    }
  }
  return tokens;
}

std::string HfBpeTokenizer::Decode(absl::Span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size() || (id_to_token_[id].empty() && !special_[id])) continue;
    if (skip_special_tokens && special_[id]) continue;
    tokens.push_back(id_to_token_[id]);
  }
  if (!has_decoder_) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) out += ' ';
      out += tokens[i];
    }
    return out;
  }
  std::string out;
  for (const std::string& t : RunDecoders(std::move(tokens), /*per_token=*/false)) out += t;
  return out;
}

std::string HfBpeTokenizer::TokenBytes(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return "";
  if (!has_decoder_) return id_to_token_[id];
  std::string out;
  for (const std::string& t : RunDecoders({id_to_token_[id]}, /*per_token=*/true)) out += t;
  return out;
}

// ---- Loading --------------------------------------------------------------------------------

class HfBpeLoader {
 public:
  HfBpeLoader(std::string path, const TokenizerConfig& config) : path_(std::move(path)) {
    t_ = std::make_unique<HfBpeTokenizer>();
    t_->config_ = config;
  }

  absl::StatusOr<std::unique_ptr<Tokenizer>> Load(const json& j) {
    if (!j.is_object()) return Bad("top level is not an object");
    TANDEM_RETURN_IF_ERROR(LoadModel(Get(j, "model")));
    TANDEM_RETURN_IF_ERROR(LoadAddedTokens(Get(j, "added_tokens")));
    TANDEM_RETURN_IF_ERROR(LoadNormalizer(Get(j, "normalizer")));
    TANDEM_RETURN_IF_ERROR(LoadPreTokenizer(Get(j, "pre_tokenizer")));
    TANDEM_RETURN_IF_ERROR(LoadPostProcessor(Get(j, "post_processor")));
    t_->has_decoder_ = !Get(j, "decoder").is_null();
    TANDEM_RETURN_IF_ERROR(LoadDecoder(Get(j, "decoder")));
    for (const DecoderStep& d : t_->decoders_) {
      if ((d.kind == DecoderStep::kStrip && d.a == " " && d.start > 0) ||
          (d.kind == DecoderStep::kMetaspace && d.prepend != PrependScheme::kNever)) {
        t_->strips_leading_space_ = true;
      }
    }
    ResolveSpecialIds();
    return std::unique_ptr<Tokenizer>(std::move(t_));
  }

 private:
  static const json& Get(const json& j, const char* key) {
    static const json kNull;
    auto it = j.find(key);
    return it == j.end() ? kNull : *it;
  }

  // A boolean field: absent or null gives `fallback`, anything but a boolean is an error.
  absl::Status ReadBool(const json& j, const char* key, bool fallback, bool* out) const {
    const json& v = Get(j, key);
    if (v.is_null()) {
      *out = fallback;
    } else if (v.is_boolean()) {
      *out = v.get<bool>();
    } else {
      return Bad(absl::StrCat("\"", key, "\" is not a boolean"));
    }
    return absl::OkStatus();
  }

  absl::Status Bad(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": ", what));
  }
  absl::Status Unsupported(absl::string_view component, const json& j) const {
    return absl::UnimplementedError(absl::StrCat(path_, ": unsupported ", component, " \"",
                                                 j.is_object() ? j.value("type", "?") : "?", "\""));
  }

  absl::Status LoadModel(const json& m) {
    absl::StatusOr<BpeModel> model = BpeModel::FromJson(m, path_);
    if (!model.ok()) return model.status();
    t_->model_ = *std::move(model);
    t_->id_to_token_ = t_->model_.id_to_token();
    return absl::OkStatus();
  }

  absl::Status LoadAddedTokens(const json& list) {
    t_->special_.assign(t_->id_to_token_.size(), false);
    if (list.is_null()) return absl::OkStatus();
    if (!list.is_array()) return Bad("\"added_tokens\" is not a list");
    t_->added_.reserve(list.size());
    for (const json& e : list) {
      if (!e.is_object() || !Get(e, "id").is_number_integer() || !Get(e, "content").is_string() ||
          e["id"].get<int64_t>() < 0 || e["id"].get<int64_t>() > (1 << 30)) {
        return Bad("an added_tokens entry lacks a valid id or content");
      }
      AddedToken t;
      t.id = e["id"].get<int32_t>();
      t.content = e["content"].get<std::string>();
      TANDEM_RETURN_IF_ERROR(ReadBool(e, "special", false, &t.special));
      TANDEM_RETURN_IF_ERROR(ReadBool(e, "lstrip", false, &t.lstrip));
      TANDEM_RETURN_IF_ERROR(ReadBool(e, "rstrip", false, &t.rstrip));
      TANDEM_RETURN_IF_ERROR(ReadBool(e, "single_word", false, &t.single_word));
      TANDEM_RETURN_IF_ERROR(ReadBool(e, "normalized", !t.special, &t.normalized));
      t_->added_.push_back(std::move(t));
    }
    int32_t max_id = t_->vocab_size() - 1;
    for (const AddedToken& t : t_->added_) max_id = std::max(max_id, t.id);
    t_->id_to_token_.resize(max_id + 1);
    t_->special_.assign(max_id + 1, false);
    for (const AddedToken& t : t_->added_) {
      t_->id_to_token_[t.id] = t.content;
      t_->special_[t.id] = t.special;
      t_->added_by_content_[t.content] = t.id;
      (t.normalized ? t_->normalized_matcher_ : t_->raw_matcher_).Add(&t);
    }
    t_->normalized_matcher_.Finish();
    t_->raw_matcher_.Finish();
    return absl::OkStatus();
  }

  absl::Status LoadNormalizer(const json& n) {
    if (n.is_null()) return absl::OkStatus();
    const std::string type = n.is_object() ? n.value("type", "") : "";
    if (type == "Sequence") {
      const json& list = Get(n, "normalizers");
      if (!list.is_array()) return Bad("normalizer Sequence has no list");
      for (const json& e : list) TANDEM_RETURN_IF_ERROR(LoadNormalizer(e));
      return absl::OkStatus();
    }
    NormalizerStep s{};
    if (type == "Prepend") {
      if (!Get(n, "prepend").is_string()) return Bad("Prepend normalizer has no string");
      s.kind = NormalizerStep::kPrepend;
      s.a = n["prepend"].get<std::string>();
    } else if (type == "Replace") {
      const json& pattern = Get(n, "pattern");
      if (!pattern.is_object() || !Get(pattern, "String").is_string() ||
          !Get(n, "content").is_string()) {
        return Bad("Replace normalizer: only a String pattern is supported");
      }
      s.kind = NormalizerStep::kReplace;
      s.a = pattern["String"].get<std::string>();
      s.b = n["content"].get<std::string>();
    } else if (type == "Strip") {
      s.kind = NormalizerStep::kStrip;
      s.left = n.value("strip_left", n.value("left", true));
      s.right = n.value("strip_right", n.value("right", true));
    } else if (type == "NFC") {
      s.kind = NormalizerStep::kNfc;
    } else {
      return Unsupported("normalizer", n);
    }
    t_->normalizers_.push_back(std::move(s));
    return absl::OkStatus();
  }

  static absl::StatusOr<PrependScheme> ReadPrependScheme(const json& j) {
    const json& scheme = Get(j, "prepend_scheme");
    if (scheme.is_string()) {
      const std::string s = scheme.get<std::string>();
      if (s == "always") return PrependScheme::kAlways;
      if (s == "first") return PrependScheme::kFirst;
      if (s == "never") return PrependScheme::kNever;
      return absl::InvalidArgumentError(absl::StrCat("unknown prepend_scheme \"", s, "\""));
    }
    return j.value("add_prefix_space", true) ? PrependScheme::kAlways : PrependScheme::kNever;
  }

  absl::Status LoadPreTokenizer(const json& p) {
    if (p.is_null()) return absl::OkStatus();
    const std::string type = p.is_object() ? p.value("type", "") : "";
    if (type == "Sequence") {
      const json& list = Get(p, "pretokenizers");
      if (!list.is_array()) return Bad("pre_tokenizer Sequence has no list");
      for (const json& e : list) TANDEM_RETURN_IF_ERROR(LoadPreTokenizer(e));
      return absl::OkStatus();
    }
    if (type == "Split") return LoadSplit(p);
    if (type == "ByteLevel") {
      PreTokenizerStep step;
      step.kind = PreTokenizerStep::kByteLevel;
      TANDEM_RETURN_IF_ERROR(ReadBool(p, "add_prefix_space", true, &step.add_prefix_space));
      TANDEM_RETURN_IF_ERROR(ReadBool(p, "use_regex", true, &step.use_regex));
      t_->pre_tokenizers_.push_back(step);
      return absl::OkStatus();
    }
    if (type != "Metaspace") return Unsupported("pre_tokenizer", p);
    Metaspace m;
    if (!Get(p, "replacement").is_string() || p["replacement"].get<std::string>().empty()) {
      return Bad("Metaspace pre_tokenizer has no replacement");
    }
    m.replacement = p["replacement"].get<std::string>();
    auto scheme = ReadPrependScheme(p);
    if (!scheme.ok()) return Bad(scheme.status().message());
    m.prepend = *scheme;
    TANDEM_RETURN_IF_ERROR(ReadBool(p, "split", true, &m.split));
    PreTokenizerStep step;
    step.metaspace = std::move(m);
    t_->pre_tokenizers_.push_back(std::move(step));
    return absl::OkStatus();
  }

  // A Split by a regex we know. Each known pattern matches every character, so keeping the
  // matches as pieces ("Isolated") and keeping only them ("Removed" with invert) agree.
  absl::Status LoadSplit(const json& p) {
    const json& pattern = Get(p, "pattern");
    if (!pattern.is_object() || !Get(pattern, "Regex").is_string()) {
      return Bad("Split pre_tokenizer: only a Regex pattern is supported");
    }
    const std::string regex = pattern["Regex"].get<std::string>();
    const std::optional<SplitPattern> known = RecognizeSplitPattern(regex);
    if (!known.has_value()) {
      return absl::UnimplementedError(absl::StrCat(
          path_, ": unsupported Split pre_tokenizer pattern \"", regex.substr(0, 200),
          "\" (tandem knows GPT-2's, Llama 3's and Qwen2's)"));
    }
    const std::string behavior = p.value("behavior", "");
    bool invert = false;
    TANDEM_RETURN_IF_ERROR(ReadBool(p, "invert", false, &invert));
    if (!((behavior == "Isolated" && !invert) || (behavior == "Removed" && invert))) {
      return absl::UnimplementedError(absl::StrCat(
          path_, ": unsupported Split pre_tokenizer behavior \"", behavior.substr(0, 40),
          "\" with invert ", invert ? "true" : "false",
          " (supported: Isolated, or Removed with invert)"));
    }
    PreTokenizerStep step;
    step.kind = PreTokenizerStep::kSplit;
    step.pattern = *known;
    t_->pre_tokenizers_.push_back(step);
    return absl::OkStatus();
  }

  absl::StatusOr<int32_t> TokenId(const json& name) const {
    if (!name.is_string()) return Bad("post_processor names a token that is not a string");
    const int32_t id = t_->PieceToId(name.get<std::string>());
    if (id < 0)
      return Bad(absl::StrCat("post_processor token \"", name.get<std::string>(), "\" is unknown"));
    return id;
  }

  absl::Status LoadPostProcessor(const json& p) {
    if (p.is_null()) return absl::OkStatus();
    const std::string type = p.is_object() ? p.value("type", "") : "";
    if (type == "Sequence") {
      const json& list = Get(p, "processors");
      if (!list.is_array()) return Bad("post_processor Sequence has no list");
      for (const json& e : list) TANDEM_RETURN_IF_ERROR(LoadPostProcessor(e));
      return absl::OkStatus();
    }
    if (type == "ByteLevel") return absl::OkStatus();
    if (type == "BertProcessing" || type == "RobertaProcessing") {
      const json& cls = Get(p, "cls");
      const json& sep = Get(p, "sep");
      if (!cls.is_array() || cls.size() != 2 || !sep.is_array() || sep.size() != 2 ||
          !cls[1].is_number_integer() || !sep[1].is_number_integer()) {
        return Bad(absl::StrCat(type, " post_processor lacks cls/sep"));
      }
      t_->prefix_ids_.insert(t_->prefix_ids_.begin(), cls[1].get<int32_t>());
      t_->suffix_ids_.push_back(sep[1].get<int32_t>());
      return absl::OkStatus();
    }
    if (type != "TemplateProcessing") return Unsupported("post_processor", p);
    const json& single = Get(p, "single");
    const json& specials = Get(p, "special_tokens");
    if (!single.is_array()) return Bad("TemplateProcessing has no \"single\" template");
    std::vector<int32_t> prefix, suffix;
    bool seen_sequence = false;
    for (const json& piece : single) {
      if (piece.is_object() && piece.contains("Sequence")) {
        if (seen_sequence) return Bad("TemplateProcessing single template has two sequences");
        seen_sequence = true;
        continue;
      }
      if (!piece.is_object() || !piece.contains("SpecialToken") ||
          !Get(piece["SpecialToken"], "id").is_string()) {
        return Bad("TemplateProcessing template piece is neither Sequence nor SpecialToken");
      }
      const std::string name = piece["SpecialToken"]["id"].get<std::string>();
      std::vector<int32_t> ids;
      const json& entry = specials.is_object() ? Get(specials, name.c_str()) : json();
      if (entry.is_object() && Get(entry, "ids").is_array()) {
        for (const json& id : entry["ids"]) {
          if (!id.is_number_integer())
            return Bad("TemplateProcessing special token id is not an int");
          ids.push_back(id.get<int32_t>());
        }
      } else {
        absl::StatusOr<int32_t> id = TokenId(json(name));
        if (!id.ok()) return id.status();
        ids.push_back(*id);
      }
      auto& dst = seen_sequence ? suffix : prefix;
      dst.insert(dst.end(), ids.begin(), ids.end());
    }
    t_->prefix_ids_.insert(t_->prefix_ids_.end(), prefix.begin(), prefix.end());
    t_->suffix_ids_.insert(t_->suffix_ids_.begin(), suffix.begin(), suffix.end());
    return absl::OkStatus();
  }

  absl::Status LoadDecoder(const json& d) {
    if (d.is_null()) return absl::OkStatus();
    const std::string type = d.is_object() ? d.value("type", "") : "";
    if (type == "Sequence") {
      const json& list = Get(d, "decoders");
      if (!list.is_array()) return Bad("decoder Sequence has no list");
      for (const json& e : list) TANDEM_RETURN_IF_ERROR(LoadDecoder(e));
      return absl::OkStatus();
    }
    DecoderStep s{};
    if (type == "Replace") {
      const json& pattern = Get(d, "pattern");
      if (!pattern.is_object() || !Get(pattern, "String").is_string() ||
          !Get(d, "content").is_string()) {
        return Bad("Replace decoder: only a String pattern is supported");
      }
      s.kind = DecoderStep::kReplace;
      s.a = pattern["String"].get<std::string>();
      s.b = d["content"].get<std::string>();
      if (s.a.empty()) return Bad("Replace decoder has an empty pattern");
    } else if (type == "ByteFallback") {
      s.kind = DecoderStep::kByteFallback;
    } else if (type == "ByteLevel") {
      s.kind = DecoderStep::kByteLevel;
    } else if (type == "Fuse") {
      s.kind = DecoderStep::kFuse;
    } else if (type == "Strip") {
      s.kind = DecoderStep::kStrip;
      if (!Get(d, "content").is_string()) return Bad("Strip decoder has no content");
      s.a = d["content"].get<std::string>();
      if (Utf8SequenceLength(s.a, 0) != s.a.size())
        return Bad("Strip decoder content is not one character");
      for (auto [key, dst] : {std::pair{"start", &s.start}, std::pair{"stop", &s.stop}}) {
        const json& v = Get(d, key);
        if (v.is_null()) continue;
        if (!v.is_number_integer() || v.get<int64_t>() < 0) {
          return Bad(absl::StrCat("Strip decoder \"", key, "\" is not a non-negative integer"));
        }
        *dst = v.get<size_t>();
      }
    } else if (type == "Metaspace") {
      s.kind = DecoderStep::kMetaspace;
      s.a = d.value("replacement", std::string("\xE2\x96\x81"));
      if (s.a.empty()) return Bad("Metaspace decoder has no replacement");
      auto scheme = ReadPrependScheme(d);
      if (!scheme.ok()) return Bad(scheme.status().message());
      s.prepend = *scheme;
    } else {
      return Unsupported("decoder", d);
    }
    t_->decoders_.push_back(std::move(s));
    return absl::OkStatus();
  }

  // bos/eos/pad/unk from tokenizer_config.json, else from the BOS/EOS the post-processor adds.
  void ResolveSpecialIds() {
    HfBpeTokenizer& t = *t_;
    const TokenizerConfig& c = t.config_;
    const auto lookup = [&](const std::string& s) { return s.empty() ? -1 : t.PieceToId(s); };
    const std::vector<int32_t> template_prefix = t.prefix_ids_, template_suffix = t.suffix_ids_;
    t.bos_id_ = lookup(c.bos_token);
    if (t.bos_id_ < 0 && !template_prefix.empty()) t.bos_id_ = template_prefix.front();
    t.eos_id_ = lookup(c.eos_token);
    if (t.eos_id_ < 0 && !template_suffix.empty()) t.eos_id_ = template_suffix.back();
    t.pad_id_ = lookup(c.pad_token);
    t.unk_id_ = lookup(c.unk_token);
    if (t.unk_id_ < 0) t.unk_id_ = t.model_.unk_id();
    if (c.add_bos_token.has_value() || c.add_eos_token.has_value()) {
      t.prefix_ids_.clear();
      t.suffix_ids_.clear();
      const bool add_bos = c.add_bos_token.value_or(!template_prefix.empty());
      const bool add_eos = c.add_eos_token.value_or(false);
      if (add_bos && t.bos_id_ >= 0) t.prefix_ids_.push_back(t.bos_id_);
      if (add_eos && t.eos_id_ >= 0) t.suffix_ids_.push_back(t.eos_id_);
    }
  }

  std::string path_;
  std::unique_ptr<HfBpeTokenizer> t_;
};


}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadHfBpeTokenizer(const std::string& json_path,
                                                              const TokenizerConfig& config) {
  absl::StatusOr<json> j = ReadTokenizerJson(json_path);
  if (!j.ok()) return j.status();
  try {
    return HfBpeLoader(json_path, config).Load(*j);
  } catch (const std::exception& e) {
    // nlohmann throws on a type mismatch the checks above did not anticipate.
    return absl::InvalidArgumentError(absl::StrCat(json_path, ": ", e.what()));
  }
}

}  // namespace tandem::models
