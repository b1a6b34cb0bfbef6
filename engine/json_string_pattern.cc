#include "engine/json_string_pattern.h"

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/code_point_set.h"

namespace tandem::engine {
namespace {

using B = GrammarBuilder;

// The expression as a tree.
struct Node {
  enum class Kind { kEmpty, kSet, kConcat, kAlt, kRepeat };
  Kind kind = Kind::kEmpty;
  CodePointSet set;            // kSet
  std::vector<Node> children;  // kConcat, kAlt; kRepeat: one
  int32_t min = 0, max = 0;    // kRepeat; max < 0: unbounded
};

bool Nullable(const Node& node) {
  switch (node.kind) {
    case Node::Kind::kEmpty:
      return true;
    case Node::Kind::kSet:
      return false;
    case Node::Kind::kConcat:
      for (const Node& child : node.children) {
        if (!Nullable(child)) return false;
      }
      return true;
    case Node::Kind::kAlt:
      for (const Node& child : node.children) {
        if (Nullable(child)) return true;
      }
      return false;
    case Node::Kind::kRepeat:
      return node.min == 0 || Nullable(node.children[0]);
  }
  return true;
}

// One top-level alternative and its anchors.
struct Branch {
  Node node;
  bool at_start = false;  // ^
  bool at_end = false;    // $
};

CodePointSet Digits() { return CodePointSet::Range('0', '9'); }
CodePointSet WordCharacters() {
  return CodePointSet::Range('a', 'z')
      .Add(CodePointSet::Range('A', 'Z'))
      .Add(Digits())
      .Add(CodePointSet::Of('_'));
}
// ECMA-262's WhiteSpace and LineTerminator.
CodePointSet Spaces() {
  CodePointSet set = CodePointSet::Range(0x09, 0x0D);
  for (const uint32_t c :
       {0x20u, 0xA0u, 0x1680u, 0x2028u, 0x2029u, 0x202Fu, 0x205Fu, 0x3000u, 0xFEFFu}) {
    set.Add(CodePointSet::Of(c));
  }
  return set.Add(CodePointSet::Range(0x2000, 0x200A));
}
// What `.` matches: all but the line terminators.
CodePointSet Dot() {
  CodePointSet terminators = CodePointSet::Of('\n');
  terminators.Add(CodePointSet::Of('\r')).Add(CodePointSet::Range(0x2028, 0x2029));
  return terminators.Complement();
}

class PatternParser {
 public:
  explicit PatternParser(std::string_view pattern) : p_(pattern) {}

  absl::StatusOr<std::vector<Branch>> Parse() {
    std::vector<Branch> branches;
    for (;;) {
      Branch branch;
      branch.at_start = Consume('^');
      absl::StatusOr<Node> node = Alternative(0, &branch.at_end);
      if (!node.ok()) return node.status();
      branch.node = *std::move(node);
      branches.push_back(std::move(branch));
      if (at_ == p_.size()) return branches;
      if (!Consume('|')) return Error("unmatched ')'");
    }
  }

 private:
  static constexpr int kMaxDepth = 64;

  // An error at the next character, or at byte `at` of the pattern.
  absl::Status Error(const std::string& what) const { return ErrorAt(at_, what); }
  // Characters, not bytes: a UTF-8 continuation byte does not start one.
  absl::Status ErrorAt(size_t at, const std::string& what) const {
    size_t character = 1;
    for (size_t i = 0; i < at && i < p_.size(); ++i) {
      if ((static_cast<uint8_t>(p_[i]) & 0xC0) != 0x80) ++character;
    }
    return absl::InvalidArgumentError(absl::StrCat("at character ", character, ": ", what));
  }
  bool Peek(char c) const { return at_ < p_.size() && p_[at_] == c; }
  bool Consume(char c) {
    if (!Peek(c)) return false;
    ++at_;
    return true;
  }

