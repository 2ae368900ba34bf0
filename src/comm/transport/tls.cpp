// Loading the certificates, making sessions, and saying why TLS failed.
#include "comm/transport/tls.hpp"

#include <cohort/error.hpp>

#include <fmt/format.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cerrno>
#include <cstdint>
#include <cstring>

namespace cohort::comm {
namespace {

// OpenSSL's queued errors as one line ("no start line; ..."), emptied.
std::string drain_errors(unsigned long* first = nullptr) {
    std::string text;
    if (first) *first = 0;
    while (const unsigned long e = ERR_get_error()) {
        if (first && *first == 0) *first = e;
        const char* reason = ERR_reason_error_string(e);
        const std::string part = reason ? reason : fmt::format("OpenSSL error {:#x}", e);
        if (text.find(part) == std::string::npos) text += (text.empty() ? "" : "; ") + part;
    }
    return text.empty() ? std::string("unknown OpenSSL error") : text;
}

// Opening the file ourselves first gives the system's reason (missing,
// permission) rather than OpenSSL's "system lib".
void check_readable(const std::string& path, const char* what, const char* names) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        throw Error(Errc::invalid_argument,
                    fmt::format("communicator TLS: cannot read the {} '{}' ({}): {}", what, path, names,
                                std::strerror(errno)));
    ::close(fd);
}

[[noreturn]] void bad_file(const std::string& path, const char* what, const char* names, const char* expected) {
    throw Error(Errc::invalid_argument, fmt::format("communicator TLS: the {} '{}' ({}) is not {}: {}", what, path,
                                                    names, expected, drain_errors()));
}

// OpenSSL's own socket BIO writes with write(), which raises SIGPIPE when
// the peer has gone, killing a program that did not ignore it; asio sends
// with MSG_NOSIGNAL, and so does this BIO. Otherwise it is the plain
// socket BIO: a would-block is a retry, 0 bytes read the end of stream.
int fd_of(BIO* bio) { return static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(bio))); }

int bio_write(BIO* bio, const char* data, int length) {
    BIO_clear_retry_flags(bio);
    ssize_t n;
    do n = ::send(fd_of(bio), data, static_cast<std::size_t>(length), MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) BIO_set_retry_write(bio);
    return n < 0 ? -1 : static_cast<int>(n);
}

int bio_read(BIO* bio, char* data, int length) {
    BIO_clear_retry_flags(bio);
    ssize_t n;
    do n = ::recv(fd_of(bio), data, static_cast<std::size_t>(length), 0);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) BIO_set_retry_read(bio);
    return n < 0 ? -1 : static_cast<int>(n);
}

long bio_ctrl(BIO*, int command, long, void*) { return command == BIO_CTRL_FLUSH ? 1 : 0; }

const BIO_METHOD* socket_method() {
    static BIO_METHOD* const method = [] {
        BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "cohort socket");
        if (m) {
            BIO_meth_set_write(m, bio_write);
            BIO_meth_set_read(m, bio_read);
            BIO_meth_set_ctrl(m, bio_ctrl);
        }
        return m;
    }();
    return method;
}

}  // namespace

