// The split of a model's output into reasoning and answer (server/reasoning/reasoning_stream.h):
// what the whole split gives for each shape of output, that a stream cut anywhere hands out the
// same, and that the stream holds back only what may still be a marker.
#include "server/reasoning/reasoning_stream.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/reasoning/reasoning_format.h"

namespace tandem::server {
namespace {

struct Case {
  const char* name;
  bool opened;
  std::string output;
  std::string reasoning;
  std::string content;
  bool reasoned;
};

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      {"block then answer", false, "<think>\nplan\n</think>\n\nAnswer.", "\nplan\n", "Answer.",
       true},
      {"whitespace before the block", false, " \n<think>x</think>y", "x", "y", true},
      {"no block", false, "Answer <think>x</think>", "", "Answer <think>x</think>", false},
      {"opened by the prompt", true, "plan</think>\n\nAnswer", "plan", "Answer", true},
      {"cut off inside the block", true, "plan only", "plan only", "", true},
      {"cut off inside the end marker", true, "plan</thi", "plan</thi", "", true},
      {"cut off inside the start marker", false, "<thi", "", "<thi", false},
      {"only whitespace", false, " \n ", "", " \n ", false},
      {"empty", false, "", "", "", false},
      {"empty after an opening prompt", true, "", "", "", true},
      {"a second end marker is answer", true, "a</think>b</think>c", "a", "b</think>c", true},
      {"an empty block", false, "<think></think>Answer", "", "Answer", true},
      {"nothing after the block", true, "x</think> \n\t", "x", "", true},
      {"answer keeps inner whitespace", true, "x</think>\n\n  A\n\nB \n", "x", "A\n\nB \n", true},
      {"a repeated start marker is dropped", true, "<think>x</think>y", "x", "y", true},
      {"with the whitespace before it", true, "\n <think>\nx</think>y", "\nx", "y", true},
      {"a later start marker is reasoning", true, "a <think> b</think>c", "a <think> b", "c", true},
      {"opened, cut off in a repeated marker", true, "\n<thi", "\n<thi", "", true},
      {"opened, whitespace kept", true, "\n\nx</think>y", "\n\nx", "y", true},
      {"multi-byte text", false, "<think>é→</think>ü", "é→", "ü", true},
  };
  return cases;
}

struct Joined {
  std::string reasoning;
  std::string content;
  bool reasoned = false;
};

// The output fed in the pieces that `cuts` (ascending byte offsets) make, then finished.
Joined Streamed(const Case& c, const std::vector<size_t>& cuts) {
  ReasoningStream stream(ReasoningFormat::kThink, c.opened);
  Joined out;
  size_t at = 0;
  std::vector<size_t> ends = cuts;
  ends.push_back(c.output.size());
  for (size_t end : ends) {
    ReasoningPiece piece = stream.Feed(std::string_view(c.output).substr(at, end - at));
    out.reasoning += piece.reasoning;
    out.content += piece.content;
    at = end;
  }
  ReasoningPiece rest = stream.Finish();
  out.reasoning += rest.reasoning;
  out.content += rest.content;
  out.reasoned = stream.reasoned();
  return out;
}

TEST(ReasoningStreamTest, TheWholeSplitFollowsTheFormat) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    const ReasoningPiece whole = SplitReasoning(ReasoningFormat::kThink, c.opened, c.output);
    EXPECT_EQ(whole.reasoning, c.reasoning);
    EXPECT_EQ(whole.content, c.content);
    EXPECT_EQ(Streamed(c, {}).reasoned, c.reasoned);
  }
}

