#include "engine/draft_tokens.h"

#include <optional>
#include <vector>

#include "gtest/gtest.h"

namespace tandem::engine {
namespace {

using Ids = std::vector<int32_t>;

Ids Draft(const Ids& tokens, size_t prompt_tokens, const Ids& prediction,
          const DraftOptions& options = {}) {
  Ids draft = {99};  // replaced, never appended to
  ProposeDraft(tokens, prompt_tokens, prediction, options, &draft);
  return draft;
}

TEST(DraftTokensTest, NothingToFollowGivesNoDraft) {
  EXPECT_EQ(Draft({}, 0, {}), Ids{});
  EXPECT_EQ(Draft({1, 2, 3, 4}, 4, {}), Ids{});  // no n-gram repeats
  DraftOptions none;
  none.max_tokens = 0;
  EXPECT_EQ(Draft({1, 2, 1, 2}, 4, {}, none), Ids{});
}

TEST(DraftTokensTest, PromptLookupContinuesTheLatestLongestMatch) {
  // "7 8" appeared twice before: the later place (followed by 5 6) wins the tie.
  EXPECT_EQ(Draft({7, 8, 1, 2, 7, 8, 5, 6, 9, 7, 8}, 11, {}), (Ids{5, 6, 9, 7}));
  // A longer match beats a later one: "3 7 8" matched only at the first place.
  EXPECT_EQ(Draft({3, 7, 8, 1, 2, 7, 8, 5, 6, 3, 7, 8}, 12, {}), (Ids{1, 2, 7, 8}));
  // The draft stops where the text does.
  EXPECT_EQ(Draft({4, 5, 6, 4, 5}, 5, {}), (Ids{6, 4, 5}));
}

TEST(DraftTokensTest, OneTokenInCommonIsNotEnoughByDefault) {
  const Ids tokens = {1, 9, 2, 3, 9};
  EXPECT_EQ(Draft(tokens, 5, {}), Ids{});
  DraftOptions loose;
  loose.min_match = 1;
  EXPECT_EQ(Draft(tokens, 5, {}, loose), (Ids{2, 3, 9}));
}

TEST(DraftTokensTest, MaxTokensBoundsTheDraft) {
  DraftOptions two;
  two.max_tokens = 2;
  EXPECT_EQ(Draft({1, 2, 3, 4, 5, 6, 1, 2}, 8, {}, two), (Ids{3, 4}));
}

TEST(DraftTokensTest, APredictionIsDraftedFromItsStart) {
  // Nothing output yet beyond the first token: the prediction follows the whole prompt.
  const Ids prompt = {10, 11, 12};
  EXPECT_EQ(Draft({10, 11, 12, 20}, 3, {20, 21, 22, 23, 24, 25}), (Ids{21, 22, 23, 24}));
  // Even a one-token prompt matches "whole", which beats the minimum match.
  EXPECT_EQ(Draft({10, 20}, 1, {20, 21, 22}), (Ids{21, 22}));
}

TEST(DraftTokensTest, APredictionResumesAfterTheOutputDeparts) {
  // Predicted 30 31 32 33 34 35 36; the output wrote 30 31 77 78 and is back at "33 34".
  const Ids prediction = {30, 31, 32, 33, 34, 35, 36, 37};
  const Ids tokens = {1, 2, 30, 31, 77, 78, 33, 34};
  EXPECT_EQ(Draft(tokens, 2, prediction), (Ids{35, 36, 37}));
  // While it is off the prediction, nothing is drafted from it.
  EXPECT_EQ(Draft({1, 2, 30, 31, 77, 78}, 2, prediction), Ids{});
}

TEST(DraftTokensTest, ThePredictionWinsATieWithTheSequence) {
  // "5 6" is followed by 7 in the prompt and by 8 in the prediction (the output so far, "6",
  // is off the prediction's start).
  const Ids tokens = {5, 6, 7, 0, 5, 6};
  EXPECT_EQ(Draft(tokens, 5, {9, 5, 6, 8}), (Ids{8}));
  DraftOptions off;
  off.prompt_lookup = false;
  EXPECT_EQ(Draft({5, 6, 7, 0, 5, 6}, 6, {}, off), Ids{});
}

TEST(DraftTokensTest, AHintKeepsARepeatingPredictionAligned) {
  // The prediction says "10 11 12" twice, followed by 20 then 21; the output has written the
  // first. With matches capped at three tokens both places tie: the latest wins, unless the
  // hint says where the previous draft would continue.
  const Ids tokens = {1, 2, 10, 11, 12};
  const Ids prediction = {10, 11, 12, 20, 10, 11, 12, 21};
  DraftOptions capped;
  capped.max_match = 3;
  Ids draft;
  std::optional<DraftPlace> place = ProposeDraft(tokens, 2, prediction, capped, &draft);
  EXPECT_EQ(draft, Ids{21});
  ASSERT_TRUE(place.has_value());
  EXPECT_TRUE(place->in_prediction);
  EXPECT_EQ(place->at, 9u);
  place = ProposeDraft(tokens, 2, prediction, capped, &draft, /*prediction_hint=*/5);
  EXPECT_EQ(draft, (Ids{20, 10, 11, 12}));
  ASSERT_TRUE(place.has_value());
  EXPECT_EQ(place->at, 5u);
  // No draft, no place.
  const Ids plain_text = {1, 2, 3};
  EXPECT_FALSE(ProposeDraft(plain_text, 3, {}, {}, &draft).has_value());
  EXPECT_TRUE(draft.empty());
}

TEST(DraftTokensTest, InconsistentArgumentsDraftNothing) {
  EXPECT_EQ(Draft({1, 2, 1}, 5, {1, 2}), Ids{});  // more prompt than tokens
}

}  // namespace
}  // namespace tandem::engine
