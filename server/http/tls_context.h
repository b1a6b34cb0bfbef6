// The server side of TLS for our HTTP endpoints: an OpenSSL context with the certificate chain
// and private key an operator names, checked to belong together when loaded, so that a wrong
// pair fails at start-up rather than on the first scrape.
#ifndef TANDEM_SERVER_HTTP_TLS_CONTEXT_H_
#define TANDEM_SERVER_HTTP_TLS_CONTEXT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace tandem::server {

class TlsContext {
 public:
  // INVALID_ARGUMENT naming the file and OpenSSL's reason when a file is unreadable, not PEM, or
  // the key does not match the certificate.
  static absl::StatusOr<std::shared_ptr<TlsContext>> Load(const std::string& cert_file,
                                                          const std::string& key_file);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  SSL_CTX* get() const { return ctx_; }

 private:
  explicit TlsContext(SSL_CTX* ctx) : ctx_(ctx) {}
  SSL_CTX* ctx_;
};

// OpenSSL's error queue as one line (and cleared), for messages.
std::string TakeOpenSslErrors();

}  // namespace tandem::server

#endif  // TANDEM_SERVER_HTTP_TLS_CONTEXT_H_