  // Terms up to '|', ')' or the end. At depth 0 a '$' may end it (`*at_end`).
  absl::StatusOr<Node> Alternative(int depth, bool* at_end) {
    Node concat;
    concat.kind = Node::Kind::kConcat;
    while (at_ < p_.size() && !Peek('|') && !Peek(')')) {
      if (Peek('$')) {
        const bool last = at_ + 1 == p_.size() || p_[at_ + 1] == '|';
        if (depth > 0 || !last) return Error("'$' is supported only at the end of the pattern");
        ++at_;
        *at_end = true;
        break;
      }
      if (Peek('^')) return Error("'^' is supported only at the start of the pattern");
      absl::StatusOr<Node> term = Term(depth);
      if (!term.ok()) return term.status();
      concat.children.push_back(*std::move(term));
    }
    return concat;
  }

  absl::StatusOr<Node> Disjunction(int depth) {
    if (depth > kMaxDepth) return Error(absl::StrCat("groups nest deeper than ", kMaxDepth));
    Node alt;
    alt.kind = Node::Kind::kAlt;
    for (;;) {
      bool unused = false;
      absl::StatusOr<Node> branch = Alternative(depth, &unused);
      if (!branch.ok()) return branch.status();
      alt.children.push_back(*std::move(branch));
      if (!Consume('|')) return alt;
    }
  }

  absl::StatusOr<Node> Term(int depth) {
    absl::StatusOr<Node> atom = Atom(depth);
    if (!atom.ok()) return atom.status();
    const size_t quantifier = at_;
    std::optional<std::pair<int32_t, int32_t>> counts = Quantifier();
    if (!counts) {
      if (absl::Status s = bad_quantifier_; !s.ok()) return s;
      return atom;
    }
    Consume('?');  // lazy: the same strings
    if (at_ < p_.size() && (Peek('*') || Peek('+') || Peek('?') || QuantifierAhead())) {
      return Error("nothing to repeat");
    }
    Node repeat;
    repeat.kind = Node::Kind::kRepeat;
    repeat.min = counts->first;
    repeat.max = counts->second;
    if (repeat.max < 0 && Nullable(*atom)) {
      return ErrorAt(quantifier,
                     "an unbounded repetition of something that can match the empty string "
                     "(such as (a?)*) is not supported");
    }
    repeat.children.push_back(*std::move(atom));
    return repeat;
  }

  // Whether a {n}, {n,} or {n,m} starts here (counts out of range included).
  bool QuantifierAhead() {
    const size_t saved = at_;
    const absl::Status saved_error = bad_quantifier_;
    bad_quantifier_ = absl::OkStatus();
    const bool shaped = Braces().has_value() || !bad_quantifier_.ok();
    at_ = saved;
    bad_quantifier_ = saved_error;
    return shaped;
  }

  std::optional<std::pair<int32_t, int32_t>> Quantifier() {
    if (Consume('*')) return std::make_pair(0, -1);
    if (Consume('+')) return std::make_pair(1, -1);
    if (Consume('?')) return std::make_pair(0, 1);
    return Braces();
  }

  // {n}, {n,} or {n,m}; not one (nothing consumed) when the braces do not have that shape, as
  // ECMA-262 then reads them as text. Counts out of range set bad_quantifier_.
  std::optional<std::pair<int32_t, int32_t>> Braces() {
    if (!Peek('{')) return std::nullopt;
    const size_t start = at_++;
    auto number = [&]() -> std::optional<int64_t> {
      const size_t begin = at_;
      int64_t n = 0;
      while (at_ < p_.size() && p_[at_] >= '0' && p_[at_] <= '9') {
        n = std::min<int64_t>(n * 10 + (p_[at_] - '0'), int64_t{1} << 40);
        ++at_;
      }
      if (at_ == begin) return std::nullopt;
      return n;
    };
    std::optional<int64_t> min = number();
    std::optional<int64_t> max = min;
    bool shaped = min.has_value();
    if (shaped && Consume(',')) max = Peek('}') ? std::optional<int64_t>(-1) : number();
    shaped = shaped && max.has_value() && Consume('}');
    if (!shaped) {
      at_ = start;
      return std::nullopt;
    }
    if (*min > kMaxPatternRepeat || *max > kMaxPatternRepeat) {
      at_ = start;
      bad_quantifier_ =
          Error(absl::StrCat("a count above ", kMaxPatternRepeat, " is not supported"));
      return std::nullopt;
    }
    if (*max >= 0 && *max < *min) {
      at_ = start;
      bad_quantifier_ = Error("numbers out of order in {} quantifier");
      return std::nullopt;
    }
    return std::make_pair(static_cast<int32_t>(*min), static_cast<int32_t>(*max));
  }

