// Reading the OpenAI API's answers in tests: a JSON body, and the JSON events of a Server-Sent
// Events stream.
#ifndef TANDEM_TESTS_SERVER_GRPC_OPENAI_TEST_EVENTS_H_
#define TANDEM_TESTS_SERVER_GRPC_OPENAI_TEST_EVENTS_H_

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tandem::server::testing {

inline nlohmann::json Parse(const std::string& body) {
  nlohmann::json parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(parsed.is_discarded()) << body;
  return parsed;
}

// The JSON events of a Server-Sent Events body; `done` tells whether it ended with [DONE].
inline std::vector<nlohmann::json> SseEvents(const std::string& body, bool* done) {
  std::vector<nlohmann::json> events;
  *done = false;
  for (absl::string_view event : absl::StrSplit(body, "\n\n", absl::SkipEmpty())) {
    EXPECT_TRUE(absl::ConsumePrefix(&event, "data: ")) << event;
    if (event == "[DONE]") {
      *done = true;
      continue;
    }
    EXPECT_FALSE(*done) << "an event after [DONE]";
    events.push_back(Parse(std::string(event)));
  }
  return events;
}

}  // namespace tandem::server::testing

#endif  // TANDEM_TESTS_SERVER_GRPC_OPENAI_TEST_EVENTS_H_
