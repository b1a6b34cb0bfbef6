// The Prometheus endpoint of a real server: request latencies and outcomes as histograms and
// counters, and the engine's own counters and gauges agreeing with GetServerInfo.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/server/grpc/grpc_test_util.h"
#include "tests/server/http_test_client.h"

namespace tandem::server {
namespace {

using testing::Client;
using testing::Eventually;
using testing::GreedyIds;
using testing::HttpGet;
using testing::StreamResult;

// The value of the one sample of `name` whose labels include every `label="value"` given;
// -1 when there is none.
double Sample(const std::string& exposition, const std::string& name,
              const std::vector<std::string>& labels = {}) {
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (line.empty() || line.front() == '#') continue;
    const size_t space = line.rfind(' ');
    absl::string_view series = line.substr(0, space);
    if (series.substr(0, series.find('{')) != name) continue;
    bool all = true;
    for (const std::string& label : labels) all = all && absl::StrContains(series, label);
    double value = 0;
    if (all && absl::SimpleAtod(line.substr(space + 1), &value)) return value;
  }
  return -1;
}

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::LoadServedFixture();
    ASSERT_NE(model_, nullptr);
    ServerConfig config = testing::SmallServerConfig();
    // Room for a request that cannot finish before its deadline on any machine.
    config.engine.scheduler.max_new_tokens_limit = 1 << 20;
    config.engine.memory_bytes = 256 << 20;
    absl::StatusOr<std::unique_ptr<GrpcServer>> server = GrpcServer::Start(*model_, config);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    ASSERT_GT(server_->metrics_port(), 0);
  }
  std::string Scrape() {
    testing::HttpResponse response = HttpGet(server_->metrics_port(), "/metrics");
    EXPECT_EQ(response.status, 200);
    return response.body;
  }
  std::unique_ptr<ServedModel> model_;
  std::unique_ptr<GrpcServer> server_;
};

