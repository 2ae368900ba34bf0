// asio::ssl over OpenSSL. The client CA's name goes out in the
// CertificateRequest, as the API server sends it: Go's TLS client (kubectl)
// offers its certificate only to a server that names its issuer.
#include "tls.hpp"

#include <boost/asio/ssl/verify_mode.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <chrono>
#include <stdexcept>

namespace cohort::k8s_double {

namespace ssl = boost::asio::ssl;

std::unique_ptr<ssl::context> make_server_context(const TlsOptions& options) {
    auto ctx = std::make_unique<ssl::context>(ssl::context::tls_server);
    ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                     ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
    const auto load = [](const char* what, const std::filesystem::path& file, auto&& f) {
        try {
            f();
        } catch (const std::exception& e) {
            throw std::runtime_error(std::string("k8s double TLS: cannot load the ") + what + " '" + file.string() +
                                     "': " + e.what());
        }
    };
    load("server certificate", options.cert, [&] { ctx->use_certificate_chain_file(options.cert.string()); });
    load("server key", options.key, [&] { ctx->use_private_key_file(options.key.string(), ssl::context::pem); });
    if (!options.client_ca.empty()) {
        load("client CA", options.client_ca, [&] { ctx->load_verify_file(options.client_ca.string()); });
        STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(options.client_ca.c_str());
        if (names == nullptr)
            throw std::runtime_error("k8s double TLS: no certificate in the client CA '" + options.client_ca.string() +
                                     "'");
        SSL_CTX_set_client_CA_list(ctx->native_handle(), names);
        ctx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
    }
    return ctx;
}

boost::asio::awaitable<std::string> tls_handshake(TlsStream& stream) {
    boost::beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(30));
    co_await stream.async_handshake(ssl::stream_base::server, boost::asio::use_awaitable);
    boost::beast::get_lowest_layer(stream).expires_never();
    std::string cn;
    if (X509* peer = SSL_get1_peer_certificate(stream.native_handle())) {
        char buffer[256] = {};
        if (X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, buffer, sizeof buffer) > 0)
            cn = buffer;
        X509_free(peer);
    }
    co_return cn;
}

}  // namespace cohort::k8s_double
