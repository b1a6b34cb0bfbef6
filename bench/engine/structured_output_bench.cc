// What structured output adds to a step: the vocabulary walk that finds the allowed tokens
// (TokenTrie::AllowedTokens), by vocabulary and by where the output stands in a JSON Schema.
// Compare with BM_SampleRow (sampler_bench.cc, same binary), the host sampler's cost per row.
// Arguments: vocabulary (0 the bundled model's 4,096 SentencePiece tokens, 1 a 131,072-token
// vocabulary made of those tokens and pairs of them), and the output so far (0 nothing: a value
// starts; 1 inside a string: nearly every token is allowed; 2 after a member: a key must start;
// 3 inside a string with a maxLength of 64, whose every character moves the parse on, so that
// no subtree can be taken whole; 4 inside a string of a `pattern`, ^[A-Za-z ,.]{1,64}$; 5 inside
// a `date-time` string; 6 inside an integer between bounds).
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/json_schema_grammar.h"
#include "engine/output_constraint.h"
#include "bench/bench_vocabulary.h"
#include "engine/token_trie.h"

namespace tandem::engine {
namespace {

constexpr const char* kSchema = R"({"type": "object", "properties": {
    "name": {"type": "string"}, "age": {"type": "integer"}, "tags": {"type": "array",
    "items": {"type": "string"}}}, "required": ["name", "age"]})";
constexpr const char* kBoundedSchema = R"({"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 64}}, "required": ["name"]})";
constexpr const char* kPatternSchema = R"({"type": "object", "properties": {
    "name": {"type": "string", "pattern": "^[A-Za-z ,.]{1,64}$"}}, "required": ["name"]})";
constexpr const char* kFormatSchema = R"({"type": "object", "properties": {
    "when": {"type": "string", "format": "date-time"}}, "required": ["when"]})";
constexpr const char* kRangeSchema = R"({"type": "object", "properties": {
    "age": {"type": "integer", "minimum": 18, "maximum": 130}}, "required": ["age"]})";

struct Place {
  const char* schema;
  const char* prefix;
};
constexpr Place kPlaces[] = {{kSchema, ""},
                             {kSchema, "{\"name\": \"Eliza"},
                             {kSchema, "{\"name\": \"Eliza\", "},
                             {kBoundedSchema, "{\"name\": \"Eliza"},
                             {kPatternSchema, "{\"name\": \"Eliza"},
                             {kFormatSchema, "{\"when\": \"2024-02-"},
                             {kRangeSchema, "{\"age\": 1"}};

void BM_AllowedTokens(benchmark::State& state) {
  static const auto* const kTries = new std::vector<std::shared_ptr<const TokenTrie>>{
      std::make_shared<const TokenTrie>(bench::BundledTokens()),
      std::make_shared<const TokenTrie>(bench::LargeTokens())};
  const auto& trie = (*kTries)[static_cast<size_t>(state.range(0))];
  if (trie->num_tokens() == 0) {
    state.SkipWithError("the bundled model's tokenizer did not load");
    return;
  }
  const Place& place = kPlaces[state.range(1)];
  auto grammar = std::make_shared<const Grammar>(*JsonSchemaGrammar(place.schema));
  absl::StatusOr<OutputConstraint> constraint = OutputConstraint::Create(grammar, trie);
  if (!constraint.ok() || !constraint->Accept(place.prefix).ok()) {
    state.SkipWithError("the prefix does not fit the schema");
    return;
  }
  bench::TimeAllowedTokens(state, *constraint);
  state.counters["trie_nodes"] = static_cast<double>(trie->num_nodes());
}
BENCHMARK(BM_AllowedTokens)
    ->ArgsProduct({{0, 1}, {0, 1, 2, 3, 4, 5, 6}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tandem::engine
