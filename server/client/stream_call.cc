#include "server/client/stream_call.h"

#include <memory>
#include <utility>

namespace tandem::client {
namespace {

// Reads the stream to its end, handing each message and then the status to the handlers.
void ReadToEnd(grpc::ClientReader<v1::GenerateResponse>& reader,
               const StreamCall::Handlers& handlers) {
  v1::GenerateResponse response;
  while (reader.Read(&response)) {
    if (handlers.on_response) handlers.on_response(response);
  }
  const grpc::Status status = reader.Finish();
  if (handlers.on_done) handlers.on_done(status);
}

std::unique_ptr<grpc::ClientContext> NewContext(const Connection& connection,
                                                std::optional<std::chrono::milliseconds> timeout,
                                                const StreamCall::Metadata& metadata) {
  std::unique_ptr<grpc::ClientContext> context = connection.NewContext(timeout);
  for (const auto& [name, value] : metadata) context->AddMetadata(name, value);
  return context;
}

}  // namespace

void StreamCall::StartGenerate(const Connection& connection, v1::GenerateRequest request,
                               std::optional<std::chrono::milliseconds> timeout,
                               Handlers handlers, Metadata metadata) {
  connection.Spawn([&connection, request = std::move(request), timeout,
                    handlers = std::move(handlers), metadata = std::move(metadata)] {
    std::unique_ptr<grpc::ClientContext> context = NewContext(connection, timeout, metadata);
    auto reader = connection.stub().Generate(context.get(), request);
    ReadToEnd(*reader, handlers);
  });
}

void StreamCall::StartChat(const Connection& connection, v1::ChatRequest request,
                           std::optional<std::chrono::milliseconds> timeout, Handlers handlers,
                           Metadata metadata) {
  connection.Spawn([&connection, request = std::move(request), timeout,
                    handlers = std::move(handlers), metadata = std::move(metadata)] {
    std::unique_ptr<grpc::ClientContext> context = NewContext(connection, timeout, metadata);
    auto reader = connection.stub().Chat(context.get(), request);
    ReadToEnd(*reader, handlers);
  });
}

}  // namespace tandem::client