TlsContext::TlsContext(const TlsFiles& files) {
    const char* missing = files.ca.empty()     ? "CA file (tls_ca, COHORT_TLS_CA)"
                          : files.cert.empty() ? "certificate (tls_cert, COHORT_TLS_CERT)"
                          : files.key.empty()  ? "private key (tls_key, COHORT_TLS_KEY)"
                                               : nullptr;
    if (missing)
        throw Error(Errc::invalid_argument,
                    fmt::format("communicator TLS: the {} is not set; TLS needs a CA file, a certificate and a key, "
                                "on every rank",
                                missing));
    constexpr const char* kCa = "tls_ca, COHORT_TLS_CA";
    constexpr const char* kCert = "tls_cert, COHORT_TLS_CERT";
    constexpr const char* kKey = "tls_key, COHORT_TLS_KEY";
    check_readable(files.ca, "CA file", kCa);
    check_readable(files.cert, "certificate", kCert);
    check_readable(files.key, "private key", kKey);
    ERR_clear_error();
    ctx_ = SSL_CTX_new(TLS_method());
    if (!ctx_) throw Error(Errc::internal, "communicator TLS: SSL_CTX_new failed: " + drain_errors());
    try {
        SSL_CTX_set_min_proto_version(ctx_, TLS1_2_VERSION);
        // Both ends verify: a peer without a certificate from the CA fails
        // the handshake, whichever end it is.
        SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
        // Partial writes let a write report progress record by record; a
        // moving buffer lets a retried write continue from where it stood.
        SSL_CTX_set_mode(ctx_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
        SSL_CTX_set_options(ctx_, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
        // Connections are made once per communicator: nothing to resume,
        // so no session tickets arriving in the middle of the frames.
        SSL_CTX_set_session_cache_mode(ctx_, SSL_SESS_CACHE_OFF);
        SSL_CTX_set_num_tickets(ctx_, 0);
        // Read ahead into a 64 KiB buffer: one recv() takes several
        // records, rather than two (header, body) per 16 KiB record. Bytes
        // read ahead wait in the session, which link.hpp always asks
        // before it waits for the socket.
        SSL_CTX_set_read_ahead(ctx_, 1);
        SSL_CTX_set_default_read_buffer_len(ctx_, std::size_t(64) << 10);
        if (SSL_CTX_load_verify_locations(ctx_, files.ca.c_str(), nullptr) != 1)
            bad_file(files.ca, "CA file", kCa, "a PEM certificate");
        if (SSL_CTX_use_certificate_chain_file(ctx_, files.cert.c_str()) != 1)
            bad_file(files.cert, "certificate", kCert, "a PEM certificate");
        if (SSL_CTX_use_PrivateKey_file(ctx_, files.key.c_str(), SSL_FILETYPE_PEM) != 1) {
            // OpenSSL compares the key with the certificate as it loads it.
            if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH)
                throw Error(Errc::invalid_argument,
                            fmt::format("communicator TLS: the private key '{}' does not belong to the certificate "
                                        "'{}': {}",
                                        files.key, files.cert, drain_errors()));
            bad_file(files.key, "private key", kKey, "an unencrypted PEM private key");
        }
        if (SSL_CTX_check_private_key(ctx_) != 1)
            throw Error(
                Errc::invalid_argument,
                fmt::format("communicator TLS: the private key '{}' does not belong to the certificate '{}': {}",
                            files.key, files.cert, drain_errors()));
    } catch (...) {
        SSL_CTX_free(ctx_);
        throw;
    }
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

TlsSession::TlsSession(std::shared_ptr<const TlsContext> context, int fd, bool server)
    : context_(std::move(context)) {
    ssl_ = SSL_new(context_->native());
    BIO* bio = socket_method() ? BIO_new(socket_method()) : nullptr;
    if (!ssl_ || !bio) {
        BIO_free(bio);
        SSL_free(ssl_);
        throw Error(Errc::internal, "communicator TLS: cannot make a session: " + drain_errors());
    }
    BIO_set_data(bio, reinterpret_cast<void*>(static_cast<intptr_t>(fd)));
    BIO_set_init(bio, 1);
    SSL_set_bio(ssl_, bio, bio);  // one reference, owned by the session
    if (server)
        SSL_set_accept_state(ssl_);
    else
        SSL_set_connect_state(ssl_);
}

TlsSession::~TlsSession() { SSL_free(ssl_); }  // the socket is closed by its owner

std::string TlsSession::negotiated() const {
    const char* cipher = SSL_get_cipher_name(ssl_);
    return fmt::format("{} {}", SSL_get_version(ssl_), cipher ? cipher : "?");
}

std::string take_tls_error(SSL* ssl, unsigned long* code) {
    std::string text = drain_errors(code);
    const long verdict = SSL_get_verify_result(ssl);
    if (verdict != X509_V_OK)
        text += fmt::format(" ({}: the peer's certificate is not signed by this rank's CA, or is not valid now)",
                            X509_verify_cert_error_string(verdict));
    else if (text.find("alert") != std::string::npos)
        text += " (the peer refused this rank's certificate, or this rank sent none it accepts)";
    else if (text.find("wrong version number") != std::string::npos || text.find("record layer") != std::string::npos ||
             text.find("packet length too long") != std::string::npos)
        text += " (the peer does not speak TLS: set COHORT_TLS_CA, COHORT_TLS_CERT and COHORT_TLS_KEY on every "
                "rank, or on none)";
    return text;
}

}  // namespace cohort::comm