  static Node SetNode(CodePointSet set) {
    Node node;
    node.kind = Node::Kind::kSet;
    node.set = std::move(set);
    return node;
  }

  absl::StatusOr<Node> Atom(int depth) {
    const char c = p_[at_];
    if (c == '*' || c == '+' || c == '?' || QuantifierAhead()) return Error("nothing to repeat");
    if (Consume('.')) return SetNode(Dot());
    if (Consume('(')) {
      if (Consume('?')) {
        if (Consume(':')) {
        } else if (Peek('=') || Peek('!')) {
          return Error("lookahead is not supported");
        } else if (Consume('<')) {
          if (Peek('=') || Peek('!')) return Error("lookbehind is not supported");
          // A name: a letter, '_' or '$', then those or digits.
          auto name_char = [&](char n, bool first) {
            return (n >= 'a' && n <= 'z') || (n >= 'A' && n <= 'Z') || n == '_' || n == '$' ||
                   (!first && n >= '0' && n <= '9');
          };
          const size_t begin = at_;
          while (at_ < p_.size() && name_char(p_[at_], at_ == begin)) ++at_;
          if (at_ == begin || !Consume('>')) {
            return Error("a group name is letters, digits, '_' or '$', then '>'");
          }
        } else {
          return Error("unknown group kind after '(?'");
        }
      }
      absl::StatusOr<Node> inner = Disjunction(depth + 1);
      if (!inner.ok()) return inner.status();
      if (!Consume(')')) return Error("missing ')'");
      return inner;
    }
    if (Consume('[')) return Class();
    if (Consume('\\')) {
      absl::StatusOr<CodePointSet> set = Escape(/*in_class=*/false);
      if (!set.ok()) return set.status();
      return SetNode(*std::move(set));
    }
    absl::StatusOr<uint32_t> code_point = Literal();
    if (!code_point.ok()) return code_point.status();
    return SetNode(CodePointSet::Of(*code_point));
  }

  // The UTF-8 character at at_.
  absl::StatusOr<uint32_t> Literal() {
    const auto lead = static_cast<uint8_t>(p_[at_]);
    const int length = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 0;
    if (length == 0 || at_ + length > p_.size()) return Error("not valid UTF-8");
    uint32_t c = length == 1 ? lead : lead & (0x7F >> length);
    for (int i = 1; i < length; ++i) {
      const auto next = static_cast<uint8_t>(p_[at_ + i]);
      if ((next & 0xC0) != 0x80) return Error("not valid UTF-8");
      c = (c << 6) | (next & 0x3F);
    }
    at_ += length;
    return c;
  }

  // Hex digits of a \x or \u escape.
  std::optional<uint32_t> Hex(int count) {
    if (at_ + count > p_.size()) return std::nullopt;
    uint32_t value = 0;
    for (int i = 0; i < count; ++i) {
      const char h = p_[at_ + i];
      const int digit = h >= '0' && h <= '9'   ? h - '0'
                        : h >= 'a' && h <= 'f' ? h - 'a' + 10
                        : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                               : -1;
      if (digit < 0) return std::nullopt;
      value = value * 16 + static_cast<uint32_t>(digit);
    }
    at_ += count;
    return value;
  }

