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

  std::unique_ptr<ServedModel> model_;
  std::unique_ptr<GrpcServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(CallerScopeTest, RequestIdsBelongToTheirCaller) {
  // Alice starts a long request under a name of her choosing.
  auto stub = v1::Tandem::NewStub(channel_);
  grpc::ClientContext alice_context;
  alice_context.AddMetadata("authorization", "Bearer alice-secret");
  alice_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  v1::GenerateRequest long_request = GreedyIds({5, 6, 7}, 4000);
  long_request.set_request_id("job-1");
  auto alice_reader = stub->Generate(&alice_context, long_request);
  v1::GenerateResponse first;
  ASSERT_TRUE(alice_reader->Read(&first));  // live: it has produced a chunk

  // Bob can neither abort it nor learn that the id is taken: his own job-1 runs alongside.
  EXPECT_FALSE(Abort("bob-secret", "job-1"));
  grpc::ClientContext bob_context;
  bob_context.AddMetadata("authorization", "Bearer bob-secret");
  bob_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::GenerateRequest short_request = GreedyIds({5, 6, 7}, 3);
  short_request.set_request_id("job-1");
  auto bob_reader = stub->Generate(&bob_context, short_request);
  StreamResult bob = ReadStream(*bob_reader);
  ASSERT_TRUE(bob.status.ok()) << bob.status.error_message();
  EXPECT_EQ(bob.request_id, "job-1");
  EXPECT_EQ(bob.tokens.size(), 3u);

  // Alice's own Abort finds it, and the stream ends as aborted.
  EXPECT_TRUE(Abort("alice-secret", "job-1"));
  StreamResult alice = ReadStream(*alice_reader);
  ASSERT_TRUE(alice.status.ok()) << alice.status.error_message();
  ASSERT_TRUE(alice.has_complete);
  EXPECT_EQ(alice.complete.finish_reason(), v1::ABORTED);
  EXPECT_LT(alice.tokens.size() + 1, 4000u);
}

TEST_F(CallerScopeTest, AnotherCallersLiveIdCanBeReusedButNotTwiceByOneCaller) {
  auto stub = v1::Tandem::NewStub(channel_);
  grpc::ClientContext first_context;
  first_context.AddMetadata("authorization", "Bearer alice-secret");
  first_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  v1::GenerateRequest long_request = GreedyIds({5, 6, 7}, 4000);
  long_request.set_request_id("same");
  auto first = stub->Generate(&first_context, long_request);
  v1::GenerateResponse chunk;
  ASSERT_TRUE(first->Read(&chunk));

  grpc::ClientContext again_context;
  again_context.AddMetadata("authorization", "Bearer alice-secret");
  again_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::GenerateRequest again = GreedyIds({5, 6, 7}, 3);
  again.set_request_id("same");
  auto second = stub->Generate(&again_context, again);
  StreamResult refused = ReadStream(*second);
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_TRUE(Abort("alice-secret", "same"));
  ReadStream(*first);
}

TEST_F(CallerScopeTest, MalformedRequestsAreUnauthenticatedWithoutATokenAndInvalidWithOne) {
  const std::string garbage("\xff\xff\xff\xff\x0f", 5);  // a truncated varint key: not protobuf
  for (const std::string method : {"/tandem.v1.Tandem/Tokenize", "/tandem.v1.Tandem/Generate",
                                   "/tandem.v1.Tandem/Chat", "/tandem.v1.Tandem/Abort"}) {
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
