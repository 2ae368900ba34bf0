// TLS for the data connections (OpenSSL), as Gloo's tcp_tls transport does:
// every link is a TLS 1.2 or 1.3 stream and both ends verify the other's
// certificate against the configured CA (mutual authentication). Any holder
// of a certificate that CA signed is a trusted peer: the certificate
// authenticates membership of the job, the hello then says which rank it
// is. docs/collectives.md has the threat model.
#pragma once

#include <memory>
#include <string>

using SSL_CTX = struct ssl_ctx_st;
using SSL = struct ssl_st;

namespace cohort::comm {

// The three PEM files; TLS is on when all three are set.
struct TlsFiles {
    std::string ca;    // CA certificate(s) a peer's certificate must chain to
    std::string cert;  // this rank's certificate (chain)
    std::string key;   // its private key, unencrypted

    bool on() const { return !ca.empty() || !cert.empty() || !key.empty(); }
};

// One SSL_CTX built from the files, shared by every link of a communicator.
class TlsContext {
public:
    // Error(invalid_argument) naming the file, the option or variable that
    // set it, and what is wrong with it (missing, unreadable, not PEM, the
    // key does not match the certificate).
    explicit TlsContext(const TlsFiles& files);
    ~TlsContext();
    TlsContext(const TlsContext&) = delete;
    TlsContext& operator=(const TlsContext&) = delete;

    SSL_CTX* native() const { return ctx_; }

private:
    SSL_CTX* ctx_ = nullptr;
};

// The TLS state of one connection, over a socket descriptor it does not
// own. It holds no reference to an io_context, so a finished connection can
// move from the set-up's io_context to the engine's by its descriptor, as
// plain sockets do (mesh.cpp).
class TlsSession {
public:
    TlsSession(std::shared_ptr<const TlsContext> context, int fd, bool server);
    ~TlsSession();
    TlsSession(const TlsSession&) = delete;
    TlsSession& operator=(const TlsSession&) = delete;

    SSL* native() const { return ssl_; }
    // The reason of the last TLS failure on this connection, in words:
    // OpenSSL's reason, the certificate check's verdict when it failed, and
    // what usually causes it. Set by link.hpp when an operation fails.
    const std::string& failure() const { return failure_; }
    void set_failure(std::string text) { failure_ = std::move(text); }
    // The protocol and cipher negotiated ("TLSv1.3 TLS_AES_256_GCM_SHA384").
    std::string negotiated() const;

private:
    std::shared_ptr<const TlsContext> context_;
    SSL* ssl_ = nullptr;
    std::string failure_;
};

// Takes OpenSSL's error queue (this thread's) after a failed call on
// `ssl`, and says what went wrong; `code` is the first queued error.
std::string take_tls_error(SSL* ssl, unsigned long* code);

}  // namespace cohort::comm
