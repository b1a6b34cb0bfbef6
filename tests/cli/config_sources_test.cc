// Settings from the environment and a config file fill what the command line left out, in that
// order of precedence, and every bad entry is an error naming its variable or file:line.
#include "server/cli/config_sources.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tandem::cli {
namespace {

const std::vector<FlagSpec>& Specs() {
  static const std::vector<FlagSpec> specs = {{"config", true, ""},      {"port", true, ""},
                                              {"memory-gib", true, ""},  {"host", true, ""},
                                              {"no-metrics", false, ""}, {"help", false, ""}};
  return specs;
}

EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

class ConfigSourcesTest : public ::testing::Test {
 protected:
  std::string WriteConfig(const std::string& text) {
    path_ = std::filesystem::temp_directory_path() /
            ("tandem_config_" + std::to_string(getpid()) + ".conf");
    std::ofstream(path_) << text;
    return path_.string();
  }
  void TearDown() override {
    if (!path_.empty()) std::filesystem::remove(path_);
  }
  absl::StatusOr<Args> Parse(std::vector<std::string> argv, const EnvLookup& env) {
    argv.insert(argv.begin(), "serve");
    std::vector<char*> raw;
    for (std::string& a : argv) raw.push_back(a.data());
    absl::StatusOr<Args> args = Args::Parse(static_cast<int>(raw.size()), raw.data(), Specs());
    if (!args.ok()) return args;
    if (absl::Status s = FillFromEnvironmentAndFile(Specs(), env, &*args); !s.ok()) return s;
    return args;
  }
  std::filesystem::path path_;
};

TEST_F(ConfigSourcesTest, CommandLineBeatsEnvironmentBeatsFile) {
  const std::string file = WriteConfig(
      "# settings\n"
      "port = 7000\n"
      "memory-gib = 2   # trailing comment\n"
      "host = \"0.0.0.0\"\n"
      "--no-metrics = true\n");
  absl::StatusOr<Args> args = Parse({"--config", file, "--port", "9000"},
                                    FakeEnv({{"TANDEM_PORT", "8000"}, {"TANDEM_MEMORY_GIB", "3"}}));
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(args->String("port"), "9000");
  EXPECT_EQ(args->Source("port"), "--port");
  EXPECT_EQ(args->String("memory-gib"), "3");
  EXPECT_EQ(args->Source("memory-gib"), "TANDEM_MEMORY_GIB");
  EXPECT_EQ(args->String("host"), "0.0.0.0");
  EXPECT_EQ(args->Source("host"), file + ":4");
  EXPECT_TRUE(args->Has("no-metrics"));
}

TEST_F(ConfigSourcesTest, ConfigFileMayComeFromTheEnvironment) {
  const std::string file = WriteConfig("port = 7000\n");
  absl::StatusOr<Args> args = Parse({}, FakeEnv({{"TANDEM_CONFIG", file}}));
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(args->String("port"), "7000");
}

TEST_F(ConfigSourcesTest, BooleansFromTheEnvironment) {
  absl::StatusOr<Args> off = Parse({}, FakeEnv({{"TANDEM_NO_METRICS", "false"}}));
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->Has("no-metrics"));
  absl::StatusOr<Args> on = Parse({}, FakeEnv({{"TANDEM_NO_METRICS", "1"}}));
  ASSERT_TRUE(on.ok());
  EXPECT_TRUE(on->Has("no-metrics"));
  absl::StatusOr<Args> bad = Parse({}, FakeEnv({{"TANDEM_NO_METRICS", "maybe"}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("TANDEM_NO_METRICS"), std::string::npos);
}

TEST_F(ConfigSourcesTest, BadEntriesNameTheirSource) {
  struct Case {
    std::string text;
    std::string expected;
  };
  for (const Case& c : std::vector<Case>{
           {"port 7000\n", ":1: expected 'flag = value'"},
           {"\n\ncolour = red\n", ":3: unknown setting 'colour'"},
           {"port = 1\nport = 2\n", ":2: 'port' set twice"},
           {"host = \"open\n", ":1: unterminated quoted value"},
           {"config = other.conf\n", ":1: unknown setting 'config'"},
       }) {
    const std::string file = WriteConfig(c.text);
    absl::StatusOr<Args> args = Parse({"--config", file}, FakeEnv({}));
    ASSERT_FALSE(args.ok()) << c.text;
    EXPECT_NE(args.status().message().find(file + c.expected), std::string::npos) << args.status();
  }
  absl::StatusOr<Args> missing = Parse({"--config", "/nonexistent.conf"}, FakeEnv({}));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent.conf"), std::string::npos);

  // What is not a small regular file is refused by name, not read without end (a device) or
  // silently taken as empty (a directory).
  for (const auto& [path, why] : std::vector<std::pair<std::string, std::string>>{
           {"/dev/zero", "is a character device"},
           {std::filesystem::temp_directory_path().string(), "is a directory"}}) {
    absl::StatusOr<Args> refused = Parse({"--config", path}, FakeEnv({}));
    ASSERT_FALSE(refused.ok()) << path;
    EXPECT_NE(refused.status().message().find("'" + path + "': " + why), std::string::npos)
        << refused.status();
  }
  const std::string huge = WriteConfig(std::string(2 << 20, '#'));
  absl::StatusOr<Args> too_big = Parse({"--config", huge}, FakeEnv({}));
  ASSERT_FALSE(too_big.ok());
  EXPECT_NE(too_big.status().message().find("more than the limit"), std::string::npos)
      << too_big.status();

  // A malformed number from the environment names the variable when it is read.
  absl::StatusOr<Args> env = Parse({}, FakeEnv({{"TANDEM_PORT", "eighty"}}));
  ASSERT_TRUE(env.ok());
  absl::StatusOr<std::optional<int64_t>> port = env->Int("port");
  ASSERT_FALSE(port.ok());
  EXPECT_NE(port.status().message().find("TANDEM_PORT: 'eighty'"), std::string::npos)
      << port.status();
}

TEST(EnvironmentNameTest, UpperCaseWithUnderscores) {
  EXPECT_EQ(EnvironmentName("memory-gib"), "TANDEM_MEMORY_GIB");
  EXPECT_EQ(EnvironmentName("port"), "TANDEM_PORT");
}

}  // namespace
}  // namespace tandem::cli
