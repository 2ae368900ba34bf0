// One client connection of the tcp:// store server: reads frames with
// bounded buffers, hands requests to the server and writes its replies. A
// client that breaks the protocol loses its connection, and only that.
#include "comm/store/tcp_server.hpp"

#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <cstdio>
#include <utility>

#include <fmt/format.h>

namespace cohort::detail {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;
namespace sp = store_protocol;

namespace {

constexpr std::size_t kReadChunk = std::size_t{64} << 10;

}  // namespace

StoreSession::StoreSession(StoreServer::Impl& server, tcp::socket socket)
    : server_(server), socket_(std::move(socket)) {
    error_code ec;
    const auto remote = socket_.remote_endpoint(ec);
    peer_ = ec ? std::string("an unknown peer") : fmt::format("{}:{}", remote.address().to_string(), remote.port());
}

void StoreSession::close(std::string_view reason) {
    if (closed_) return;
    closed_ = true;
    if (!reason.empty() && !server_.stopping) {
        fmt::print(stderr, "cohort: store server {}: closing the connection from {}: {}\n", server_.url, peer_, reason);
    }
    error_code ignored;
    socket_.close(ignored);
    if (parked) server_.drop(std::exchange(parked, nullptr));
    server_.sessions.erase(shared_from_this());
}

void StoreSession::reply(sp::Command command, const sp::Reply& reply) {
    if (closed_) return;
    out_ = sp::encode_reply(command, reply);
    asio::async_write(socket_, asio::buffer(out_), [self = shared_from_this()](error_code ec, std::size_t) {
        if (self->closed_ || self->server_.stopping) return;
        if (ec) return self->close({});
        self->read_header();
    });
}

void StoreSession::watch() {
    socket_.async_read_some(asio::buffer(probe_), [self = shared_from_this()](error_code ec, std::size_t) {
        if (ec == asio::error::operation_aborted || self->closed_ || self->server_.stopping) return;
        self->close(ec ? std::string_view{} : "sent a request while another was waiting");
    });
}

void StoreSession::unwatch() {
    error_code ignored;
    socket_.cancel(ignored);
}

void StoreSession::read_header() {
    asio::async_read(socket_, asio::buffer(header_), [self = shared_from_this()](error_code ec, std::size_t) {
        if (self->closed_ || self->server_.stopping) return;
        if (ec) return self->close({});
        try {
            self->length_ = sp::frame_length(self->header_);
        } catch (const sp::ProtocolError& e) {
            return self->close(e.what());
        }
        self->body_.clear();
        self->read_body();
    });
}

// The body grows by what actually arrives, so a header that announces a
// large frame and then stalls costs almost nothing.
void StoreSession::read_body() {
    const std::size_t have = body_.size();
    const std::size_t chunk = std::min(length_ - have, kReadChunk);
    body_.resize(have + chunk);
    asio::async_read(socket_, asio::buffer(body_.data() + have, chunk),
                     [self = shared_from_this()](error_code ec, std::size_t) {
                         if (self->closed_ || self->server_.stopping) return;
                         if (ec) return self->close({});
                         if (self->body_.size() < self->length_) return self->read_body();
                         self->dispatch();
                     });
}

void StoreSession::dispatch() {
    sp::Request request;
    try {
        request = sp::decode_request(body_);
    } catch (const sp::ProtocolError& e) {
        return close(e.what());
    }
    // Keep no frame-sized buffer around on an idle connection.
    if (body_.capacity() > kReadChunk) body_ = {};
    try {
        server_.handle(shared_from_this(), std::move(request));
    } catch (const std::exception& e) {
        close(fmt::format("cannot serve the request: {}", e.what()));
    }
}

}  // namespace cohort::detail
