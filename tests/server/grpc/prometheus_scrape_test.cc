// A real Prometheus (Debian's package) scrapes a real server on loopback, and PromQL queries
// return the time-to-first-token histogram and the token hit rate: what a Grafana dashboard
// of tandem would ask.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/server/grpc/grpc_test_util.h"
#include "tests/server/http_test_client.h"

namespace tandem::server {
namespace {

using testing::Client;
using testing::GreedyIds;

constexpr const char* kPrometheus = "/usr/bin/prometheus";

std::string UrlEncode(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '_' || c == '.' || c == '-' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppend(&out, "%", absl::Hex(c, absl::kZeroPad2));
    }
  }
  return out;
}

// Prometheus on loopback with its own storage under a temporary directory, scraping one target
// every second.
class PrometheusProcess {
 public:
  PrometheusProcess(int target_port) {
    dir_ = std::filesystem::temp_directory_path() / absl::StrCat("tandem_prom_", getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ / "data");
    const std::string config = (dir_ / "prometheus.yml").string();
    std::ofstream(config) << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                          << "scrape_configs:\n  - job_name: tandem\n    static_configs:\n"
                          << "      - targets: ['127.0.0.1:" << target_port << "']\n";
    port_ = testing::FreePort();
    std::vector<std::string> args = {
        kPrometheus, "--config.file=" + config, "--storage.tsdb.path=" + (dir_ / "data").string(),
        absl::StrCat("--web.listen-address=127.0.0.1:", port_), "--log.level=warn"};
    const std::string log = (dir_ / "prometheus.log").string();
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      FILE* out = freopen(log.c_str(), "w", stderr);
      (void)out;
      execv(kPrometheus, argv.data());
      _exit(127);
    }
  }
  ~PrometheusProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  std::string Log() const {
    std::ifstream in(dir_ / "prometheus.log");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  // The `result` array of an instant query; empty until Prometheus has the data.
  nlohmann::json Query(const std::string& promql) const {
    testing::HttpResponse response =
        testing::HttpGet(port_, "/api/v1/query?query=" + UrlEncode(promql));
    if (response.status != 200) return nlohmann::json::array();
    nlohmann::json body = nlohmann::json::parse(response.body, nullptr, false);
    if (body.is_discarded() || body.value("status", "") != "success")
      return nlohmann::json::array();
    return body["data"]["result"];
  }

 private:
  std::filesystem::path dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

double ValueOf(const nlohmann::json& sample) {
  return std::stod(sample["value"][1].get<std::string>());
}

TEST(PrometheusScrapeTest, PromQlReturnsTheTtftHistogramAndTheHitRate) {
  ASSERT_TRUE(std::filesystem::exists(kPrometheus))
      << "Debian's prometheus package is a test dependency (scripts/setup.sh installs it)";
  std::unique_ptr<ServedModel> model = testing::LoadServedFixture();
  ASSERT_NE(model, nullptr);
  absl::StatusOr<std::unique_ptr<GrpcServer>> server =
      GrpcServer::Start(*model, testing::SmallServerConfig());
  ASSERT_TRUE(server.ok()) << server.status();

  // Three requests sharing a 64-token prefix: the second's prefill checkpoints the branch
  // point, and the third restores it from the cache.
  Client client((*server)->port());
  for (uint32_t i = 0; i < 3; ++i) {
    std::vector<int32_t> prompt = testing::Tokens(64, 9, 1024);
    const std::vector<int32_t> suffix = testing::Tokens(16, 100 + i, 1024);
    prompt.insert(prompt.end(), suffix.begin(), suffix.end());
    ASSERT_TRUE(client.Generate(GreedyIds(prompt, 4)).status.ok());
  }
  const double hit_rate = client.ServerInfo().token_hit_rate();
  ASSERT_GT(hit_rate, 0);

  PrometheusProcess prometheus((*server)->metrics_port());
  nlohmann::json buckets;
  const bool scraped = testing::Eventually([&] {
    buckets = prometheus.Query("tandem_time_to_first_token_seconds_bucket");
    return buckets.is_array() && !buckets.empty();
  });
  ASSERT_TRUE(scraped) << "Prometheus never returned the TTFT histogram; its log:\n"
                       << prometheus.Log();
  bool saw_inf = false;
  for (const nlohmann::json& sample : buckets) {
    EXPECT_EQ(sample["metric"]["job"], "tandem");
    if (sample["metric"]["le"] == "+Inf") {
      saw_inf = true;
      EXPECT_EQ(ValueOf(sample), 3);
    }
  }
  EXPECT_TRUE(saw_inf);

  const nlohmann::json median = prometheus.Query(
      "histogram_quantile(0.5, sum by (le) (tandem_time_to_first_token_seconds_bucket))");
  ASSERT_EQ(median.size(), 1u) << median.dump();
  EXPECT_GT(ValueOf(median[0]), 0);

  const nlohmann::json rate = prometheus.Query("tandem_token_hit_rate");
  ASSERT_EQ(rate.size(), 1u) << rate.dump();
  EXPECT_NEAR(ValueOf(rate[0]), hit_rate, 1e-9);
}

}  // namespace
}  // namespace tandem::server
