// The server as operators and probes see it: grpc.health.v1, reflection, client cancellation
// and deadlines giving the request's memory back, and the drain on shutdown.
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/support/sync_stream.h"
#include "gtest/gtest.h"
#include "tests/server/grpc/grpc_test_util.h"

namespace tandem::server {
namespace {

using testing::Client;
using testing::Eventually;
using testing::GreedyIds;
using testing::LoadServedFixture;
using testing::SmallServerConfig;
using testing::StreamResult;
using testing::Tokens;

grpc::health::v1::HealthCheckResponse::ServingStatus Health(Client& client,
                                                            const std::string& service) {
  auto stub = grpc::health::v1::Health::NewStub(client.channel());
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status = stub->Check(&context, request, &response);
  if (!status.ok()) return grpc::health::v1::HealthCheckResponse::UNKNOWN;
  return response.status();
}

// Asks the reflection service for the list of services. The reflection library registers its
// messages in the generated descriptor pool, so the client uses those very message types
// without a copy of reflection.proto.
std::vector<std::string> ReflectedServices(Client& client) {
  const google::protobuf::DescriptorPool* pool = google::protobuf::DescriptorPool::generated_pool();
  const google::protobuf::Descriptor* request_type =
      pool->FindMessageTypeByName("grpc.reflection.v1alpha.ServerReflectionRequest");
  const google::protobuf::Descriptor* response_type =
      pool->FindMessageTypeByName("grpc.reflection.v1alpha.ServerReflectionResponse");
  EXPECT_NE(request_type, nullptr);
  EXPECT_NE(response_type, nullptr);
  if (request_type == nullptr || response_type == nullptr) return {};
  auto* factory = google::protobuf::MessageFactory::generated_factory();
  std::unique_ptr<google::protobuf::Message> request(factory->GetPrototype(request_type)->New());
  std::unique_ptr<google::protobuf::Message> response(factory->GetPrototype(response_type)->New());
  request->GetReflection()->SetString(request.get(), request_type->FindFieldByName("list_services"),
                                      "");

  grpc::ClientContext context;
  const grpc::internal::RpcMethod method(
      "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
      grpc::internal::RpcMethod::BIDI_STREAMING);
  std::unique_ptr<grpc::ClientReaderWriter<google::protobuf::Message, google::protobuf::Message>>
      stream(grpc::internal::ClientReaderWriterFactory<
             google::protobuf::Message, google::protobuf::Message>::Create(client.channel().get(),
                                                                           method, &context));
  EXPECT_TRUE(stream->Write(*request));
  stream->WritesDone();
  std::vector<std::string> names;
  if (stream->Read(response.get())) {
    const auto* list_field = response_type->FindFieldByName("list_services_response");
    const google::protobuf::Message& list =
        response->GetReflection()->GetMessage(*response, list_field);
    const auto* service_field = list.GetDescriptor()->FindFieldByName("service");
    for (int i = 0; i < list.GetReflection()->FieldSize(list, service_field); ++i) {
      const google::protobuf::Message& service =
          list.GetReflection()->GetRepeatedMessage(list, service_field, i);
      names.push_back(service.GetReflection()->GetString(
          service, service.GetDescriptor()->FindFieldByName("name")));
    }
  }
  EXPECT_TRUE(stream->Finish().ok());
  return names;
}

class LifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = LoadServedFixture();
    ASSERT_NE(model_, nullptr);
    ServerConfig config = SmallServerConfig();
    // Without a prefix cache, a finished or cancelled request leaves nothing behind, so pool
    // usage must come back exactly to the idle baseline.
    config.engine.scheduler.cache.policy = engine::CachePolicy::kNone;
    auto server = GrpcServer::Start(*model_, config);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    client_ = std::make_unique<Client>(server_->port());
  }

  std::vector<int64_t> UsedUnits() {
    std::vector<int64_t> used;
    const v1::ServerInfo info = client_->ServerInfo();
    for (const v1::PoolInfo& pool : info.pools()) used.push_back(pool.used_units());
    return used;
  }
  int32_t vocab() const { return model_->model->config().vocab_size; }

  std::unique_ptr<ServedModel> model_;
  std::unique_ptr<GrpcServer> server_;
  std::unique_ptr<Client> client_;
};

