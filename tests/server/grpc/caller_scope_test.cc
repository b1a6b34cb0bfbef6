// Who a call comes from, and what that lets it touch: with a token file each token names a
// caller and request ids are per caller (another caller's Abort finds nothing, and the same id
// may be live for two callers); a call is authenticated before its request is parsed, so garbage
// without a token hears UNAUTHENTICATED and garbage with one hears INVALID_ARGUMENT naming the
// message type.
#include <future>
#include <string>

#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "server/util/bearer_tokens.h"
#include "tests/server/grpc/grpc_test_util.h"

namespace tandem::server {
namespace {

using testing::GreedyIds;
using testing::ReadStream;
using testing::StreamResult;

constexpr char kTokenFile[] = "# two callers\nalice:alice-secret\nbob:bob-secret\n";

class CallerScopeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::LoadServedFixture();
    ASSERT_NE(model_, nullptr);
    ServerConfig config = testing::SmallServerConfig();
    absl::StatusOr<BearerTokens> tokens = BearerTokens::Parse(kTokenFile, "tokens.txt");
    ASSERT_TRUE(tokens.ok()) << tokens.status();
    config.security.tokens = *std::move(tokens);
    absl::StatusOr<std::unique_ptr<GrpcServer>> server = GrpcServer::Start(*model_, config);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                   grpc::InsecureChannelCredentials());
  }

  bool Abort(const std::string& token, const std::string& request_id) {
    auto stub = v1::Tandem::NewStub(channel_);
    grpc::ClientContext context;
    context.AddMetadata("authorization", "Bearer " + token);
    v1::AbortRequest request;
    request.set_request_id(request_id);
    v1::AbortResponse response;
    const grpc::Status status = stub->Abort(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.aborted();
  }

  // Sends raw bytes as the request of `method` and returns the call's status.
  grpc::Status RawCall(const std::string& method, const std::string& bytes,
                       const std::string& token) {
    grpc::GenericStub stub(channel_);
    grpc::ClientContext context;
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    grpc::Slice slice(bytes);
    grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer response;
    std::promise<grpc::Status> done;
    stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response,
                   [&done](grpc::Status status) { done.set_value(status); });
    return done.get_future().get();
  }

  // A Generate of `caller` under `request_id`, read up to its first chunk (so it is live).
  struct LiveCall {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader;
  };
  std::unique_ptr<LiveCall> StartLong(const std::string& token, const std::string& request_id) {
    auto call = std::make_unique<LiveCall>();
    call->context.AddMetadata("authorization", "Bearer " + token);
    call->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    v1::GenerateRequest request = GreedyIds({5, 6, 7}, 4000);
    request.set_request_id(request_id);
    call->reader = v1::Tandem::NewStub(channel_)->Generate(&call->context, request);
    v1::GenerateResponse first;
    EXPECT_TRUE(call->reader->Read(&first));
    return call;
  }
  // A short Generate of `caller` under `request_id`, read to its end.
  StreamResult RunShort(const std::string& token, const std::string& request_id) {
    grpc::ClientContext context;
    context.AddMetadata("authorization", "Bearer " + token);
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    v1::GenerateRequest request = GreedyIds({5, 6, 7}, 3);
    request.set_request_id(request_id);
    auto reader = v1::Tandem::NewStub(channel_)->Generate(&context, request);
    return ReadStream(*reader);
  }

  std::unique_ptr<ServedModel> model_;
  std::unique_ptr<GrpcServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(CallerScopeTest, RequestIdsBelongToTheirCaller) {
  // Alice starts a long request under a name of her choosing.
  std::unique_ptr<LiveCall> alice_call = StartLong("alice-secret", "job-1");

  // Bob can neither abort it nor learn that the id is taken: his own job-1 runs alongside.
  EXPECT_FALSE(Abort("bob-secret", "job-1"));
  StreamResult bob = RunShort("bob-secret", "job-1");
  ASSERT_TRUE(bob.status.ok()) << bob.status.error_message();
  EXPECT_EQ(bob.request_id, "job-1");
  EXPECT_EQ(bob.tokens.size(), 3u);

  // Alice's own Abort finds it, and the stream ends as aborted.
  EXPECT_TRUE(Abort("alice-secret", "job-1"));
  StreamResult alice = ReadStream(*alice_call->reader);
  ASSERT_TRUE(alice.status.ok()) << alice.status.error_message();
  ASSERT_TRUE(alice.has_complete);
  EXPECT_EQ(alice.complete.finish_reason(), v1::ABORTED);
  EXPECT_LT(alice.tokens.size() + 1, 4000u);
}

TEST_F(CallerScopeTest, OneCallerCannotUseAnIdTwiceAtOnce) {
  std::unique_ptr<LiveCall> first = StartLong("alice-secret", "same");
  StreamResult refused = RunShort("alice-secret", "same");
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_TRUE(Abort("alice-secret", "same"));
  ReadStream(*first->reader);
}

TEST_F(CallerScopeTest, MalformedRequestsAreUnauthenticatedWithoutATokenAndInvalidWithOne) {
  const std::string garbage("\xff\xff\xff\xff\x0f", 5);  // a truncated varint key: not protobuf
  for (const std::string method :
       {"/tandem.v1.Tandem/Tokenize", "/tandem.v1.Tandem/Generate", "/tandem.v1.Tandem/Chat",
        "/tandem.v1.Tandem/Abort", "/tandem.v1.Tandem/PinPrefix",
        "/tandem.v1.Tandem/UnpinPrefix"}) {
    grpc::Status anonymous = RawCall(method, garbage, "");
    EXPECT_EQ(anonymous.error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << method << ": " << anonymous.error_message();
    grpc::Status wrong = RawCall(method, garbage, "not-a-token");
    EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED) << method;

    grpc::Status authenticated = RawCall(method, garbage, "bob-secret");
    EXPECT_EQ(authenticated.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << method << ": " << authenticated.error_message();
    EXPECT_NE(authenticated.error_message().find("is not a valid tandem.v1."), std::string::npos)
        << authenticated.error_message();
  }
  // The server is unharmed: a proper call still works.
  auto stub = v1::Tandem::NewStub(channel_);
  grpc::ClientContext context;
  context.AddMetadata("authorization", "Bearer bob-secret");
  v1::TokenizeRequest request;
  request.set_text("hello");
  v1::TokenizeResponse response;
  ASSERT_TRUE(stub->Tokenize(&context, request, &response).ok());
  EXPECT_GT(response.token_ids_size(), 0);
}

}  // namespace
}  // namespace tandem::server
