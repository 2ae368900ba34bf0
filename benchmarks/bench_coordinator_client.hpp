// bench_coordinator's load generator: keep-alive HTTP/1.1 connections on
// Boost.Beast, each sending its queued requests one after another on the
// caller's io_context (no thread of their own), so a few hundred connections
// carry the requests of thousands of simulated members.
#pragma once

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace bench {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

struct Reply {
    unsigned status = 0;      // 0: no answer (the connection failed; see error)
    std::string body;
    std::string error;
    Clock::time_point sent;   // when the request's write began
    Clock::time_point received;
};

struct Request {
    http::verb method = http::verb::get;
    std::string target;
    std::string body;
    std::function<void(Reply&)> done;
};

// Every read and write is bounded by `timeout`; a connection that fails
// answers its queued requests with status 0 and takes no more.
class Connection : public std::enable_shared_from_this<Connection> {
public:
    Connection(asio::io_context& io, std::string host, std::string authorization, std::chrono::seconds timeout)
        : stream_(io), host_(std::move(host)), authorization_(std::move(authorization)), timeout_(timeout) {}

    void connect(const tcp::endpoint& endpoint, std::function<void(const std::string& error)> done) {
        stream_.expires_after(timeout_);
        stream_.async_connect(endpoint, [self = shared_from_this(), done = std::move(done)](beast::error_code ec) {
            if (ec) self->failed_ = "connect: " + ec.message();
            else self->stream_.socket().set_option(tcp::no_delay(true));
            done(self->failed_);
        });
    }

    // Urgent requests (heartbeats) go ahead of queued ones, as a real member's
    // heartbeat would not wait behind its neighbours' world fetches.
    void send(Request request, bool urgent = false) {
        if (urgent) queue_.push_front(std::move(request));
        else queue_.push_back(std::move(request));
        if (!busy_) next();
    }

    std::size_t queued() const { return queue_.size(); }

    void close() {
        beast::error_code ignored;
        stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
        stream_.close();
    }

private:
    void next() {
        if (queue_.empty()) {
            busy_ = false;
            return;
        }
        busy_ = true;
        current_ = std::move(queue_.front());
        queue_.pop_front();
        reply_ = Reply{};
        if (!failed_.empty()) return finish(failed_);
        request_ = {current_.method, current_.target, 11};
        request_.set(http::field::host, host_);
        if (!authorization_.empty()) request_.set(http::field::authorization, authorization_);
        request_.keep_alive(true);
        if (current_.method != http::verb::get) {
            request_.set(http::field::content_type, "application/json");
            request_.body() = std::move(current_.body);
            request_.prepare_payload();
        }
        reply_.sent = Clock::now();
        stream_.expires_after(timeout_);
        http::async_write(stream_, request_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
            if (ec) return self->finish("write: " + ec.message());
            self->read();
        });
    }

    void read() {
        parser_.emplace();
        parser_->body_limit(256u << 20);  // a 10,000-member world is about 0.6 MB
        stream_.expires_after(timeout_);
        http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
            if (ec) return self->finish("read: " + ec.message());
            auto response = self->parser_->release();
            self->reply_.status = response.result_int();
            self->reply_.body = std::move(response.body());
            self->finish({});
        });
    }

    void finish(const std::string& error) {
        reply_.received = Clock::now();
        if (!error.empty()) {
            failed_ = error;
            reply_.error = error;
        }
        auto request = std::move(current_);
        if (request.done) request.done(reply_);
        next();
    }

    beast::tcp_stream stream_;
    std::string host_;
    std::string authorization_;
    std::chrono::seconds timeout_;
    std::deque<Request> queue_;
    bool busy_ = false;
    std::string failed_;
    Request current_;
    Reply reply_;
    http::request<http::string_body> request_;
    std::optional<http::response_parser<http::string_body>> parser_;
    beast::flat_buffer buffer_;
};

// The value after `"key":` in a compact JSON object, up to the next ',' or
// '}' (strings keep their quotes); empty when absent. Enough for the
// coordinator's flat replies, and it reads a world's rank without parsing
// its peers.
inline std::string_view json_field(std::string_view body, std::string_view key) {
    std::string pattern;
    pattern.reserve(key.size() + 3);
    pattern.append("\"").append(key).append("\":");
    const auto at = body.find(pattern);
    if (at == std::string_view::npos) return {};
    body.remove_prefix(at + pattern.size());
    while (!body.empty() && body.front() == ' ') body.remove_prefix(1);
    const auto end = body.find_first_of(",}");
    return body.substr(0, end);
}

}  // namespace bench