  // After a backslash: a class escape or one character.
  absl::StatusOr<CodePointSet> Escape(bool in_class) {
    if (at_ == p_.size()) return Error("a pattern cannot end with a backslash");
    // Errors point at the backslash.
    const size_t start = at_ - 1;
    auto Error = [this, start](const std::string& what) { return ErrorAt(start, what); };
    const char c = p_[at_++];
    switch (c) {
      case 'd':
        return Digits();
      case 'D':
        return Digits().Complement();
      case 'w':
        return WordCharacters();
      case 'W':
        return WordCharacters().Complement();
      case 's':
        return Spaces();
      case 'S':
        return Spaces().Complement();
      case 'n':
        return CodePointSet::Of('\n');
      case 'r':
        return CodePointSet::Of('\r');
      case 't':
        return CodePointSet::Of('\t');
      case 'f':
        return CodePointSet::Of('\f');
      case 'v':
        return CodePointSet::Of('\v');
      case 'b':
        if (in_class) return CodePointSet::Of('\b');
        return Error("word boundaries (\\b) are not supported");
      case 'B':
        return Error("word boundaries (\\B) are not supported");
      case 'c':
        return Error("control escapes (\\c) are not supported");
      case 'k':
        return Error("backreferences are not supported");
      case 'x': {
        std::optional<uint32_t> value = Hex(2);
        if (!value) return Error("\\x needs two hex digits");
        return CodePointSet::Of(*value);
      }
      case 'u': {
        if (Peek('{')) return Error("\\u{...} is not supported; write \\uHHHH");
        std::optional<uint32_t> value = Hex(4);
        if (!value) return Error("\\u needs four hex digits");
        if (*value >= 0xD800 && *value <= 0xDBFF && p_.substr(at_, 2) == "\\u") {
          const size_t saved = at_;
          at_ += 2;
          std::optional<uint32_t> low = Hex(4);
          if (low && *low >= 0xDC00 && *low <= 0xDFFF) {
            return CodePointSet::Of(0x10000 + ((*value - 0xD800) << 10) + (*low - 0xDC00));
          }
          at_ = saved;
        }
        if (*value >= 0xD800 && *value <= 0xDFFF)
          return Error("a lone surrogate matches no character");
        return CodePointSet::Of(*value);
      }
      case '0':
        if (at_ < p_.size() && p_[at_] >= '0' && p_[at_] <= '9') {
          return Error("octal escapes are not supported");
        }
        return CodePointSet::Of(0);
      case 'p':
      case 'P':
        return Error("Unicode property escapes (\\p{...}) are not supported");
      default:
        if (c >= '1' && c <= '9') {
          if (in_class) return Error("octal escapes are not supported");
          return Error("backreferences are not supported");
        }
        // Escaped letters mean something else in each regex dialect, and nothing in ECMA-262's
        // unicode mode: refused rather than read as the letter.
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
          return Error(absl::StrCat("unknown escape \\", std::string(1, c)));
        }
        --at_;
        absl::StatusOr<uint32_t> literal = Literal();  // any other character stands for itself
        if (!literal.ok()) return literal.status();
        return CodePointSet::Of(*literal);
    }
  }

  // After '[': the class up to its ']'.
  absl::StatusOr<Node> Class() {
    const size_t start = at_ - 1;  // the '['
    const bool negated = Consume('^');
    CodePointSet set;
    while (!Consume(']')) {
      if (at_ == p_.size()) return Error("missing ']'");
      const size_t item = at_;
      absl::StatusOr<CodePointSet> first = ClassAtom();
      if (!first.ok()) return first.status();
      const bool single =
          first->ranges().size() == 1 && first->ranges()[0].first == first->ranges()[0].second;
      if (single && Peek('-') && at_ + 1 < p_.size() && p_[at_ + 1] != ']') {
        ++at_;
        absl::StatusOr<CodePointSet> last = ClassAtom();
        if (!last.ok()) return last.status();
        const bool last_single =
            last->ranges().size() == 1 && last->ranges()[0].first == last->ranges()[0].second;
        if (!last_single) return Error("a range cannot end with a class escape");
        const uint32_t a = first->ranges()[0].first, z = last->ranges()[0].first;
        if (a > z) return ErrorAt(item, "range out of order in character class");
        set.Add(CodePointSet::Range(a, z));
        continue;
      }
      set.Add(*first);
    }
    if (negated) set = set.Complement();
    if (set.empty()) return ErrorAt(start, "the character class matches nothing");
    return SetNode(std::move(set));
  }

