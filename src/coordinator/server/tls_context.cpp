// make_tls_context: TLS 1.2 or newer; each file opened first so that a
// missing one is told with the system's reason, then loaded, with
// OpenSSL's reason when it is not PEM of the right kind.
#include "coordinator/server/tls_context.hpp"

#include <cohort/error.hpp>

#include <fmt/format.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

namespace cohort::coord::server {
namespace {

namespace ssl = boost::asio::ssl;

// OpenSSL's queued errors as one line, emptied.
std::string drain_errors() {
    std::string text;
    while (const unsigned long e = ERR_get_error()) {
        const char* reason = ERR_reason_error_string(e);
        const std::string part = reason ? reason : fmt::format("OpenSSL error {:#x}", e);
        if (text.find(part) == std::string::npos) text += (text.empty() ? "" : "; ") + part;
    }
    return text.empty() ? std::string("unknown OpenSSL error") : text;
}

void check_readable(const std::string& path, const char* option) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        throw Error(Errc::invalid_argument, fmt::format("coordinator TLS: cannot read {} '{}': {}", option, path,
                                                        std::strerror(errno)));
    }
    ::close(fd);
}

[[noreturn]] void bad_file(const std::string& path, const char* option, const char* expected) {
    throw Error(Errc::invalid_argument,
                fmt::format("coordinator TLS: {} '{}' is not {}: {}", option, path, expected, drain_errors()));
}

}  // namespace

std::unique_ptr<ssl::context> make_tls_context(const CoordinatorOptions& options) {
    const bool cert = !options.tls_cert_file.empty(), key = !options.tls_key_file.empty();
    if (!cert && !key) {
        if (!options.tls_client_ca_file.empty()) {
            throw Error(Errc::invalid_argument,
                        "coordinator TLS: tls_client_ca_file (--tls-client-ca) needs tls_cert_file and tls_key_file "
                        "(--tls-cert, --tls-key): client certificates are checked only over HTTPS");
        }
        return nullptr;
    }
    if (cert != key) {
        throw Error(Errc::invalid_argument,
                    fmt::format("coordinator TLS: give both tls_cert_file (--tls-cert) and tls_key_file (--tls-key), "
                                "not only {}",
                                cert ? "the certificate" : "the key"));
    }
    ERR_clear_error();
    auto context = std::make_unique<ssl::context>(ssl::context::tls_server);
    SSL_CTX* ctx = context->native_handle();
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);

    const std::string& cert_file = options.tls_cert_file;
    const std::string& key_file = options.tls_key_file;
    check_readable(cert_file, "the certificate tls_cert_file (--tls-cert)");
    if (SSL_CTX_use_certificate_chain_file(ctx, cert_file.c_str()) != 1) {
        bad_file(cert_file, "the certificate tls_cert_file (--tls-cert)", "a PEM certificate");
    }
    check_readable(key_file, "the key tls_key_file (--tls-key)");
    if (SSL_CTX_use_PrivateKey_file(ctx, key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
        bad_file(key_file, "the key tls_key_file (--tls-key)",
                 fmt::format("a PEM private key that matches the certificate '{}'", cert_file).c_str());
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        throw Error(Errc::invalid_argument,
                    fmt::format("coordinator TLS: the key '{}' does not match the certificate '{}': {}", key_file,
                                cert_file, drain_errors()));
    }
    if (!options.tls_client_ca_file.empty()) {
        const std::string& ca_file = options.tls_client_ca_file;
        check_readable(ca_file, "the client CA tls_client_ca_file (--tls-client-ca)");
        if (SSL_CTX_load_verify_locations(ctx, ca_file.c_str(), nullptr) != 1) {
            bad_file(ca_file, "the client CA tls_client_ca_file (--tls-client-ca)", "a PEM certificate");
        }
        // Its names are what the server asks for in the handshake.
        if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(ca_file.c_str())) {
            SSL_CTX_set_client_CA_list(ctx, names);
        }
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    }
    ERR_clear_error();
    return context;
}

}  // namespace cohort::coord::server
