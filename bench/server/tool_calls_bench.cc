// What tool calls cost a request: compiling a forced choice's grammar (or finding it compiled),
// the per-token vocabulary walk under it (TokenTrie through OutputConstraint), and parsing calls
// out of an answer. The tool set is 16 functions of 2-5 typed parameters, as agent frameworks send.
// BM_ForcedToolCallMask arguments: vocabulary (0 the bundled model's 4,096 tokens, 1 a
// 131,072-token vocabulary, bench_vocabulary.h) and where the output stands (0 nothing yet: the
// marker must start; 1 inside the function's name, where all 16 tools' parses are alive; 2 inside
// a string argument, where most of the vocabulary is allowed).
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_vocabulary.h"
#include "engine/grammar_cache.h"
#include "engine/output_constraint.h"
#include "engine/token_trie.h"
#include "nlohmann/json.hpp"
#include "server/tools/forced_tool_calls.h"
#include "server/tools/tool_calls.h"

namespace tandem::server {
namespace {

using ordered = nlohmann::ordered_json;

ordered SixteenTools() {
  ordered tools = ordered::array();
  const char* types[] = {"string", "integer", "boolean", "number"};
  for (int t = 0; t < 16; ++t) {
    ordered properties = ordered::object();
    ordered required = ordered::array();
    for (int p = 0; p < 2 + t % 4; ++p) {
      const std::string name = absl::StrCat("param_", p);
      properties[name] = {{"type", types[(t + p) % 4]}, {"description", "a parameter"}};
      if (p == 0) required.push_back(name);
    }
    properties["unit"] = {{"enum", {"celsius", "fahrenheit", "kelvin"}}};
    tools.push_back(
        {{"type", "function"},
         {"function",
          {{"name", absl::StrCat("tool_number_", t)},
           {"description", "does something useful"},
           {"parameters",
            {{"type", "object"}, {"properties", properties}, {"required", required}}}}}});
  }
  return tools;
}

void BM_ForcedToolCallGrammar(benchmark::State& state) {
  const ordered tools = SixteenTools();
  for (auto _ : state) {
    absl::StatusOr<engine::Grammar> grammar =
        ForcedToolCallGrammar(ToolCallFormat::kHermes, tools, "", /*parallel=*/true);
    if (!grammar.ok()) state.SkipWithError("the tools did not compile");
    benchmark::DoNotOptimize(grammar);
  }
}
BENCHMARK(BM_ForcedToolCallGrammar)->Unit(benchmark::kMicrosecond);

// The same request again: its key built and found in the server's cache.
void BM_ForcedToolCallGrammarCached(benchmark::State& state) {
  const ordered tools = SixteenTools();
  engine::GrammarCache cache;
  auto compile = [&] {
    return ForcedToolCallGrammar(ToolCallFormat::kHermes, tools, "", /*parallel=*/true);
  };
  for (auto _ : state) {
    auto grammar =
        cache.GetOrCompile(ForcedToolCallKey(ToolCallFormat::kHermes, tools, "", true), compile);
    if (!grammar.ok()) state.SkipWithError("the tools did not compile");
    benchmark::DoNotOptimize(grammar);
  }
}
BENCHMARK(BM_ForcedToolCallGrammarCached)->Unit(benchmark::kMicrosecond);

void BM_ForcedToolCallMask(benchmark::State& state) {
  static const auto* const kTries = new std::vector<std::shared_ptr<const engine::TokenTrie>>{
      std::make_shared<const engine::TokenTrie>(bench::BundledTokens()),
      std::make_shared<const engine::TokenTrie>(bench::LargeTokens())};
  const auto& trie = (*kTries)[static_cast<size_t>(state.range(0))];
  if (trie->num_tokens() == 0) {
    state.SkipWithError("the bundled model's tokenizer did not load");
    return;
  }
  absl::StatusOr<engine::Grammar> grammar =
      ForcedToolCallGrammar(ToolCallFormat::kHermes, SixteenTools(), "", /*parallel=*/true);
  if (!grammar.ok()) {
    state.SkipWithError("the tools did not compile");
    return;
  }
  absl::StatusOr<engine::OutputConstraint> constraint = engine::OutputConstraint::Create(
      std::make_shared<const engine::Grammar>(*std::move(grammar)), trie);
  const char* prefixes[] = {"", "<tool_call>\n{\"name\": \"tool_num",
                            "<tool_call>\n{\"name\": \"tool_number_4\", \"arguments\": "
                            "{\"param_0\": \"Eliza"};
  if (!constraint.ok() || !constraint->Accept(prefixes[state.range(1)]).ok()) {
    state.SkipWithError("the prefix does not fit the grammar");
    return;
  }
  bench::TimeAllowedTokens(state, *constraint);
}
BENCHMARK(BM_ForcedToolCallMask)->ArgsProduct({{0, 1}, {0, 1, 2}})->Unit(benchmark::kMicrosecond);

void BM_ParseToolCalls(benchmark::State& state) {
  const nlohmann::json tools = nlohmann::json::parse(SixteenTools().dump());
  const std::string answer =
      "Let me look both up.\n<tool_call>\n{\"name\": \"tool_number_4\", \"arguments\": "
      "{\"param_0\": \"Eliza\", \"param_1\": 3}}\n</tool_call>\n<tool_call>\n{\"name\": "
      "\"tool_number_9\", \"arguments\": {\"param_0\": 12, \"unit\": \"kelvin\"}}\n</tool_call>";
  for (auto _ : state) {
    ToolCallPiece piece = ParseToolCalls(ToolCallFormat::kHermes, tools, answer);
    benchmark::DoNotOptimize(piece.calls.data());
  }
}
BENCHMARK(BM_ParseToolCalls)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tandem::server
