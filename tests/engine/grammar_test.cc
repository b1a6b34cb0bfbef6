// The byte grammar and its matcher (engine/grammar.h, engine/grammar_matcher.h): what Build
// refuses, what the matcher accepts, that repetition runs in constant memory, and that a
// pathologically ambiguous grammar fails instead of slowing down.
#include <memory>
#include <string>

#include "engine/grammar.h"
#include "engine/grammar_matcher.h"
#include "gtest/gtest.h"

namespace tandem::engine {
namespace {

using B = GrammarBuilder;

std::shared_ptr<const Grammar> Built(const GrammarBuilder& builder, int32_t root) {
  absl::StatusOr<Grammar> grammar = builder.Build(root);
  EXPECT_TRUE(grammar.ok()) << grammar.status();
  return grammar.ok() ? std::make_shared<const Grammar>(*std::move(grammar)) : nullptr;
}

// Whether `text` is a whole sentence of the grammar.
bool Whole(const std::shared_ptr<const Grammar>& grammar, std::string_view text) {
  absl::StatusOr<GrammarMatcher> m = GrammarMatcher::Create(grammar);
  return m.ok() && m->Accept(text).ok() && m->complete();
}

TEST(ByteSetTest, RangesAddAndRemove) {
  ByteSet set = ByteSet::Range('a', 'f');
  EXPECT_TRUE(set.Has('a'));
  EXPECT_TRUE(set.Has('f'));
  EXPECT_FALSE(set.Has('g'));
  set.Add(ByteSet::Of(0xFF)).Remove(ByteSet::Of('c'));
  EXPECT_TRUE(set.Has(0xFF));
  EXPECT_FALSE(set.Has('c'));
  EXPECT_TRUE(ByteSet::Range('b', 'a').empty());
}

TEST(GrammarBuilderTest, RefusesRulesWithoutAlternatives) {
  B b;
  const int32_t missing = b.DeclareRule("missing");
  const int32_t root = b.AddRule("root", {{B::Ref(missing)}});
  const absl::Status s = b.Build(root).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'missing' has no alternative"), std::string::npos) << s;
}

TEST(GrammarBuilderTest, RefusesLeftRecursionDirectOrThroughEmptyRules) {
  {
    B b;
    const int32_t list = b.DeclareRule("list");
    b.AddAlternative(list, {B::Ref(list), B::Bytes(ByteSet::Of('x'))});
    b.AddAlternative(list, B::Literal("x"));
    const absl::Status s = b.Build(list).status();
    EXPECT_NE(s.message().find("'list' can reach itself before reading a byte"), std::string::npos)
        << s;
  }
  {
    B b;
    const int32_t nothing = b.AddRule("nothing", {{}});
    const int32_t loop = b.DeclareRule("loop");
    b.AddAlternative(loop, {B::Ref(nothing), B::Ref(loop), B::Bytes(ByteSet::Of('x'))});
    b.AddAlternative(loop, B::Literal("y"));
    const absl::Status s = b.Build(loop).status();
    EXPECT_NE(s.message().find("left recursion"), std::string::npos) << s;
  }
}

TEST(GrammarBuilderTest, RefusesRulesThatCannotEnd) {
  B b;
  const int32_t forever = b.DeclareRule("forever");
  b.AddAlternative(forever, {B::Bytes(ByteSet::Of('x')), B::Ref(forever)});
  const absl::Status s = b.Build(forever).status();
  EXPECT_NE(s.message().find("'forever' derives no finite string"), std::string::npos) << s;
}

TEST(GrammarMatcherTest, AcceptsExactlyTheSentences) {
  B b;
  const int32_t root = b.AddRule("root", {B::Literal("ab"), B::Literal("ac"), B::Literal("a")});
  auto grammar = Built(b, root);
  EXPECT_TRUE(Whole(grammar, "ab"));
  EXPECT_TRUE(Whole(grammar, "ac"));
  EXPECT_TRUE(Whole(grammar, "a"));
  EXPECT_FALSE(Whole(grammar, ""));
  EXPECT_FALSE(Whole(grammar, "ad"));
  EXPECT_FALSE(Whole(grammar, "abc"));

  absl::StatusOr<GrammarMatcher> m = GrammarMatcher::Create(grammar);
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE(m->Accept("a").ok());
  EXPECT_TRUE(m->complete());
  EXPECT_TRUE(m->can_continue());
  EXPECT_TRUE(m->Allows(m->state(), 'b'));
  EXPECT_FALSE(m->Allows(m->state(), 'd'));
  // A refused byte leaves the state where it was and names the byte.
  const absl::Status refused = m->Accept("cd");
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("byte 1 of \"cd\" (0x64)"), std::string::npos) << refused;
  ASSERT_TRUE(m->Accept("b").ok());
  EXPECT_TRUE(m->complete());
  EXPECT_FALSE(m->can_continue());
}

TEST(GrammarMatcherTest, RepeatHonoursItsBounds) {
  B b;
  const int32_t root = b.Repeat("x{2,4}", B::Literal("x"), 2, 4);
  auto grammar = Built(b, root);
  EXPECT_FALSE(Whole(grammar, "x"));
  EXPECT_TRUE(Whole(grammar, "xx"));
  EXPECT_TRUE(Whole(grammar, "xxxx"));
  EXPECT_FALSE(Whole(grammar, "xxxxx"));

  B unbounded;
  const int32_t plus = unbounded.Repeat("x+", B::Literal("x"), 1, -1);
  auto plus_grammar = Built(unbounded, plus);
  EXPECT_FALSE(Whole(plus_grammar, ""));
  EXPECT_TRUE(Whole(plus_grammar, std::string(50, 'x')));
}

// Star is right-recursive: with tail calls its stack does not grow with the text, so the matcher
// keeps as many frames after a long run as after a short one.
TEST(GrammarMatcherTest, RepetitionRunsInConstantMemory) {
  B b;
  const int32_t letters = b.Star("letters", {B::Bytes(ByteSet::Range('a', 'z'))});
  const int32_t root = b.AddRule("root", {{B::Bytes(ByteSet::Of('"')), B::Ref(letters),
                                           B::Bytes(ByteSet::Of('"'))}});
  auto grammar = Built(b, root);
  absl::StatusOr<GrammarMatcher> m = GrammarMatcher::Create(grammar);
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE(m->Accept("\"ab").ok());
  const size_t frames_short = m->Mark();
  for (int i = 0; i < 5000; ++i) ASSERT_TRUE(m->Accept("q").ok());
  EXPECT_EQ(m->Mark(), frames_short);
  ASSERT_TRUE(m->Accept("\"").ok());
  EXPECT_TRUE(m->complete());
}

// Nested, non-tail recursion with two ways to close each level keeps 2^n parses alive after n
// opening bytes: the matcher refuses to go past kMaxStacks.
TEST(GrammarMatcherTest, RefusesPathologicalAmbiguity) {
  B b;
  const int32_t s = b.DeclareRule("s");
  b.AddAlternative(s, {B::Bytes(ByteSet::Of('a')), B::Ref(s), B::Bytes(ByteSet::Of('b'))});
  b.AddAlternative(s, {B::Bytes(ByteSet::Of('a')), B::Ref(s), B::Bytes(ByteSet::Of('c'))});
  b.AddAlternative(s, {});
  auto grammar = Built(b, s);
  absl::StatusOr<GrammarMatcher> m = GrammarMatcher::Create(grammar);
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(m->Accept("aaaa").ok());
  const absl::Status s_far = m->Accept(std::string(20, 'a'));
  EXPECT_EQ(s_far.code(), absl::StatusCode::kResourceExhausted) << s_far;
  // Still usable from where it was.
  EXPECT_TRUE(m->Accept("bcbb").ok());
  EXPECT_TRUE(m->complete());
}

TEST(GrammarMatcherTest, Utf8CharacterAcceptsOnlyWellFormedUtf8) {
  B b;
  const int32_t ch = b.Utf8Character("character", ByteSet::Range(0x20, 0x7E));
  const int32_t root = b.Star("text", {B::Ref(ch)});
  auto grammar = Built(b, root);
  EXPECT_TRUE(Whole(grammar, "plain"));
  EXPECT_TRUE(Whole(grammar, "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"));  // é € 😀
  EXPECT_FALSE(Whole(grammar, "\xC3"));              // cut short
  EXPECT_FALSE(Whole(grammar, "\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(Whole(grammar, "\xED\xA0\x80"));      // a surrogate
  EXPECT_FALSE(Whole(grammar, "\xF4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(Whole(grammar, "\x01"));              // outside the ASCII set given
  // A character split across two inputs (as across two tokens) is fine.
  absl::StatusOr<GrammarMatcher> m = GrammarMatcher::Create(grammar);
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE(m->Accept("\xE2").ok());
  EXPECT_FALSE(m->complete());
  ASSERT_TRUE(m->Accept("\x82\xAC").ok());
  EXPECT_TRUE(m->complete());
}

}  // namespace
}  // namespace tandem::engine
