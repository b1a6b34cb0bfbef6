// The client library against fake in-process servers (no engine): the bearer token reaches the
// server on plaintext and TLS channels, TLS verifies the server against the given CA and name,
// and StreamCall delivers a stream's messages in order and then its status.
#include "server/client/connection.h"

#include <chrono>
#include <condition_variable>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/client/status_names.h"
#include "server/client/stream_call.h"
#include "tandem/v1/tandem.grpc.pb.h"

namespace tandem::client {
namespace {

const std::string kCert = std::string(TANDEM_TEST_DATA) + "/tls/server.crt";
const std::string kKey = std::string(TANDEM_TEST_DATA) + "/tls/server.key";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Remembers the authorization header of the last call; streams three chunks and a Complete.
class FakeTandem final : public v1::Tandem::Service {
 public:
  grpc::Status GetModelInfo(grpc::ServerContext* context, const v1::GetModelInfoRequest*,
                            v1::ModelInfo* info) override {
    Record(*context);
    info->set_model_path("fake");
    return grpc::Status::OK;
  }

  grpc::Status Generate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                        grpc::ServerWriter<v1::GenerateResponse>* writer) override {
    Record(*context);
    for (int i = 0; i < 3; ++i) {
      v1::GenerateResponse chunk;
      chunk.mutable_chunk()->add_token_ids(request->token_ids().ids(0) + i);
      chunk.mutable_chunk()->set_text(std::to_string(i));
      writer->Write(chunk);
    }
    v1::GenerateResponse complete;
    complete.mutable_complete()->set_finish_reason(v1::LENGTH);
    writer->Write(complete);
    return grpc::Status::OK;
  }

  std::string last_authorization() { return last_header("authorization"); }

  // The value of a header of the last call, or "<none>".
  std::string last_header(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = last_headers_.find(name);
    return it == last_headers_.end() ? "<none>" : it->second;
  }

 private:
  void Record(const grpc::ServerContext& context) {
    std::lock_guard<std::mutex> lock(mu_);
    last_headers_.clear();
    for (const auto& [name, value] : context.client_metadata()) {
      last_headers_[std::string(name.data(), name.size())] =
          std::string(value.data(), value.size());
    }
  }

  std::mutex mu_;
  std::map<std::string, std::string> last_headers_;
};

class FakeServer {
 public:
  explicit FakeServer(bool tls) {
    std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
    if (tls) {
      grpc::SslServerCredentialsOptions options;
      options.pem_key_cert_pairs.push_back({ReadFile(kKey), ReadFile(kCert)});
      credentials = grpc::SslServerCredentials(options);
    }
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", credentials, &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
  }
  ~FakeServer() { server_->Shutdown(); }

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  FakeTandem& service() { return service_; }

