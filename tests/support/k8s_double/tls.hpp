// The double's HTTPS mode, as a real API server serves: a certificate the
// cluster's CA signed, and, when a client CA is given, client certificates
// required and verified against it (mTLS; the API server reads the user
// from the certificate's CN). Plain HTTP stays the default.
#pragma once

#include "api_server.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include <memory>
#include <string>

namespace cohort::k8s_double {

// Throws std::runtime_error naming the file that could not be loaded.
std::unique_ptr<boost::asio::ssl::context> make_server_context(const TlsOptions& options);

using TlsStream = boost::beast::ssl_stream<boost::beast::tcp_stream>;

// The server side of the handshake, within 30 s. Returns the verified
// client certificate's CN ("" when none was asked for), or throws (the
// client refused our certificate, or sent none when one is required).
boost::asio::awaitable<std::string> tls_handshake(TlsStream& stream);

}  // namespace cohort::k8s_double
