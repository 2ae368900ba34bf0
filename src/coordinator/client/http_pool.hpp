// The client's HTTP layer: libcurl easy handles kept in a pool so each
// finished exchange leaves its connection open for the next (keep-alive),
// and overlapping calls each get a handle of their own.
#pragma once

#include <chrono>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::coord::client {

struct HttpReply {
    long status = 0;
    std::string body;
    // The X-Cohort-Leader header: where a replica that is not the leader
    // says the leader is (docs/coordinator.md); empty when absent.
    std::string leader;
};

// The exchange failed below HTTP (refused, reset, timed out, ...): worth
// retrying.
class TransportError : public std::runtime_error {
public:
    TransportError(std::string message, bool timed_out)
        : std::runtime_error(std::move(message)), timed_out_(timed_out) {}
    bool timed_out() const noexcept { return timed_out_; }

private:
    bool timed_out_;
};

// For https:// URLs: the CA file that checks the server (empty: the
// system's CAs), and the certificate and key offered for mutual TLS
// (empty: none). PEM files; ignored for http://.
struct HttpTls {
    std::string ca_file, cert_file, key_file;
};

class HttpPool {
public:
    // base_url: "http://HOST:PORT" or "https://HOST:PORT" without a
    // trailing '/'.
    HttpPool(std::string base_url, std::string token, HttpTls tls = {});
    HttpPool(const HttpPool&) = delete;
    HttpPool& operator=(const HttpPool&) = delete;
    ~HttpPool();

    // One exchange bounded by `timeout`; `target` is the path and query;
    // `idempotency_key`, when not empty, goes in the Idempotency-Key header.
    // Throws TransportError when no HTTP answer came back.
    HttpReply perform(std::string_view method, const std::string& target, std::string_view body,
                      std::string_view content_type, std::chrono::milliseconds timeout,
                      std::string_view idempotency_key = {});

private:
    void* take();
    void give(void* handle);

    std::string base_url_;
    std::string authorization_;
    HttpTls tls_;
    std::mutex mutex_;
    std::vector<void*> idle_;  // CURL*
};

// A fresh random key for one call's Idempotency-Key: 128 bits as 32 hex
// digits.
std::string new_idempotency_key();

// Path segment escaping: everything but A-Z a-z 0-9 - . _ ~ becomes %XX.
std::string percent_encode(std::string_view text);

}  // namespace cohort::coord::client
