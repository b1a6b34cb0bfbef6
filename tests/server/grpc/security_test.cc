// TLS and the bearer token: a TLS server answers a client that trusts its certificate and no
// plaintext client; with a token, every tandem.v1 call without it (or with a wrong one) gets
// UNAUTHENTICATED and nothing reaches the engine, while health stays open for probes.
#include <fstream>
#include <sstream>
#include <string>

#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/server/grpc/grpc_test_util.h"

namespace tandem::server {
namespace {

using testing::GreedyIds;
using testing::ReadStream;
using testing::StreamResult;

std::string ReadFixture(const std::string& path) {
  std::ifstream in(testing::Fixture(path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::LoadServedFixture();
    ASSERT_NE(model_, nullptr);
  }
  std::unique_ptr<GrpcServer> Start(const SecurityConfig& security) {
    ServerConfig config = testing::SmallServerConfig();
    config.security = security;
    absl::StatusOr<std::unique_ptr<GrpcServer>> server = GrpcServer::Start(*model_, config);
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? *std::move(server) : nullptr;
  }
  std::unique_ptr<ServedModel> model_;
};

std::shared_ptr<grpc::Channel> TlsChannel(int port) {
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = ReadFixture("tls/server.crt");
  return grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::SslCredentials(options));
}

StreamResult GenerateOn(const std::shared_ptr<grpc::Channel>& channel, const std::string& token) {
  auto stub = v1::Tandem::NewStub(channel);
  grpc::ClientContext context;
  if (!token.empty()) context.AddMetadata("authorization", token);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto reader = stub->Generate(&context, GreedyIds({5, 6, 7}, 3));
  return ReadStream(*reader);
}

TEST_F(SecurityTest, TlsServerAnswersATrustingClientAndRefusesPlaintext) {
  SecurityConfig security;
  security.tls_cert_file = testing::Fixture("tls/server.crt");
  security.tls_key_file = testing::Fixture("tls/server.key");
  std::unique_ptr<GrpcServer> server = Start(security);
  ASSERT_NE(server, nullptr);

  StreamResult over_tls = GenerateOn(TlsChannel(server->port()), "");
  ASSERT_TRUE(over_tls.status.ok()) << over_tls.status.error_message();
  EXPECT_EQ(over_tls.tokens.size(), 3u);

  auto plaintext = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server->port()),
                                       grpc::InsecureChannelCredentials());
  auto stub = v1::Tandem::NewStub(plaintext);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::ModelInfo info;
  EXPECT_EQ(stub->GetModelInfo(&context, {}, &info).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(SecurityTest, BadTlsFilesAreErrorsNamingTheFile) {
  ServerConfig config = testing::SmallServerConfig();
  config.security.tls_cert_file = testing::Fixture("tls/server.crt");
  absl::StatusOr<std::unique_ptr<GrpcServer>> half = GrpcServer::Start(*model_, config);
  ASSERT_FALSE(half.ok());
  EXPECT_NE(half.status().message().find("both"), std::string::npos) << half.status();

  config.security.tls_key_file = "/nonexistent/server.key";
  absl::StatusOr<std::unique_ptr<GrpcServer>> missing = GrpcServer::Start(*model_, config);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/server.key"), std::string::npos)
      << missing.status();

  config.security.tls_key_file = testing::Fixture("tls/README.md");
  absl::StatusOr<std::unique_ptr<GrpcServer>> not_pem = GrpcServer::Start(*model_, config);
  ASSERT_FALSE(not_pem.ok());
  EXPECT_NE(not_pem.status().message().find("not a PEM file"), std::string::npos)
      << not_pem.status();
}

TEST_F(SecurityTest, BearerTokenIsRequiredOnEveryTandemCallButNotOnHealth) {
  SecurityConfig security;
  security.tokens = *BearerTokens::Single("s3cret-token");
  std::unique_ptr<GrpcServer> server = Start(security);
  ASSERT_NE(server, nullptr);
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server->port()),
                                     grpc::InsecureChannelCredentials());

  for (const std::string& bad : {std::string(), std::string("Bearer wrong-token"),
                                 std::string("Basic s3cret-token"), std::string("Bearer ")}) {
    StreamResult refused = GenerateOn(channel, bad);
    EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << bad;
    EXPECT_TRUE(refused.tokens.empty());
  }
  StreamResult ok = GenerateOn(channel, "Bearer s3cret-token");
  ASSERT_TRUE(ok.status.ok()) << ok.status.error_message();
  EXPECT_EQ(ok.tokens.size(), 3u);
  EXPECT_TRUE(GenerateOn(channel, "bearer s3cret-token").status.ok());  // scheme is case-blind

  // Unary calls too; refused ones never reached the engine.
  auto stub = v1::Tandem::NewStub(channel);
  {
    grpc::ClientContext context;
    v1::ServerInfo info;
    EXPECT_EQ(stub->GetServerInfo(&context, {}, &info).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext context;
    context.AddMetadata("authorization", "Bearer s3cret-token");
    v1::ServerInfo info;
    ASSERT_TRUE(stub->GetServerInfo(&context, {}, &info).ok());
    EXPECT_EQ(info.submitted_requests(), 1 + 2);  // the warm-up and the two accepted calls
  }
  {
    grpc::ClientContext context;
    v1::TokenizeRequest request;
    request.set_text("hello");
    v1::TokenizeResponse response;
    EXPECT_EQ(stub->Tokenize(&context, request, &response).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext context;
    v1::AbortRequest request;
    request.set_request_id("x");
    v1::AbortResponse response;
    EXPECT_EQ(stub->Abort(&context, request, &response).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  // Kubernetes probes send no token.
  auto health = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckResponse response;
  ASSERT_TRUE(health->Check(&context, {}, &response).ok());
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

}  // namespace
}  // namespace tandem::server
