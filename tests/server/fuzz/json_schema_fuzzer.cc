// libFuzzer target for structured output's schema compiler: the input is a JSON Schema's text
// (readable seeds in tests/data/fuzz/json_schema), compiled to a grammar with its patterns,
// formats and numeric bounds, whose matcher then takes up to 64 bytes, each chosen among the
// allowed ones by the input's own bytes. Any answer is fine; a crash, a sanitizer report or a
// hang is not. Run e.g.
//   build/fuzz/json_schema_fuzzer -max_total_time=60 CORPUS_DIR
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "engine/grammar_matcher.h"
#include "engine/json_schema_grammar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<tandem::engine::Grammar> grammar = tandem::engine::JsonSchemaGrammar(text);
  if (!grammar.ok()) return 0;
  absl::StatusOr<tandem::engine::GrammarMatcher> matcher = tandem::engine::GrammarMatcher::Create(
      std::make_shared<const tandem::engine::Grammar>(*std::move(grammar)));
  if (!matcher.ok()) return 0;
  std::vector<uint8_t> allowed;
  for (size_t step = 0; step < 64; ++step) {
    allowed.clear();
    for (int b = 0; b < 256; ++b) {
      if (matcher->Allows(matcher->state(), static_cast<uint8_t>(b))) {
        allowed.push_back(static_cast<uint8_t>(b));
      }
    }
    if (allowed.empty()) break;
    const char byte = static_cast<char>(allowed[data[step % size] % allowed.size()]);
    if (!matcher->Accept(std::string_view(&byte, 1)).ok()) break;
  }
  return 0;
}
