// The vocabulary trie's walk (engine/token_trie.h) against the obvious rule: a token is allowed
// exactly when the grammar accepts all of its bytes after the output so far.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/grammar_matcher.h"
#include "engine/json_schema_grammar.h"
#include "engine/output_constraint.h"
#include "engine/token_trie.h"
#include "gtest/gtest.h"

namespace tandem::engine {
namespace {

// A made-up vocabulary with shared prefixes, duplicates, tokens that end inside a UTF-8
// character and an empty token (which can never be allowed).
std::vector<std::pair<int32_t, std::string>> Vocabulary() {
  const std::vector<std::string> pieces = {
      "{",  "}",    "\"",   "a",  "ab",     "\"a",   "{\"", " ",     "1",       "12",
      "x\"}", "\xC3", "\xA9", "",  "\xC3\xA9", "true", "tr",  "\":",   "\": \"", ",",
      "\"ab\"", "\n", "ab",   "}}", "null",   "{\"a\":", "\\", "\\n", "\"b\"",  ":"};
  std::vector<std::pair<int32_t, std::string>> tokens;
  for (size_t i = 0; i < pieces.size(); ++i) tokens.emplace_back(static_cast<int32_t>(i), pieces[i]);
  return tokens;
}

// The allowed tokens by trying each one on a copy of the matcher.
std::vector<int32_t> BruteForce(const GrammarMatcher& matcher,
                                const std::vector<std::pair<int32_t, std::string>>& tokens) {
  std::vector<int32_t> allowed;
  for (const auto& [id, bytes] : tokens) {
    GrammarMatcher copy = matcher;
    if (!bytes.empty() && copy.Accept(bytes).ok()) allowed.push_back(id);
  }
  std::sort(allowed.begin(), allowed.end());
  return allowed;
}

// Along `text`, the walk and the brute force agree at every byte boundary, and the walk leaves
// the matcher as it found it.
void ExpectWalkMatchesBruteForce(std::string_view schema, const std::string& text) {
  const auto tokens = Vocabulary();
  const TokenTrie trie(tokens);
  EXPECT_EQ(trie.num_tokens(), tokens.size() - 1);  // the empty one is left out
  auto grammar = std::make_shared<const Grammar>(*JsonSchemaGrammar(schema));
  absl::StatusOr<GrammarMatcher> m = GrammarMatcher::Create(grammar);
  ASSERT_TRUE(m.ok());
  TrieWalkScratch scratch;
  for (size_t i = 0; i <= text.size(); ++i) {
    SCOPED_TRACE(text.substr(0, i));
    std::vector<int32_t> walked;
    const ParseState before = m->state();
    const size_t frames = m->Mark();
    ASSERT_TRUE(trie.AllowedTokens(*m, &scratch, &walked).ok());
    EXPECT_EQ(m->state(), before);
    EXPECT_EQ(m->Mark(), frames);
    std::sort(walked.begin(), walked.end());
    EXPECT_EQ(walked, BruteForce(*m, tokens));
    if (i < text.size()) {
      ASSERT_TRUE(m->Accept(text.substr(i, 1)).ok());
    }
  }
  EXPECT_TRUE(m->complete());
}

TEST(TokenTrieTest, AllowsExactlyTheTokensTheGrammarAccepts) {
  ExpectWalkMatchesBruteForce(
      R"({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "boolean"}}})",
      "{\"a\": \"ab\xC3\xA9\\n\", \"b\": true}");
}

// A bounded string moves the state on with every character: subtrees are taken whole only while
// enough characters are left for their deepest token.
TEST(TokenTrieTest, BoundedStringsAllowOnlyTokensThatStillFit) {
  ExpectWalkMatchesBruteForce(R"({"type": "array", "items": {"type": "string", "maxLength": 4}})",
                              "[\"ab\", \"\xC3\xA9" "ab\", \"abab\"]");
}

TEST(OutputConstraintTest, EndTokensOnlyWhereTheTextIsWhole) {
  auto trie = std::make_shared<const TokenTrie>(Vocabulary());
  auto grammar = std::make_shared<const Grammar>(*JsonSchemaGrammar(R"({"enum": ["ab", null]})"));
  absl::StatusOr<OutputConstraint> c = OutputConstraint::Create(grammar, trie);
  ASSERT_TRUE(c.ok());
  const std::vector<int32_t> end = {100};
  std::vector<int32_t> allowed;
  ASSERT_TRUE(c->AllowedTokens(end, &allowed).ok());
  // '"', '"a', '"ab"', 'null', ' ' and '\n' (leading whitespace) start a value.
  EXPECT_EQ(allowed, (std::vector<int32_t>{2, 5, 7, 20, 21, 24}));
  ASSERT_TRUE(c->Accept("\"ab\"").ok());
  ASSERT_TRUE(c->AllowedTokens(end, &allowed).ok());
  EXPECT_EQ(allowed, end);  // whole, and nothing may follow but the end
  EXPECT_TRUE(c->complete());
  EXPECT_FALSE(c->can_continue());
}

// An ordinary token given as an end token (a newline as a stop id) would end the value half
// written: it is allowed only where the text is whole.
TEST(OutputConstraintTest, OrdinaryEndTokensWaitForAWholeValue) {
  auto trie = std::make_shared<const TokenTrie>(Vocabulary());
  auto grammar = std::make_shared<const Grammar>(*JsonSchemaGrammar(
      R"({"type": "object", "properties": {"a": {"type": "integer"}}})"));
  absl::StatusOr<OutputConstraint> c = OutputConstraint::Create(grammar, trie);
  ASSERT_TRUE(c.ok());
  const std::vector<int32_t> newline_stops = {21};  // "\n"
  std::vector<int32_t> allowed;
  ASSERT_TRUE(c->Accept("{").ok());
  ASSERT_TRUE(c->AllowedTokens(newline_stops, &allowed).ok());
  EXPECT_FALSE(std::binary_search(allowed.begin(), allowed.end(), 21));
  ASSERT_TRUE(c->Accept("}").ok());
  ASSERT_TRUE(c->AllowedTokens(newline_stops, &allowed).ok());
  EXPECT_EQ(allowed, newline_stops);
}

}  // namespace
}  // namespace tandem::engine

