#include "server/http/tls_context.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include "absl/strings/str_cat.h"
#include "server/util/small_file.h"

namespace tandem::server {
namespace {

constexpr size_t kMaxPemBytes = 1 << 20;

absl::Status Refuse(const std::string& what, const std::string& path, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(what, " '", path, "': ", why));
}

}  // namespace

std::string TakeOpenSslErrors() {
  std::string text;
  while (const unsigned long code = ERR_get_error()) {
    char line[256];
    ERR_error_string_n(code, line, sizeof(line));
    if (!text.empty()) text += "; ";
    text += line;
  }
  return text.empty() ? "unknown OpenSSL error" : text;
}

absl::StatusOr<std::shared_ptr<TlsContext>> TlsContext::Load(const std::string& cert_file,
                                                             const std::string& key_file) {
  ERR_clear_error();
  // Read through our bounded reader: the paths come from an operator, and a directory or a
  // device must be refused by name rather than block or be read without end.
  absl::StatusOr<std::string> cert_pem = ReadSmallFile(cert_file, kMaxPemBytes);
  if (!cert_pem.ok())
    return absl::InvalidArgumentError(
        absl::StrCat("TLS certificate ", cert_pem.status().message()));
  absl::StatusOr<std::string> key_pem = ReadSmallFile(key_file, kMaxPemBytes);
  if (!key_pem.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("TLS key ", key_pem.status().message()));
  }
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return absl::InternalError(TakeOpenSslErrors());
  auto context = std::shared_ptr<TlsContext>(new TlsContext(ctx));
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);

  BIO* certs = BIO_new_mem_buf(cert_pem->data(), static_cast<int>(cert_pem->size()));
  X509* leaf = PEM_read_bio_X509(certs, nullptr, nullptr, nullptr);
  if (leaf == nullptr || SSL_CTX_use_certificate(ctx, leaf) != 1) {
    X509_free(leaf);
    BIO_free(certs);
    return Refuse("TLS certificate", cert_file, "no PEM certificate (" + TakeOpenSslErrors() + ")");
  }
  X509_free(leaf);
  // The rest of the file is the chain up to the CA.
  while (X509* intermediate = PEM_read_bio_X509(certs, nullptr, nullptr, nullptr)) {
    if (SSL_CTX_add0_chain_cert(ctx, intermediate) != 1) {
      X509_free(intermediate);
      BIO_free(certs);
      return Refuse("TLS certificate", cert_file, TakeOpenSslErrors());
    }
  }
  BIO_free(certs);
  ERR_clear_error();  // the loop ends on "no start line", which is not an error

  BIO* key_bio = BIO_new_mem_buf(key_pem->data(), static_cast<int>(key_pem->size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(key_bio, nullptr, nullptr, nullptr);
  BIO_free(key_bio);
  if (key == nullptr || SSL_CTX_use_PrivateKey(ctx, key) != 1) {
    EVP_PKEY_free(key);
    return Refuse("TLS key", key_file, "no PEM private key (" + TakeOpenSslErrors() + ")");
  }
  EVP_PKEY_free(key);
  if (SSL_CTX_check_private_key(ctx) != 1) {
    return Refuse("TLS key", key_file,
                  absl::StrCat("does not match the certificate '", cert_file, "'"));
  }
  return context;
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

}  // namespace tandem::server
