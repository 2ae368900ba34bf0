// A small HTTP/1.1 client for the coordinator tests: one keep-alive
// connection to 127.0.0.1, every call bounded by a timeout.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <chrono>
#include <cstdint>
#include <string>

namespace cohort::test {

struct HttpReply {
    unsigned status = 0;
    std::string body;
    std::string content_type;
    std::string leader;  // X-Cohort-Leader: a follower's pointer to the leader
};

class HttpClient {
public:
    explicit HttpClient(uint16_t port, std::string token = {}) : stream_(io_), token_(std::move(token)) {
        stream_.expires_after(std::chrono::seconds(5));
        stream_.connect(boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port));
    }

    HttpReply call(boost::beast::http::verb method, const std::string& target, const std::string& body = {}) {
        namespace http = boost::beast::http;
        http::request<http::string_body> request(method, target, 11);
        request.set(http::field::host, "127.0.0.1");
        if (!token_.empty()) request.set(http::field::authorization, "Bearer " + token_);
        if (!body.empty() || method == http::verb::post) {
            request.set(http::field::content_type, "application/json");
            request.body() = body;
        }
        request.prepare_payload();
        stream_.expires_after(std::chrono::seconds(5));
        http::write(stream_, request);
        http::response<http::string_body> response;
        stream_.expires_after(std::chrono::seconds(10));
        http::read(stream_, buffer_, response);
        return {response.result_int(), response.body(), std::string(response[http::field::content_type]),
                std::string(response["X-Cohort-Leader"])};
    }
    HttpReply get(const std::string& target) { return call(boost::beast::http::verb::get, target); }
    HttpReply post(const std::string& target, const std::string& body) {
        return call(boost::beast::http::verb::post, target, body);
    }

private:
    boost::asio::io_context io_;
    boost::beast::tcp_stream stream_;
    boost::beast::flat_buffer buffer_;
    std::string token_;
};

}  // namespace cohort::test
