#include "shared/rpc/tls.h"

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include <csignal>
#include <mutex>

#include "shared/strings.h"

namespace kelp::rpc {

absl::Status ExpectPeerHost(SSL* ssl, std::string_view host) {
  std::string h(host);
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  int ok = X509_VERIFY_PARAM_set1_ip_asc(param, h.c_str());  // 1 when host is an IP literal
  if (ok != 1) {
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    ok = X509_VERIFY_PARAM_set1_host(param, h.c_str(), h.size());
    SSL_set_tlsext_host_name(ssl, h.c_str());
  }
  ERR_clear_error();
  if (ok != 1) return absl::InvalidArgumentError(kelp::StrCat("bad TLS peer host ", host));
  return absl::OkStatus();
}

std::string OpenSslError() {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

std::string TlsFailure(SSL* ssl, int ret) {
  int e = SSL_get_error(ssl, ret);
  std::string what;
  if (e == SSL_ERROR_SSL) {
    // The newest error is OpenSSL's summary ("certificate verify failed"); older ones are the
    // library calls under it (asn1, EVP), less telling.
    unsigned long last = ERR_peek_last_error();
    if (last != 0) {
      char buf[256];
      ERR_error_string_n(last, buf, sizeof buf);
      what = buf;
    } else {
      what = "unknown OpenSSL error";
    }
    long verify = SSL_get_verify_result(ssl);
    if (verify != X509_V_OK) what += kelp::StrCat(" (", X509_verify_cert_error_string(verify), ")");
  } else if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)) {
    what = "the peer closed the connection";
  } else {
    what = kelp::StrCat("TLS error ", e, ": ", OpenSslError());
  }
  ERR_clear_error();
  return what;
}

void IgnoreSigpipe() {
  static std::once_flag once;
  std::call_once(once, [] { signal(SIGPIPE, SIG_IGN); });
}

}  // namespace kelp::rpc
