// One HTTP connection to the coordinator: a request, its answer, then the
// next, in order. Reads and writes are bounded by timeouts, so a stalled
// client holds nothing for long; a parked request waits for its answer
// without reading further. Over HTTPS the same session runs on a TLS
// stream, after a handshake bounded by the idle timeout.
#pragma once

#include "coordinator/server/server.hpp"

#include <boost/beast/ssl/ssl_stream.hpp>

#include <variant>

namespace cohort::coord::server {

class HttpSession : public std::enable_shared_from_this<HttpSession> {
public:
    using PlainStream = boost::beast::tcp_stream;
    using TlsStream = boost::beast::ssl_stream<boost::beast::tcp_stream>;

    // `id` is its key in the server's sessions; `peer` its client's address;
    // `tls`: HTTPS with that context, nullptr: plain HTTP.
    HttpSession(Coordinator::Impl& server, boost::asio::ip::tcp::socket socket, uint64_t id, std::string peer,
                boost::asio::ssl::context* tls);

    // The TLS handshake first, when there is one; then requests.
    void start();
    // The answer to the current request, once the journal holds what it
    // depends on (Coordinator::Impl::answer); then the next request is read
    // (keep-alive) or the connection ends.
    void reply(Response response);
    // Sends the answer now.
    void send(Response response);
    // Ends the connection, and its place in the gate's counts.
    void close();

private:
    // The TCP stream under either kind: timeouts, shutdown, close.
    boost::beast::tcp_stream& tcp();
    void on_handshake(boost::beast::error_code ec);
    // A plain HTTP request came to the HTTPS port: answered in plain text
    // that this port wants https://, so the client is told rather than reset.
    void refuse_plain_http();
    void read_request();
    void on_read(boost::beast::error_code ec);
    void on_write(boost::beast::error_code ec);
    // After an answer that ends the connection: stop sending, read and drop
    // what the client still sends for a moment, so it can read the answer
    // before the connection resets.
    void drain();

    Coordinator::Impl& server_;
    uint64_t id_;
    std::string peer_;
    // While waiting for a request: its place among the idle connections.
    std::optional<ConnectionGate::Ticket> waiting_;
    std::variant<PlainStream, TlsStream> stream_;
    boost::beast::flat_buffer buffer_;
    std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
    boost::beast::http::response<boost::beast::http::string_body> response_;
    unsigned version_ = 11;
    bool keep_alive_ = true;
    bool closed_ = false;
    std::array<char, 4096> scratch_{};
};

}  // namespace cohort::coord::server
