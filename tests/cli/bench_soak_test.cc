// Soak: `tandem bench` keeps 256 streams open (the server's default --max-streams) against a
// real `tandem serve` for 30 seconds. Every request must succeed, the server's resident memory
// must stay under a bound while it runs, and afterwards the server must be idle again with its
// memory pools back at their starting use.
//
// Short answers (4 tokens) so that requests keep finishing and starting instead of forming one
// long queue. The cache policy is `none`: with a prefix cache, finished requests legitimately
// leave state in the pools, and the baseline check could not tell that from a leak.
#include <atomic>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/client/connection.h"
#include "tests/cli/run_tandem.h"
#include "tests/cli/serve_process.h"

namespace tandem {
namespace {

using testing::RunTandem;
using testing::ServeProcess;
using testing::TestData;

constexpr int kStreams = 256;
constexpr double kMemoryGiB = 0.25;
// The bound on the server's resident memory: what it uses idle, the whole pool budget
// (committed on demand), and room for 256 streams' buffers and the allocator's (or, under ASan,
// the quarantine's) slack.
constexpr int64_t kRssHeadroomBytes = int64_t{768} << 20;

// VmRSS of `pid` in bytes; 0 when it cannot be read.
int64_t ResidentBytes(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // in kB
  }
  return 0;
}

v1::ServerInfo ServerInfo(const client::Connection& connection) {
  v1::ServerInfo info;
  auto context = connection.NewContext(std::chrono::seconds(30));
  const grpc::Status status = connection.stub().GetServerInfo(context.get(), {}, &info);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return info;
}

int64_t UsedUnits(const v1::ServerInfo& info, const std::string& pool) {
  for (const v1::PoolInfo& p : info.pools()) {
    if (p.name() == pool) return p.used_units();
  }
  ADD_FAILURE() << "no pool " << pool;
  return -1;
}

TEST(BenchSoakTest, TwoHundredFiftySixStreamsForThirtySeconds) {
  ServeProcess server({"--model", TestData("models/zamba2-tiny"), "--threads", "2", "--memory-gib",
                       std::to_string(kMemoryGiB), "--cache-policy", "none"});
  ASSERT_TRUE(server.ok()) << "tandem serve did not start";
  auto connection = client::Connection::Open(server.address(), {});
  ASSERT_TRUE(connection.ok());
  const v1::ServerInfo before = ServerInfo(**connection);
  ASSERT_EQ(before.pools_size(), 2);
  const int64_t idle_rss = ResidentBytes(server.pid());
  ASSERT_GT(idle_rss, 0);

  std::atomic<bool> running{true};
  std::atomic<int64_t> peak_rss{idle_rss};
  std::thread sampler([&] {
    while (running) {
      peak_rss = std::max<int64_t>(peak_rss, ResidentBytes(server.pid()));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  const auto o = RunTandem("bench --address " + server.address() + " --json --concurrency " +
                           std::to_string(kStreams) +
                           " --duration 30 --turns 2 --system-tokens 32 --user-tokens 16"
                           " --max-new-tokens 4");
  running = false;
  sampler.join();

  ASSERT_EQ(o.exit_code, 0) << o.err;
  const nlohmann::json r = nlohmann::json::parse(o.out);
  EXPECT_EQ(r["errors"], 0) << r.dump();
  EXPECT_EQ(r["max_in_flight"], kStreams);
  // Streams ended and new ones took their slots.
  EXPECT_GT(r["ok"].get<int64_t>(), kStreams) << r.dump();
  EXPECT_EQ(r["ok"].get<int64_t>(), r["requests"].get<int64_t>());

  const int64_t bound =
      idle_rss + static_cast<int64_t>(kMemoryGiB * (int64_t{1} << 30)) + kRssHeadroomBytes;
  EXPECT_LT(peak_rss.load(), bound)
      << "idle " << (idle_rss >> 20) << " MiB, peak " << (peak_rss.load() >> 20) << " MiB";
  std::fprintf(stderr, "server VmRSS: idle %lld MiB, peak %lld MiB (bound %lld MiB)\n",
               static_cast<long long>(idle_rss >> 20), static_cast<long long>(peak_rss >> 20),
               static_cast<long long>(bound >> 20));

  // The server drops each finished stream a moment after the client saw it end.
  v1::ServerInfo after;
  for (int i = 0; i < 600; ++i) {
    after = ServerInfo(**connection);
    if (after.active_streams() == 0 && after.running_requests() == 0 &&
        after.waiting_requests() == 0) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(after.active_streams(), 0);
  EXPECT_EQ(after.running_requests(), 0);
  EXPECT_EQ(after.waiting_requests(), 0);
  EXPECT_EQ(after.failed_requests(), before.failed_requests());
  EXPECT_EQ(after.finished_requests() - before.finished_requests(), r["ok"].get<int64_t>());
  for (const char* pool : {"kv_page", "ssm_block"}) {
    EXPECT_EQ(UsedUnits(after, pool), UsedUnits(before, pool)) << pool;
  }
}

}  // namespace
}  // namespace tandem