TEST(ReasoningStreamTest, AStreamCutAnywhereHandsOutTheWholeSplit) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    const size_t n = c.output.size();
    std::vector<size_t> bytes;  // one byte at a time
    for (size_t i = 1; i < n; ++i) bytes.push_back(i);
    std::vector<std::vector<size_t>> cuttings = {{}, bytes};
    for (size_t i = 0; i <= n; ++i) {
      for (size_t j = i; j <= n; ++j) cuttings.push_back({i, j});
    }
    for (const std::vector<size_t>& cuts : cuttings) {
      const Joined streamed = Streamed(c, cuts);
      ASSERT_EQ(streamed.reasoning, c.reasoning) << "cuts " << ::testing::PrintToString(cuts);
      ASSERT_EQ(streamed.content, c.content) << "cuts " << ::testing::PrintToString(cuts);
      ASSERT_EQ(streamed.reasoned, c.reasoned) << "cuts " << ::testing::PrintToString(cuts);
    }
  }
}

TEST(ReasoningStreamTest, OnlyWhatMayBeAMarkerIsHeldBack) {
  ReasoningStream stream(ReasoningFormat::kThink, /*opened=*/false);
  ReasoningPiece p = stream.Feed("\n<th");
  EXPECT_EQ(p.reasoning + p.content, "");  // may still open the block
  p = stream.Feed("ink>pl");
  EXPECT_EQ(p.reasoning, "pl");
  EXPECT_TRUE(stream.reasoned());
  p = stream.Feed("an<");
  EXPECT_EQ(p.reasoning, "an");  // "<" may start the end marker
  p = stream.Feed("b</thi");
  EXPECT_EQ(p.reasoning, "<b");
  p = stream.Feed("nk>\n\n");
  EXPECT_EQ(p.reasoning + p.content, "");  // the whitespace after the block goes
  p = stream.Feed("Hi <think>");
  EXPECT_EQ(p.content, "Hi <think>");  // the answer is never held
  EXPECT_EQ(p.reasoning, "");

  ReasoningStream answer(ReasoningFormat::kThink, /*opened=*/false);
  p = answer.Feed("No");
  EXPECT_EQ(p.content, "No");  // cannot be a marker: out at once
  EXPECT_FALSE(answer.reasoned());
}

TEST(ReasoningStreamTest, WithoutAFormatTheOutputIsTheAnswer) {
  for (bool opened : {false, true}) {
    const ReasoningPiece whole =
        SplitReasoning(ReasoningFormat::kNone, opened, "<think>x</think>y");
    EXPECT_EQ(whole.reasoning, "");
    EXPECT_EQ(whole.content, "<think>x</think>y");
    EXPECT_FALSE(ReasoningStream(ReasoningFormat::kNone, opened).reasoned());
  }
}

TEST(ReasoningFormatTest, NamesAndDetection) {
  for (ReasoningFormat format : {ReasoningFormat::kNone, ReasoningFormat::kThink}) {
    absl::StatusOr<ReasoningFormat> parsed = ParseReasoningFormat(ReasoningFormatName(format));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, format);
  }
  absl::StatusOr<ReasoningFormat> unknown = ParseReasoningFormat("deepseek_r1");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(),
            "unknown reasoning format 'deepseek_r1'; one of none, think");

  EXPECT_EQ(DetectReasoningFormat(""), ReasoningFormat::kNone);
  EXPECT_EQ(DetectReasoningFormat("{{ '<|im_start|>assistant\\n' }}"), ReasoningFormat::kNone);
  // Templates that drop past reasoning, or write an empty block when reasoning is off.
  EXPECT_EQ(DetectReasoningFormat("{{ content.split('</think>')[-1] }}"), ReasoningFormat::kThink);
  EXPECT_EQ(DetectReasoningFormat("{{ '<think>\\n\\n</think>\\n\\n' }}"), ReasoningFormat::kThink);
  EXPECT_EQ(ReasoningMarkersOf(ReasoningFormat::kThink).start, "<think>");
  EXPECT_EQ(ReasoningMarkersOf(ReasoningFormat::kThink).end, "</think>");
  EXPECT_TRUE(ReasoningMarkersOf(ReasoningFormat::kNone).start.empty());
}

}  // namespace
}  // namespace tandem::server
