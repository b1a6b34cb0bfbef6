// The compiled-grammar cache (engine/grammar_cache.h): one compile per key, least recently used
// out by count and by bytes, errors and oversized grammars not kept, and concurrent callers get
// working grammars.
#include "engine/grammar_cache.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/json_schema_grammar.h"
#include "gtest/gtest.h"

namespace tandem::engine {
namespace {

TEST(GrammarCacheTest, EachKeyCompilesOnceUntilItIsTheLeastRecentlyUsed) {
  GrammarCache cache(/*max_bytes=*/size_t{1} << 30, /*max_entries=*/2);
  int compiles = 0;
  auto compile = [&](const char* schema) {
    return [&compiles, schema]() {
      ++compiles;
      return JsonSchemaGrammar(schema);
    };
  };
  auto a = cache.GetOrCompile("a", compile(R"({"type": "integer"})"));
  ASSERT_TRUE(a.ok()) << a.status();
  auto again = cache.GetOrCompile("a", compile(R"({"type": "integer"})"));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*a, *again);  // the same grammar object
  EXPECT_EQ(compiles, 1);
  EXPECT_EQ(cache.hits(), 1);
  EXPECT_EQ(cache.compiles(), 1);
  ASSERT_TRUE(cache.GetOrCompile("b", compile(R"({"type": "string"})")).ok());
  ASSERT_TRUE(cache.GetOrCompile("a", compile(R"({"type": "integer"})")).ok());  // a: recent
  ASSERT_TRUE(cache.GetOrCompile("c", compile(R"({"type": "boolean"})")).ok());  // b goes
  EXPECT_EQ(cache.entries(), 2u);
  EXPECT_EQ(compiles, 3);
  ASSERT_TRUE(cache.GetOrCompile("a", compile(R"({"type": "integer"})")).ok());
  EXPECT_EQ(compiles, 3);
  ASSERT_TRUE(cache.GetOrCompile("b", compile(R"({"type": "string"})")).ok());
  EXPECT_EQ(compiles, 4);

  // Errors are not kept.
  for (int i = 0; i < 2; ++i) {
    EXPECT_FALSE(cache.GetOrCompile("bad", compile(R"({"multipleOf": 2})")).ok());
  }
  EXPECT_EQ(compiles, 6);
  EXPECT_EQ(cache.compiles(), 6);
}

TEST(GrammarCacheTest, BytesAreBudgeted) {
  absl::StatusOr<Grammar> probe = JsonSchemaGrammar(R"({"type": "string"})");
  ASSERT_TRUE(probe.ok());
  const size_t one = probe->memory_bytes() + 2;  // a grammar and a one-byte key, held twice
  GrammarCache cache(/*max_bytes=*/2 * one, /*max_entries=*/100);
  for (const char* key : {"a", "b", "c"}) {
    ASSERT_TRUE(cache.GetOrCompile(key, [] { return JsonSchemaGrammar(R"({"type": "string"})"); })
                    .ok());
  }
  EXPECT_EQ(cache.entries(), 2u);
  EXPECT_LE(cache.bytes(), 2 * one);
  // A grammar larger than the whole budget is returned, not kept.
  GrammarCache tiny(/*max_bytes=*/16);
  auto big = tiny.GetOrCompile("x", [] { return JsonSchemaGrammar(R"({"type": "string"})"); });
  ASSERT_TRUE(big.ok());
  EXPECT_NE(*big, nullptr);
  EXPECT_EQ(tiny.entries(), 0u);
}

TEST(GrammarCacheTest, ConcurrentCallersAllGetTheGrammar) {
  GrammarCache cache(size_t{1} << 30, /*max_entries=*/4);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const std::string key = absl::StrCat("k", (i + t) % 7);
        auto grammar = cache.GetOrCompile(key, [] { return JsonSchemaGrammar(R"({"type": "null"})"); });
        if (!grammar.ok() || *grammar == nullptr) ++failures;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_LE(cache.entries(), 4u);
}

}  // namespace
}  // namespace tandem::engine
