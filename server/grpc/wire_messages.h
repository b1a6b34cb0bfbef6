// Our service's methods take and return raw bytes (gRPC ByteBuffers) and convert them here, so
// that a call is authenticated before its request is even parsed: an unauthenticated client
// hears UNAUTHENTICATED whatever it sends, never how the server parses it, and a malformed
// message from an authenticated one gets INVALID_ARGUMENT naming the message type.
#ifndef TANDEM_SERVER_GRPC_WIRE_MESSAGES_H_
#define TANDEM_SERVER_GRPC_WIRE_MESSAGES_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "grpcpp/support/proto_buffer_writer.h"

namespace tandem::server {

template <class Message>
absl::Status ParseWireMessage(const grpc::ByteBuffer& wire, Message* message) {
  grpc::ByteBuffer copy(wire);  // the reader consumes its buffer; this copies references only
  grpc::ProtoBufferReader reader(&copy);
  if (!reader.status().ok() || !message->ParseFromZeroCopyStream(&reader)) {
    return absl::InvalidArgumentError(absl::StrCat("the request is not a valid ",
                                                   Message::descriptor()->full_name(), " message"));
  }
  return absl::OkStatus();
}

template <class Message>
absl::Status SerializeWireMessage(const Message& message, grpc::ByteBuffer* wire) {
  wire->Clear();  // the writer appends to an empty buffer only
  bool own_buffer = false;
  grpc::Status s = grpc::SerializationTraits<Message>::Serialize(message, wire, &own_buffer);
  if (!s.ok())
    return absl::InternalError(absl::StrCat("serializing the response: ", s.error_message()));
  return absl::OkStatus();
}

}  // namespace tandem::server

#endif  // TANDEM_SERVER_GRPC_WIRE_MESSAGES_H_
