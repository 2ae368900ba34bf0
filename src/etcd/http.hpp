// The HTTP exchange with etcd's JSON gateway: a POST of one JSON message to
// the first endpoint that answers, with the auth token when the config has a
// user, and a stream of JSON messages for watches. Endpoints that fail are
// passed over; when none answers before the caller's deadline the call
// throws Error(unavailable) naming etcd and every endpoint tried.
#pragma once

#include "etcd/config.hpp"

#include <boost/json/object.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::etcd {

using Clock = std::chrono::steady_clock;

// Whether a request may be sent again when an endpoint failed after it was
// sent, so that etcd may or may not have applied it. Reads, puts of a fixed
// value and compare-and-swaps on a value are safe to send twice; an
// increment is not.
enum class Replay { safe, unsafe };

enum class StreamEnd {
    stopped,    // on_message returned false
    deadline,   // the deadline passed
    cancelled,  // *cancel became true
    broken,     // the stream ended or broke after it had started
};

class EtcdHttp {
public:
    explicit EtcdHttp(EtcdConfig config);
    EtcdHttp(const EtcdHttp&) = delete;
    EtcdHttp& operator=(const EtcdHttp&) = delete;
    ~EtcdHttp();

    // POSTs `body` to `path` ("/v3/kv/range") and returns etcd's reply.
    // `what` says what the call was for, in messages ("put of key 'a'").
    // etcd's own refusals become Error with the matching code
    // (permission_denied, not_found, invalid_argument, out_of_range).
    boost::json::object call(std::string_view path, const boost::json::object& body, Clock::time_point deadline,
                             Replay replay, std::string_view what);

    // POSTs `body` to a streaming path ("/v3/watch") and hands each JSON
    // message etcd sends to `on_message` until it returns false. Throws
    // Error(unavailable) when no endpoint accepted the stream before
    // `connect_deadline` (at the latest `deadline`); `cancel` (may be null)
    // stops it within about a second.
    StreamEnd stream(std::string_view path, const boost::json::object& body, Clock::time_point deadline,
                     Clock::time_point connect_deadline,
                     const std::function<bool(const boost::json::object&)>& on_message,
                     const std::atomic<bool>* cancel, std::string_view what);

    const EtcdConfig& config() const { return config_; }

private:
    struct Outcome;
    Outcome attempt(std::size_t endpoint, std::string_view path, const std::string& body, Clock::time_point deadline,
                    bool streaming, const std::function<bool(const boost::json::object&)>* on_message,
                    const std::atomic<bool>* cancel);
    boost::json::object exchange(std::string_view path, const boost::json::object& body, Clock::time_point deadline,
                                 Replay replay, std::string_view what, bool authenticating);
    std::string token(Clock::time_point deadline);
    std::string token_copy();
    void authenticate(const std::string& stale, Clock::time_point deadline);
    void* take();
    void give(void* handle);

    EtcdConfig config_;
    std::atomic<std::size_t> preferred_{0};
    std::mutex auth_mutex_;  // one authentication at a time
    std::mutex token_mutex_;
    std::string token_;
    bool auth_enabled_ = true;  // false once etcd said auth is off
    std::mutex pool_mutex_;
    std::vector<void*> idle_;  // CURL*
};

}  // namespace cohort::etcd