namespace tandem::engine {
namespace {

// Markup tokens (special tokens outside the trie, such as a tool-call marker) are allowed where
// the grammar takes their bytes, and only there.
TEST(OutputConstraintTest, MarkupTokensAreAllowedWhereTheirBytesAre) {
  JsonFrame frame;
  frame.open = "<call>";
  frame.close = "</call>";
  auto grammar = std::make_shared<const Grammar>(
      *FramedJsonSchemaGrammar(R"({"type": "integer"})", frame));
  auto trie = std::make_shared<const TokenTrie>(Vocabulary());
  constexpr int32_t kOpen = 100, kClose = 101;
  absl::StatusOr<OutputConstraint> c =
      OutputConstraint::Create(grammar, trie, {{kOpen, "<call>"}, {kClose, "</call>"}, {102, ""}});
  ASSERT_TRUE(c.ok()) << c.status();
  const std::vector<int32_t> end = {99};
  std::vector<int32_t> allowed;
  ASSERT_TRUE(c->AllowedTokens(end, &allowed).ok());
  EXPECT_EQ(allowed, std::vector<int32_t>{kOpen});  // no ordinary token spells "<"
  ASSERT_TRUE(c->Accept("<call>1").ok());
  ASSERT_TRUE(c->AllowedTokens(end, &allowed).ok());
  EXPECT_NE(std::find(allowed.begin(), allowed.end(), kClose), allowed.end());
  EXPECT_EQ(std::find(allowed.begin(), allowed.end(), kOpen), allowed.end());
  ASSERT_TRUE(c->Accept("</call>").ok());
  ASSERT_TRUE(c->AllowedTokens(end, &allowed).ok());
  EXPECT_EQ(allowed, end);  // whole: only the end token
}

}  // namespace
}  // namespace tandem::engine
