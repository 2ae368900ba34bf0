// HttpSession: Beast's parser with the body limit, timeouts on every read
// and write, and one request at a time.
#include "coordinator/server/session.hpp"

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

HttpSession::HttpSession(Coordinator::Impl& server, asio::ip::tcp::socket socket, uint64_t id, std::string peer)
    : server_(server), id_(id), peer_(std::move(peer)), stream_(std::move(socket)) {}

void HttpSession::read_request() {
    if (closed_) return;
    parser_.emplace();
    parser_->body_limit(server_.options.body_limit);
    parser_->header_limit(Coordinator::Impl::kHeaderLimit);
    stream_.expires_after(server_.options.idle_timeout);
    waiting_ = server_.gate.start_waiting(id_, std::chrono::steady_clock::now());
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
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
    stream_.expires_after(Coordinator::Impl::kWriteTimeout);
    http::async_write(stream_, response_,
                      [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_write(ec); });
}

void HttpSession::on_write(beast::error_code ec) {
    if (closed_) return;
    if (ec) return close();
    if (!keep_alive_) return drain();
    read_request();
}

void HttpSession::drain() {
    beast::error_code ignored;
    stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
    stream_.expires_after(std::chrono::seconds(2));
    stream_.async_read_some(asio::buffer(scratch_), [self = shared_from_this()](beast::error_code ec, std::size_t) {
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
    stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    stream_.close();
    if (waiting_) server_.gate.stop_waiting(*std::exchange(waiting_, std::nullopt));
    server_.gate.release(peer_);
    server_.sessions.erase(id_);
}

}  // namespace cohort::coord::server
