// How a client proves who it talks to and who it is: TLS with a trusted CA, and a bearer token
// (the server's --tls-cert/--tls-key and --auth-token on the other side).
#ifndef TANDEM_SERVER_CLIENT_CLIENT_SECURITY_H_
#define TANDEM_SERVER_CLIENT_CLIENT_SECURITY_H_

#include <string>

namespace tandem::client {

struct ClientSecurity {
  // PEM file of the CA that signed the server's certificate. Empty: plaintext (insecure) channel.
  std::string tls_ca_file;
  // The name to check the server's certificate against instead of the address's host, e.g. when
  // connecting by IP to a server whose certificate names a host.
  std::string tls_server_name_override;
  // Sent as `authorization: Bearer <token>` on every call; empty sends nothing.
  std::string bearer_token;
};

}  // namespace tandem::client

#endif  // TANDEM_SERVER_CLIENT_CLIENT_SECURITY_H_