 private:
  FakeTandem service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

ClientSecurity Security(std::string ca_file, std::string server_name, std::string token) {
  ClientSecurity security;
  security.tls_ca_file = std::move(ca_file);
  security.tls_server_name_override = std::move(server_name);
  security.bearer_token = std::move(token);
  return security;
}

grpc::Status CallModelInfo(const Connection& connection) {
  auto context = connection.NewContext(std::chrono::seconds(20));
  v1::ModelInfo info;
  return connection.stub().GetModelInfo(context.get(), {}, &info);
}

TEST(ConnectionTest, PlaintextWithoutTokenSendsNoAuthorization) {
  FakeServer server(false);
  auto connection = Connection::Open(server.address(), {});
  ASSERT_TRUE(connection.ok()) << connection.status();
  EXPECT_FALSE((*connection)->tls());
  const grpc::Status status = CallModelInfo(**connection);
  ASSERT_TRUE(status.ok()) << DescribeStatus(status);
  EXPECT_EQ(server.service().last_authorization(), "<none>");
}

TEST(ConnectionTest, PlaintextChannelCarriesTheTokenInEachCallsMetadata) {
  FakeServer server(false);
  auto connection = Connection::Open(server.address(), Security("", "", "s3cret"));
  ASSERT_TRUE(connection.ok()) << connection.status();
  for (int i = 0; i < 2; ++i) {
    const grpc::Status status = CallModelInfo(**connection);
    ASSERT_TRUE(status.ok()) << DescribeStatus(status);
    EXPECT_EQ(server.service().last_authorization(), "Bearer s3cret");
  }
}

TEST(ConnectionTest, TlsChannelVerifiesTheServerAndCarriesTheToken) {
  FakeServer server(true);
  auto connection = Connection::Open(server.address(), Security(kCert, "", "s3cret"));
  ASSERT_TRUE(connection.ok()) << connection.status();
  EXPECT_TRUE((*connection)->tls());
  const grpc::Status status = CallModelInfo(**connection);
  ASSERT_TRUE(status.ok()) << DescribeStatus(status);
  EXPECT_EQ(server.service().last_authorization(), "Bearer s3cret");
}

TEST(ConnectionTest, TlsChecksTheServerNameOverride) {
  FakeServer server(true);
  // The certificate names localhost and 127.0.0.1.
  auto good = Connection::Open(server.address(), Security(kCert, "localhost", ""));
  ASSERT_TRUE(good.ok());
  EXPECT_TRUE(CallModelInfo(**good).ok());
  auto wrong = Connection::Open(server.address(), Security(kCert, "other.example", ""));
  ASSERT_TRUE(wrong.ok());
  EXPECT_EQ(CallModelInfo(**wrong).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST(ConnectionTest, TlsClientDoesNotTalkToAPlaintextServer) {
  FakeServer server(false);
  auto connection = Connection::Open(server.address(), Security(kCert, "", ""));
  ASSERT_TRUE(connection.ok());
  EXPECT_EQ(CallModelInfo(**connection).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST(ConnectionTest, UnreadableCaFileIsAnErrorNamingIt) {
  auto connection = Connection::Open("127.0.0.1:1", Security("/nonexistent/ca.pem", "", ""));
  ASSERT_FALSE(connection.ok());
  EXPECT_NE(connection.status().message().find("/nonexistent/ca.pem"), std::string::npos);
  EXPECT_FALSE(Connection::Open("", {}).ok());
}

// Collects a StreamCall's callbacks and waits for its end.
struct StreamOutcome {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<v1::GenerateResponse> responses;
  bool done = false;
  grpc::Status status;

  StreamCall::Handlers Handlers() {
    return {[this](const v1::GenerateResponse& r) {
              std::lock_guard<std::mutex> lock(mu);
              responses.push_back(r);
            },
            [this](const grpc::Status& s) {
              std::lock_guard<std::mutex> lock(mu);
              status = s;
              done = true;
              cv.notify_all();
            }};
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [this] { return done; });
  }
};

// One Generate call of prompt [10] to `server` with token "t", run to its end.
void GenerateToTheEnd(FakeServer& server, StreamOutcome& outcome,
                      StreamCall::Metadata metadata = {}) {
  auto connection = Connection::Open(server.address(), Security("", "", "t"));
  ASSERT_TRUE(connection.ok());
  v1::GenerateRequest request;
  request.mutable_token_ids()->add_ids(10);
  StreamCall::StartGenerate(**connection, request, std::chrono::seconds(20), outcome.Handlers(),
                            std::move(metadata));
  outcome.Wait();
}

TEST(StreamCallTest, DeliversEveryMessageInOrderThenTheStatus) {
  FakeServer server(false);
  StreamOutcome outcome;
  GenerateToTheEnd(server, outcome);
  ASSERT_TRUE(outcome.status.ok()) << DescribeStatus(outcome.status);
  ASSERT_EQ(outcome.responses.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(outcome.responses[i].chunk().token_ids(0), 10 + i);
    EXPECT_EQ(outcome.responses[i].chunk().text(), std::to_string(i));
  }
  EXPECT_TRUE(outcome.responses[3].has_complete());
  EXPECT_EQ(server.service().last_authorization(), "Bearer t");
  EXPECT_EQ(server.service().last_header("x-session-id"), "<none>");
}

TEST(StreamCallTest, ExtraMetadataTravelsWithTheCall) {
  FakeServer server(false);
  StreamOutcome outcome;
  GenerateToTheEnd(server, outcome, {{"x-session-id", "42"}});
  ASSERT_TRUE(outcome.status.ok()) << DescribeStatus(outcome.status);
  EXPECT_EQ(server.service().last_header("x-session-id"), "42");
  EXPECT_EQ(server.service().last_authorization(), "Bearer t");  // the connection's own header
}

TEST(StreamCallTest, AFailedCallEndsWithItsStatus) {
  StreamOutcome outcome;
  auto connection = Connection::Open("127.0.0.1:1", {});
  ASSERT_TRUE(connection.ok());
  StreamCall::StartChat(**connection, v1::ChatRequest(), std::chrono::seconds(20),
                        outcome.Handlers());
  outcome.Wait();
  EXPECT_EQ(outcome.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(outcome.responses.empty());
}

TEST(StatusNamesTest, CanonicalNames) {
  EXPECT_EQ(StatusCodeName(grpc::StatusCode::OK), "OK");
  EXPECT_EQ(StatusCodeName(grpc::StatusCode::RESOURCE_EXHAUSTED), "RESOURCE_EXHAUSTED");
  EXPECT_EQ(StatusCodeName(grpc::StatusCode::UNAUTHENTICATED), "UNAUTHENTICATED");
  EXPECT_EQ(StatusCodeName(99), "CODE_99");
  EXPECT_EQ(DescribeStatus(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "prompt: empty")),
            "INVALID_ARGUMENT: prompt: empty");
  EXPECT_EQ(DescribeStatus(grpc::Status::OK), "OK");
}

}  // namespace
}  // namespace tandem::client
