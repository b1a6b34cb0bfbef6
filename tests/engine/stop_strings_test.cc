#include "engine/stop_strings.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::engine {
namespace {

using ::testing::HasSubstr;

// Feeds the deltas; returns what was emitted after each, and the flushed rest as the last entry.
std::vector<std::string> Stream(StopStringMatcher& m, const std::vector<std::string>& deltas) {
  std::vector<std::string> out;
  for (const std::string& d : deltas) {
    std::string emitted;
    m.Add(d, &emitted);
    out.push_back(emitted);
  }
  std::string rest;
  m.Flush(&rest);
  out.push_back(rest);
  return out;
}

TEST(StopStringsTest, NoStopStringsPassEverythingThrough) {
  StopStringMatcher m({});
  EXPECT_THAT(Stream(m, {"Hello", " world"}), ::testing::ElementsAre("Hello", " world", ""));
  EXPECT_FALSE(m.stopped());
}

TEST(StopStringsTest, MatchSplitAcrossDeltas) {
  StopStringMatcher m({"###"});
  // "#" might start the stop string: held until it cannot.
  EXPECT_THAT(Stream(m, {"a #", "# b", "c ##", "#", " never"}),
              ::testing::ElementsAre("a ", "## b", "c ", "", "", ""));
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.matched_index(), 0);
  EXPECT_EQ(m.matched(), "###");
}

TEST(StopStringsTest, NoMatchThenFlushEmitsTheHeldBackText) {
  StopStringMatcher m({"</answer>"});
  std::string out;
  EXPECT_FALSE(m.Add("done </ans", &out));
  EXPECT_EQ(out, "done ");
  EXPECT_EQ(m.held_back(), 5u);
  m.Flush(&out);
  EXPECT_EQ(out, "done </ans");
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.matched_index(), -1);
  EXPECT_EQ(m.matched(), "");
}

TEST(StopStringsTest, TheFirstCompletedStopStringWins) {
  {
    StopStringMatcher m({"abc", "b"});
    std::string out;
    EXPECT_TRUE(m.Add("xabc", &out));
    EXPECT_EQ(out, "xa");
    EXPECT_EQ(m.matched(), "b");
  }
  {
    // Completed at the same byte: the one that starts first.
    StopStringMatcher m({"bc", "abc"});
    std::string out;
    EXPECT_FALSE(m.Add("xab", &out));
    EXPECT_EQ(out, "x");
    EXPECT_TRUE(m.Add("cd", &out));
    EXPECT_EQ(out, "x");
    EXPECT_EQ(m.matched_index(), 1);
  }
  {
    // Overlapping candidates: "aab" fails at the second 'a' but a new candidate starts there.
    StopStringMatcher m({"aab"});
    std::string out;
    EXPECT_FALSE(m.Add("a", &out));
    EXPECT_FALSE(m.Add("a", &out));
    EXPECT_FALSE(m.Add("a", &out));
    EXPECT_EQ(out, "a");
    EXPECT_TRUE(m.Add("b!", &out));
    EXPECT_EQ(out, "a");
  }
  {
    // The held suffix is the longest that a stop string starts with ("abc", not "c"), and a
    // shorter candidate inside it can still complete.
    StopStringMatcher m({"abcd", "cx"});
    std::string out;
    EXPECT_FALSE(m.Add("zabc", &out));
    EXPECT_EQ(out, "z");
    EXPECT_EQ(m.held_back(), 3u);
    EXPECT_TRUE(m.Add("x", &out));
    EXPECT_EQ(out, "zab");
    EXPECT_EQ(m.matched(), "cx");
  }
}

TEST(StopStringsTest, MultibyteStopStrings) {
  StopStringMatcher m({"日本", "€"});
  // "日" alone is held (it starts "日本"); "日は" frees it.
  EXPECT_THAT(Stream(m, {"今日", "は日", "本語"}), ::testing::ElementsAre("今", "日は", "", ""));
  EXPECT_EQ(m.matched(), "日本");

  StopStringMatcher euro({"€"});
  std::string out;
  EXPECT_TRUE(euro.Add("costs 5\xE2\x82\xAC", &out));
  EXPECT_EQ(out, "costs 5");

  // Held text never ends inside a code point: the candidate starts at a lead byte.
  StopStringMatcher m2({"é!"});
  out.clear();
  EXPECT_FALSE(m2.Add("caf\xC3\xA9", &out));
  EXPECT_EQ(out, "caf");
  EXPECT_FALSE(m2.Add("?", &out));
  EXPECT_EQ(out, "caf\xC3\xA9?");
}

TEST(StopStringsTest, AfterAStopNothingMoreIsEmitted) {
  StopStringMatcher m({"STOP"});
  std::string out;
  EXPECT_TRUE(m.Add("go STOP and more", &out));
  EXPECT_TRUE(m.Add("ignored", &out));
  m.Flush(&out);
  EXPECT_EQ(out, "go ");
}

TEST(StopStringsTest, ValidationNamesTheEntry) {
  EXPECT_TRUE(ValidateStopStrings({"a", "\xE2\x82\xAC"}).ok());
  EXPECT_THAT(std::string(ValidateStopStrings({"a", ""}).message()),
              HasSubstr("stop_strings[1] is empty"));
  EXPECT_THAT(std::string(ValidateStopStrings({"\xC3"}).message()),
              HasSubstr("stop_strings[0] is not valid UTF-8"));
  EXPECT_THAT(std::string(ValidateStopStrings({std::string(300, 'x')}).message()),
              HasSubstr("stop_strings[0] must be at most 256 bytes, got 300"));
  EXPECT_EQ(ValidateStopStrings(std::vector<std::string>(17, "x")).code(),
            absl::StatusCode::kInvalidArgument);
}

// Property: however the text is cut into deltas, the output is the same as matching the whole
// text at once.
TEST(StopStringsTest, ResultDoesNotDependOnHowTheTextIsCut) {
  const std::vector<std::string> stops = {"ab", "bca", "\xE2\x82\xAC\xE2\x82\xAC", "cc"};
  const std::string alphabet[] = {"a", "b", "c", "\xE2\x82\xAC", "x"};
  uint64_t state = 12345;
  auto next = [&](uint64_t n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % n;
  };
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<std::string> chars(next(12));
    for (std::string& c : chars) c = alphabet[next(5)];
    std::string whole;
    for (const std::string& c : chars) whole += c;
    StopStringMatcher once(stops);
    std::string want;
    once.Add(whole, &want);
    once.Flush(&want);

    StopStringMatcher cut(stops);
    std::string got, delta;
    for (size_t i = 0; i < chars.size();) {
      const size_t n = 1 + next(3);
      delta.clear();
      for (size_t j = i; j < std::min(chars.size(), i + n); ++j) delta += chars[j];
      i += n;
      cut.Add(delta, &got);
    }
    cut.Flush(&got);
    ASSERT_EQ(got, want) << whole;
    ASSERT_EQ(cut.matched_index(), once.matched_index()) << whole;
  }
}

}  // namespace
}  // namespace tandem::engine
