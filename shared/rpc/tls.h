// TLS pieces of the metadata transport (shared/rpc): what the client and the server need on
// top of an SSL_CTX made by shared/security (security::NewServerSslCtx / NewClientSslCtx).
// The frames inside TLS are the same as in the clear (docs/rpc-protocol.md, "TLS").
//
// Thread-safe; OpenSSL's per-thread error queue is read and cleared by OpenSslError.
#pragma once

#include <openssl/ssl.h>

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace kelp::rpc {

// Makes a client SSL check that the server's certificate names host (a DNS name, or an IP
// literal matched against the IP subject alternative names).
absl::Status ExpectPeerHost(SSL* ssl, std::string_view host);

// The oldest error on this thread's OpenSSL error queue, as text; the queue is cleared.
std::string OpenSslError();

// What SSL_get_error said after ret, for a log line ("certificate verify failed", "the peer
// closed the connection"...); clears the error queue.
std::string TlsFailure(SSL* ssl, int ret);

// SSL_write on a socket raises SIGPIPE when the peer has gone (it cannot pass MSG_NOSIGNAL):
// ignored once per process by whoever sets up TLS (kelp's commands ignore it anyway).
void IgnoreSigpipe();

}  // namespace kelp::rpc