TEST_F(LifecycleTest, HealthIsServingForTheServerAndTheService) {
  EXPECT_EQ(Health(*client_, ""), grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_EQ(Health(*client_, "tandem.v1.Tandem"), grpc::health::v1::HealthCheckResponse::SERVING);
}

TEST_F(LifecycleTest, ReflectionListsTheServices) {
  const std::vector<std::string> names = ReflectedServices(*client_);
  EXPECT_THAT(names, ::testing::Contains("tandem.v1.Tandem"));
  EXPECT_THAT(names, ::testing::Contains("grpc.health.v1.Health"));
  EXPECT_THAT(names, ::testing::Contains("grpc.reflection.v1alpha.ServerReflection"));
}

TEST_F(LifecycleTest, ClientCancellationMidStreamReturnsPoolUsageToBaseline) {
  const std::vector<int64_t> baseline = UsedUnits();
  ASSERT_EQ(baseline.size(), 2u);
  grpc::ClientContext context;
  auto reader = client_->stub().Generate(&context, GreedyIds(Tokens(300, 1, vocab()), 4000));
  int chunks = 0;
  StreamResult got = testing::ReadStream(*reader, [&](const StreamResult& so_far) {
    // Mid-stream: the request holds memory now.
    if (++chunks == 2) {
      EXPECT_NE(UsedUnits(), baseline);
      context.TryCancel();
    }
  });
  EXPECT_EQ(got.status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_LT(got.tokens.size(), 4000u);
  v1::ServerInfo info;
  ASSERT_TRUE(Eventually([&] {
    info = client_->ServerInfo();
    return info.running_requests() == 0 && info.active_streams() == 0;
  }));
  EXPECT_EQ(UsedUnits(), baseline);
  EXPECT_EQ(info.cancelled_requests(), 1);
}

TEST_F(LifecycleTest, DeadlineExceededMidStreamReturnsPoolUsageToBaseline) {
  const std::vector<int64_t> baseline = UsedUnits();
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
  auto reader = client_->stub().Generate(&context, GreedyIds(Tokens(300, 2, vocab()), 4000));
  StreamResult got = testing::ReadStream(*reader);
  EXPECT_EQ(got.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
      << got.status.error_message();
  EXPECT_LT(got.tokens.size(), 4000u);
  ASSERT_TRUE(Eventually([&] {
    v1::ServerInfo info = client_->ServerInfo();
    return info.running_requests() == 0 && info.waiting_requests() == 0 &&
           info.active_streams() == 0;
  }));
  EXPECT_EQ(UsedUnits(), baseline);
}

TEST_F(LifecycleTest, ShutdownDrainsInFlightRequestsAndRefusesNewOnes) {
  grpc::ClientContext context;
  const int32_t kTokens = 2000;
  auto reader = client_->stub().Generate(&context, GreedyIds(Tokens(20, 3, vocab()), kTokens));
  v1::GenerateResponse first;
  ASSERT_TRUE(reader->Read(&first));

  std::future<void> shutdown =
      std::async(std::launch::async, [&] { server_->Shutdown(std::chrono::seconds(120)); });
  ASSERT_TRUE(Eventually(
      [&] { return Health(*client_, "") == grpc::health::v1::HealthCheckResponse::NOT_SERVING; }));
  StreamResult refused = client_->Generate(GreedyIds({5, 6, 7}, 2));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(refused.status.error_message().find("shutting down"), std::string::npos)
      << refused.status.error_message();

  // The in-flight request runs to its end.
  StreamResult rest = testing::ReadStream(*reader);
  EXPECT_TRUE(rest.status.ok()) << rest.status.error_message();
  ASSERT_TRUE(rest.has_complete);
  EXPECT_EQ(rest.complete.finish_reason(), v1::LENGTH);
  EXPECT_EQ(rest.complete.usage().completion_tokens(), kTokens);
  shutdown.wait();
}

TEST_F(LifecycleTest, ShutdownPastTheGracePeriodAbortsWhatIsLeft) {
  grpc::ClientContext context;
  auto reader = client_->stub().Generate(&context, GreedyIds(Tokens(20, 4, vocab()), 4000));
  v1::GenerateResponse first;
  ASSERT_TRUE(reader->Read(&first));
  server_->Shutdown(std::chrono::milliseconds(0));
  StreamResult rest = testing::ReadStream(*reader);
  EXPECT_TRUE(rest.status.ok()) << rest.status.error_message();
  ASSERT_TRUE(rest.has_complete);
  EXPECT_EQ(rest.complete.finish_reason(), v1::ABORTED);
}

}  // namespace
}  // namespace tandem::server
