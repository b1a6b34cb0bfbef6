#include "server/client/connection.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/util/small_file.h"

namespace tandem::client {
namespace {

absl::StatusOr<std::string> ReadCaFile(const std::string& path) {
  absl::StatusOr<std::string> text = server::ReadSmallFile(path, 1 << 20);
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("TLS CA file ", text.status().message()));
  }
  if (text->empty()) {
    return absl::InvalidArgumentError(absl::StrCat("TLS CA file '", path, "' is empty"));
  }
  return text;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Connection>> Connection::Open(const std::string& address,
                                                             const ClientSecurity& security) {
  if (address.empty()) return absl::InvalidArgumentError("the server address is empty");
  std::unique_ptr<Connection> connection(new Connection());
  connection->address_ = address;
  grpc::ChannelArguments args;
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (!security.tls_ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadCaFile(security.tls_ca_file);
    if (!ca.ok()) return ca.status();
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = *std::move(ca);
    credentials = grpc::SslCredentials(ssl);
    if (!security.bearer_token.empty()) {
      credentials = grpc::CompositeChannelCredentials(
          credentials, grpc::AccessTokenCredentials(security.bearer_token));
    }
    if (!security.tls_server_name_override.empty()) {
      args.SetSslTargetNameOverride(security.tls_server_name_override);
    }
    connection->tls_ = true;
  } else {
    credentials = grpc::InsecureChannelCredentials();
    if (!security.bearer_token.empty()) {
      connection->per_call_authorization_ = absl::StrCat("Bearer ", security.bearer_token);
    }
  }
  connection->channel_ = grpc::CreateCustomChannel(address, credentials, args);
  connection->stub_ = v1::Tandem::NewStub(connection->channel_);
  return connection;
}

void Connection::Prepare(grpc::ClientContext& context,
                         std::optional<std::chrono::milliseconds> timeout) const {
  if (!per_call_authorization_.empty()) {
    context.AddMetadata("authorization", per_call_authorization_);
  }
  if (timeout) context.set_deadline(std::chrono::system_clock::now() + *timeout);
}

std::unique_ptr<grpc::ClientContext> Connection::NewContext(
    std::optional<std::chrono::milliseconds> timeout) const {
  auto context = std::make_unique<grpc::ClientContext>();
  Prepare(*context, timeout);
  return context;
}

void Connection::Spawn(std::function<void()> body) const {
  auto finished = std::make_shared<std::atomic<bool>>(false);
  std::lock_guard<std::mutex> lock(threads_mu_);
  // Reap the threads that are done, so that a long run does not keep every stack.
  for (size_t i = 0; i < threads_.size();) {
    if (threads_[i].finished->load()) {
      threads_[i].thread.join();
      threads_[i] = std::move(threads_.back());
      threads_.pop_back();
    } else {
      ++i;
    }
  }
  threads_.push_back({std::thread([body = std::move(body), finished] {
                        body();
                        finished->store(true);
                      }),
                      finished});
}

Connection::~Connection() {
  std::lock_guard<std::mutex> lock(threads_mu_);
  for (CallThread& t : threads_) t.thread.join();
}

}  // namespace tandem::client