TEST_F(MetricsTest, RequestsAppearInHistogramsAndCountersByCodeAndReason) {
  Client client(server_->port());
  for (int i = 0; i < 2; ++i) {
    StreamResult r = client.Generate(GreedyIds(testing::Tokens(40, 3, 1024), 4));
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  }
  v1::GenerateRequest bad = GreedyIds({5, 6}, 4);
  bad.mutable_sampling()->set_top_p(1.5f);
  EXPECT_EQ(client.Generate(bad).status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  {
    // Dies by its deadline mid-stream: 30,000 tokens take 10 s on an idle 2-core machine.
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
    auto reader = client.stub().Generate(&context, GreedyIds({5, 6, 7}, 30000));
    EXPECT_EQ(testing::ReadStream(*reader).status.error_code(),
              grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  ASSERT_TRUE(Eventually([&] {
    return Sample(Scrape(), "tandem_requests_total", {"code=\"DEADLINE_EXCEEDED\""}) == 1;
  }));
  const std::string text = Scrape();
  EXPECT_EQ(Sample(text, "tandem_requests_total", {"rpc=\"Generate\"", "code=\"OK\""}), 2);
  EXPECT_EQ(Sample(text, "tandem_requests_total", {"code=\"INVALID_ARGUMENT\""}), 1);
  EXPECT_EQ(Sample(text, "tandem_requests_finished_total", {"reason=\"length\""}), 2);
  EXPECT_EQ(Sample(text, "tandem_time_to_first_token_seconds_count"), 2);
  EXPECT_EQ(Sample(text, "tandem_time_to_first_token_seconds_bucket", {"le=\"+Inf\""}), 2);
  EXPECT_GT(Sample(text, "tandem_time_to_first_token_seconds_sum"), 0);
  EXPECT_EQ(Sample(text, "tandem_e2e_request_latency_seconds_count"), 2);
  EXPECT_EQ(Sample(text, "tandem_queue_time_seconds_count"), 2);
  // 4 tokens each: 3 gaps each (the deadline-cut stream's gaps count too, so at least 6).
  EXPECT_GE(Sample(text, "tandem_inter_token_latency_seconds_count"), 6);
  EXPECT_NE(text.find("# TYPE tandem_time_to_first_token_seconds histogram"), std::string::npos);
  EXPECT_NE(text.find("# HELP tandem_token_hit_rate "), std::string::npos);
}

// Choices of one 128-token prompt decode beside each other over its pages: Hydragen attends them
// once per step for all four (4 × 112 shared tokens pass the 256 threshold).
TEST_F(MetricsTest, SharedPrefixDecodesCountHydragenNodes) {
  Client client(server_->port());
  EXPECT_EQ(Sample(Scrape(), "tandem_hydragen_nodes_total"), 0);
  v1::GenerateRequest request = GreedyIds(testing::Tokens(128, 9, 1024), 6);
  request.mutable_sampling()->set_n(4);
  ASSERT_TRUE(client.Generate(request).status.ok());
  EXPECT_TRUE(Eventually([&] { return Sample(Scrape(), "tandem_hydragen_nodes_total") > 0; }));
}

TEST_F(MetricsTest, EngineCountersAndGaugesAgreeWithServerInfo) {
  Client client(server_->port());
  // Three prompts sharing a prefix: the third restores it from the cache.
  for (uint32_t i = 0; i < 3; ++i) {
    std::vector<int32_t> prompt = testing::Tokens(64, 5, 1024);
    const std::vector<int32_t> suffix = testing::Tokens(16, 200 + i, 1024);
    prompt.insert(prompt.end(), suffix.begin(), suffix.end());
    ASSERT_TRUE(client.Generate(GreedyIds(prompt, 3)).status.ok());
  }
  // The stream slot and the engine's batch are released just after the client's last message.
  ASSERT_TRUE(Eventually([&] {
    const std::string text = Scrape();
    return Sample(text, "tandem_requests_running") == 0 &&
           Sample(text, "tandem_streams_active") == 0;
  }));
  const v1::ServerInfo info = client.ServerInfo();
  const std::string text = Scrape();
  EXPECT_EQ(Sample(text, "tandem_prompt_tokens_total"), info.prompt_tokens());
  EXPECT_EQ(Sample(text, "tandem_cached_tokens_total"), info.cached_tokens());
  EXPECT_GT(info.cached_tokens(), 0);
  EXPECT_EQ(Sample(text, "tandem_generation_tokens_total"), info.generated_tokens());
  EXPECT_DOUBLE_EQ(Sample(text, "tandem_token_hit_rate"), info.token_hit_rate());
  EXPECT_EQ(Sample(text, "tandem_requests_waiting"), 0);
  // Idle, only the prefix cache holds pool memory, and its pages count as free.
  EXPECT_GT(Sample(text, "tandem_cache_bytes"), 0);
  EXPECT_EQ(Sample(text, "tandem_memory_usage_ratio"), 0);
  EXPECT_EQ(Sample(text, "tandem_cache_evictions_total"), info.evictions());
  EXPECT_GT(Sample(text, "tandem_engine_steps_total"), 0);
  EXPECT_EQ(Sample(text, "tandem_gpu_graph_replays_total"), 0);  // the CPU launches nothing
  EXPECT_EQ(Sample(text, "tandem_gpu_graph_captures_total"), 0);
  EXPECT_EQ(Sample(text, "tandem_migrations_total"), info.migrations());
  EXPECT_EQ(Sample(text, "tandem_alpha_tunings_total"), info.alpha_tunings());
  EXPECT_DOUBLE_EQ(Sample(text, "tandem_cache_alpha"), info.alpha());
  for (const v1::PoolInfo& pool : info.pools()) {
    const std::string label = "pool=\"" + pool.name() + "\"";
    EXPECT_EQ(Sample(text, "tandem_pool_capacity_bytes", {label}),
              pool.capacity_units() * pool.unit_bytes())
        << pool.name();
    EXPECT_EQ(Sample(text, "tandem_pool_used_bytes", {label}),
              pool.used_units() * pool.unit_bytes())
        << pool.name();
    EXPECT_EQ(Sample(text, "tandem_oom_events_total", {label}), pool.oom_events()) << pool.name();
  }
  EXPECT_EQ(Sample(text, "tandem_memory_budget_bytes"), info.memory_budget_bytes());
}

TEST_F(MetricsTest, OnlyGetAndHeadOfMetricsAreServed) {
  EXPECT_EQ(HttpGet(server_->metrics_port(), "/metrics?x=1").status, 200);
  EXPECT_EQ(HttpGet(server_->metrics_port(), "/").status, 404);
  EXPECT_EQ(HttpGet(server_->metrics_port(), "/../etc/passwd").status, 404);
}

TEST(MetricsEndpointTest, ABusyPortIsAnErrorNamingTheAddress) {
  std::unique_ptr<ServedModel> model = testing::LoadServedFixture();
  ASSERT_NE(model, nullptr);
  absl::StatusOr<std::unique_ptr<GrpcServer>> first =
      GrpcServer::Start(*model, testing::SmallServerConfig());
  ASSERT_TRUE(first.ok()) << first.status();
  ServerConfig config = testing::SmallServerConfig();
  config.metrics.port = (*first)->metrics_port();
  absl::StatusOr<std::unique_ptr<GrpcServer>> second = GrpcServer::Start(*model, config);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find(absl::StrCat("127.0.0.1:", config.metrics.port)),
            std::string::npos)
      << second.status();

  config.metrics.enabled = false;
  absl::StatusOr<std::unique_ptr<GrpcServer>> without = GrpcServer::Start(*model, config);
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_EQ((*without)->metrics_port(), 0);
}

TEST(MetricsEndpointTest, TlsAndTokensGuardTheScrape) {
  std::unique_ptr<ServedModel> model = testing::LoadServedFixture();
  ASSERT_NE(model, nullptr);
  ServerConfig config = testing::SmallServerConfig();
  config.metrics.tls_cert_file = testing::Fixture("tls/server.crt");
  config.metrics.tls_key_file = testing::Fixture("tls/server.key");
  absl::StatusOr<BearerTokens> tokens = BearerTokens::Parse("prometheus:scrape-secret\n", "t");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  config.metrics.tokens = *tokens;
  absl::StatusOr<std::unique_ptr<GrpcServer>> server = GrpcServer::Start(*model, config);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->metrics_port();
  const std::string ca = testing::Fixture("tls/server.crt");

  testing::HttpResponse no_token = testing::HttpsGet(port, "/metrics", ca);
  EXPECT_EQ(no_token.status, 401);
  EXPECT_NE(no_token.head.find("WWW-Authenticate: Bearer"), std::string::npos) << no_token.head;
  EXPECT_EQ(testing::HttpsGet(port, "/metrics", ca, "Authorization: Bearer wrong\r\n").status, 401);
  testing::HttpResponse scraped =
      testing::HttpsGet(port, "/metrics", ca, "Authorization: Bearer scrape-secret\r\n");
  EXPECT_EQ(scraped.status, 200);
  EXPECT_NE(scraped.body.find("tandem_requests_running"), std::string::npos);
  // Plaintext is not served at all.
  EXPECT_EQ(HttpGet(port, "/metrics", "Authorization: Bearer scrape-secret\r\n").status, 0);

  // Half a TLS pair, or a wrong file, is an error at start naming the file.
  config.metrics.tls_key_file = testing::Fixture("tls/README.md");
  absl::StatusOr<std::unique_ptr<GrpcServer>> bad = GrpcServer::Start(*model, config);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("README.md"), std::string::npos) << bad.status();
}

}  // namespace
}  // namespace tandem::server