  absl::StatusOr<CodePointSet> ClassAtom() {
    if (Consume('\\')) return Escape(/*in_class=*/true);
    absl::StatusOr<uint32_t> c = Literal();
    if (!c.ok()) return c.status();
    return CodePointSet::Of(*c);
  }

  std::string_view p_;
  size_t at_ = 0;
  absl::Status bad_quantifier_;
};

// The tree as grammar symbols.
class PatternEmitter {
 public:
  explicit PatternEmitter(B& b) : b_(b) {}

  GrammarSequence Emit(const Node& node) {
    switch (node.kind) {
      case Node::Kind::kEmpty:
        return {};
      case Node::Kind::kSet:
        return {B::Ref(Characters(node.set))};
      case Node::Kind::kConcat: {
        GrammarSequence out;
        for (const Node& child : node.children) {
          GrammarSequence part = Emit(child);
          out.insert(out.end(), part.begin(), part.end());
        }
        return out;
      }
      case Node::Kind::kAlt: {
        if (node.children.size() == 1) return Emit(node.children[0]);
        std::vector<GrammarSequence> alternatives;
        for (const Node& child : node.children) alternatives.push_back(Emit(child));
        return {B::Ref(b_.AddRule("pattern alternatives", std::move(alternatives)))};
      }
      case Node::Kind::kRepeat:
        return {
            B::Ref(b_.Repeat("pattern repetition", Emit(node.children[0]), node.min, node.max))};
    }
    return {};
  }

  // Any characters, for the unanchored ends.
  int32_t AnyCharacters() {
    if (!any_) any_ = b_.Star("any characters", {B::Ref(Characters(CodePointSet::All()))});
    return *any_;
  }

 private:
  int32_t Characters(const CodePointSet& set) {
    auto [it, added] = sets_.try_emplace(set, 0);
    if (added) it->second = b_.AddRule("pattern character", JsonCharacterSequences(set));
    return it->second;
  }

  B& b_;
  std::map<CodePointSet, int32_t> sets_;
  std::optional<int32_t> any_;
};

}  // namespace

absl::StatusOr<int32_t> StringPatternRule(GrammarBuilder& builder, std::string_view pattern) {
  constexpr size_t kMaxPatternBytes = 4096;
  if (pattern.size() > kMaxPatternBytes) {
    return absl::InvalidArgumentError(absl::StrCat("longer than ", kMaxPatternBytes, " bytes"));
  }
  absl::StatusOr<std::vector<Branch>> branches = PatternParser(pattern).Parse();
  if (!branches.ok()) return branches.status();
  PatternEmitter emitter(builder);
  std::vector<GrammarSequence> alternatives;
  for (const Branch& branch : *branches) {
    GrammarSequence text;
    if (!branch.at_start) text.push_back(B::Ref(emitter.AnyCharacters()));
    GrammarSequence body = emitter.Emit(branch.node);
    text.insert(text.end(), body.begin(), body.end());
    if (!branch.at_end) text.push_back(B::Ref(emitter.AnyCharacters()));
    alternatives.push_back(std::move(text));
  }
  const int32_t body = builder.AddRule("pattern", std::move(alternatives));
  const GrammarSymbol quote = B::Bytes(ByteSet::Of('"'));
  return builder.AddRule("pattern string", {{quote, B::Ref(body), quote}});
}

}  // namespace tandem::engine
