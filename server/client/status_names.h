// gRPC status codes by their canonical names ("UNAVAILABLE"), for messages and reports.
#ifndef TANDEM_SERVER_CLIENT_STATUS_NAMES_H_
#define TANDEM_SERVER_CLIENT_STATUS_NAMES_H_

#include <string>

#include "grpcpp/grpcpp.h"

namespace tandem::client {

// "OK", "CANCELLED", ... "UNAUTHENTICATED"; "CODE_<n>" for a number outside the enum. Takes the
// code as an int: a peer may send any number, and an enum variable holding one outside the
// enum's range is undefined behaviour (clang's UBSan reports it).
std::string StatusCodeName(int code);

// "CODE: message" (or just "CODE" when the message is empty).
std::string DescribeStatus(const grpc::Status& status);

}  // namespace tandem::client

#endif  // TANDEM_SERVER_CLIENT_STATUS_NAMES_H_
