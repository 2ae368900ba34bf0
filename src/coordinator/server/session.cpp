// HttpSession: Beast's parser with the body limit, timeouts on every read
// and write, and one request at a time, over a plain or a TLS stream (a
// variant: each read and write visits it, the rest is shared).
#include "coordinator/server/session.hpp"

#include <boost/asio/ssl/error.hpp>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <boost/beast/core/bind_handler.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include <fmt/format.h>

#include <chrono>
#include <utility>

namespace cohort::coord::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

using Stream = std::variant<HttpSession::PlainStream, HttpSession::TlsStream>;

Stream make_stream(asio::ip::tcp::socket socket, asio::ssl::context* tls) {
    if (!tls) return Stream(std::in_place_type<HttpSession::PlainStream>, std::move(socket));
    return Stream(std::in_place_type<HttpSession::TlsStream>, beast::tcp_stream(std::move(socket)), *tls);
}

// What a plain HTTP client hears on the HTTPS port. The body's length is
// counted below, not by hand.
constexpr std::string_view kPlainHttpBody =
    "{\"error\":\"https_required\",\"detail\":\"this coordinator port speaks HTTPS only: use an https:// URL "
    "(docs/coordinator.md, HTTPS)\"}\n";

}  // namespace

HttpSession::HttpSession(Coordinator::Impl& server, asio::ip::tcp::socket socket, uint64_t id, std::string peer,
                         asio::ssl::context* tls)
    : server_(server), id_(id), peer_(std::move(peer)), stream_(make_stream(std::move(socket), tls)) {}

beast::tcp_stream& HttpSession::tcp() {
    return std::visit([](auto& stream) -> beast::tcp_stream& { return beast::get_lowest_layer(stream); }, stream_);
}

void HttpSession::start() {
    auto* tls = std::get_if<TlsStream>(&stream_);
    if (!tls) return read_request();
    // A client that opens a connection and never finishes the handshake is
    // idle like one that never sends a request: the same timeout, and it
    // may be shed while crowded.
    tcp().expires_after(server_.options.idle_timeout);
    waiting_ = server_.gate.start_waiting(id_, std::chrono::steady_clock::now());
    tls->async_handshake(asio::ssl::stream_base::server,
                         [self = shared_from_this()](beast::error_code ec) { self->on_handshake(ec); });
}

void HttpSession::on_handshake(beast::error_code ec) {
    if (closed_) return;
    if (waiting_) server_.gate.stop_waiting(*std::exchange(waiting_, std::nullopt));
    if (!ec) return read_request();
    server_.handshake_failed(peer_, ec);
    if (ec.category() == asio::error::get_ssl_category() &&
        ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == SSL_R_HTTP_REQUEST) {
        return refuse_plain_http();
    }
    close();
}

void HttpSession::refuse_plain_http() {
    const std::string reply = fmt::format(
        "HTTP/1.1 400 Bad Request\r\nServer: cohort-coordinator\r\nContent-Type: application/json\r\n"
        "Connection: close\r\nContent-Length: {}\r\n\r\n{}",
        kPlainHttpBody.size(), kPlainHttpBody);
    // A fresh connection's send buffer is empty: this does not block.
    (void)::send(tcp().socket().native_handle(), reply.data(), reply.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    keep_alive_ = false;
    drain();
}

void HttpSession::read_request() {
    if (closed_) return;
    parser_.emplace();
    parser_->body_limit(server_.options.body_limit);
    parser_->header_limit(Coordinator::Impl::kHeaderLimit);
    tcp().expires_after(server_.options.idle_timeout);
    waiting_ = server_.gate.start_waiting(id_, std::chrono::steady_clock::now());
    std::visit(
        [&](auto& stream) {
            http::async_read(stream, buffer_, *parser_,
                             [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
        },
        stream_);
}

void HttpSession::on_read(beast::error_code ec) {
    if (closed_) return;
    if (waiting_) server_.gate.stop_waiting(*std::exchange(waiting_, std::nullopt));
    if (ec) {
        // A client that leaves or idles past the timeout just goes; one that
        // sent something unreadable is told why, then the connection ends
        // (the rest of its bytes cannot be framed).
        keep_alive_ = false;
        if (ec == http::error::body_limit) {
            reply(error_response(
                413, "body_too_large",
                fmt::format("request body: more than the limit of {} bytes", server_.options.body_limit)));
        } else if (ec == http::error::header_limit) {
            reply(error_response(431, "header_too_large",
                                 fmt::format("request header: more than {} bytes", Coordinator::Impl::kHeaderLimit)));
        } else if (ec.category() == beast::error_code(http::error::end_of_stream).category() &&
                   ec != http::error::end_of_stream && ec != http::error::partial_message) {
            reply(error_response(400, "malformed_request", fmt::format("HTTP request: {}", ec.message())));
        } else {
            close();
        }
        return;
    }
    Request request = parser_->release();
    version_ = request.version();
    keep_alive_ = request.keep_alive();
    std::optional<Response> response;
    try {
        response = server_.route_once(shared_from_this(), request);
    } catch (const Error& e) {
        response = error_response(e);
    } catch (const std::exception& e) {
        response = error_response(
            500, "internal",
            fmt::format("{} {}: {}", std::string(request.method_string()), std::string(request.target()), e.what()));
    }
    if (response) reply(std::move(*response));
}

void HttpSession::reply(Response response) {
    if (closed_) return;
    server_.answer(shared_from_this(), std::move(response));
}

void HttpSession::send(Response response) {
    if (closed_) return;
    ++server_.responses[std::min<std::size_t>(response.status / 100, server_.responses.size() - 1)];
    response_ = {};
    response_.version(version_);
    response_.result(response.status);
    response_.set(http::field::server, "cohort-coordinator");
    response_.set(http::field::content_type, response.content_type);
    response_.set(http::field::cache_control, "no-store");
    if (!response.allow.empty()) response_.set(http::field::allow, response.allow);
    if (!response.leader.empty()) response_.set("X-Cohort-Leader", response.leader);
    if (response.status == 401) response_.set(http::field::www_authenticate, "Bearer");
    response_.body() = std::move(response.body);
    response_.keep_alive(keep_alive_);
    response_.prepare_payload();
    tcp().expires_after(Coordinator::Impl::kWriteTimeout);
    std::visit(
        [&](auto& stream) {
            http::async_write(stream, response_,
                              [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_write(ec); });
        },
        stream_);
}

void HttpSession::on_write(beast::error_code ec) {
    if (closed_) return;
    if (ec) return close();
    if (!keep_alive_) return drain();
    read_request();
}

void HttpSession::drain() {
    // Over TLS too the bytes are read raw and dropped, undecrypted: nothing
    // more is answered on this connection.
    beast::error_code ignored;
    tcp().socket().shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
    tcp().expires_after(std::chrono::seconds(2));
    tcp().async_read_some(asio::buffer(scratch_), [self = shared_from_this()](beast::error_code ec, std::size_t) {
        if (ec)
            self->close();
        else
            self->drain();
    });
}

void HttpSession::close() {
    if (closed_) return;
    closed_ = true;
    beast::error_code ignored;
    tcp().socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    tcp().close();
    if (waiting_) server_.gate.stop_waiting(*std::exchange(waiting_, std::nullopt));
    server_.gate.release(peer_);
    server_.sessions.erase(id_);
}

}  // namespace cohort::coord::server
