// ChoicesUsage: one answer's usage from its choices' (both APIs report it): the prompts counted
// once per prompt, what each choice generated summed, and reasoning_tokens summed while every
// choice's is known.
#include <cstdint>
#include <optional>
#include <vector>

#include "engine/request.h"
#include "gtest/gtest.h"
#include "server/grpc/event_conversion.h"

namespace tandem::server {
namespace {

engine::Event Finished(int64_t prompt, int64_t completion, std::optional<int64_t> reasoning) {
  engine::Event event;
  event.kind = engine::Event::Kind::kFinished;
  event.usage.prompt_tokens = prompt;
  event.usage.completion_tokens = completion;
  event.usage.reasoning_tokens = reasoning;
  return event;
}

TEST(ChoicesUsageTest, ReasoningTokensAddUpWhileEveryChoicesIsKnown) {
  // Two prompts, two choices each.
  const std::vector<engine::Event> known = {Finished(10, 5, 3), Finished(10, 7, 7),
                                            Finished(4, 2, 0), Finished(4, 9, 1)};
  const engine::Usage usage = ChoicesUsage(known, 2);
  EXPECT_EQ(usage.prompt_tokens, 14);
  EXPECT_EQ(usage.completion_tokens, 23);
  EXPECT_EQ(usage.reasoning_tokens, 11);

  const std::vector<engine::Event> one_unknown = {Finished(10, 5, 3), Finished(10, 7, std::nullopt),
                                                  Finished(10, 2, 2)};
  EXPECT_EQ(ChoicesUsage(one_unknown).reasoning_tokens, std::nullopt);
  EXPECT_EQ(ChoicesUsage({}).reasoning_tokens, 0);
}

}  // namespace
}  // namespace tandem::server
