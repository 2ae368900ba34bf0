// Which coordinator replica the client talks to: the leader it last heard
// of, moved on from when that one fails. With a list it tries the next
// entry; with etcd:// it reads the leader key again. A replica's
// X-Cohort-Leader answer moves it straight to the leader named. Shared by
// every call of one client (thread-safe); one connection pool per replica.
#pragma once

#include "coordinator/client/http_pool.hpp"
#include "coordinator/client/url_set.hpp"

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace cohort::etcd {
class EtcdClient;
}

namespace cohort::coord::client {

class LeaderFinder {
public:
    using Clock = std::chrono::steady_clock;

    LeaderFinder(UrlSet set, std::string token, HttpTls tls = {});
    ~LeaderFinder();
    LeaderFinder(const LeaderFinder&) = delete;
    LeaderFinder& operator=(const LeaderFinder&) = delete;

    struct Target {
        std::string url;
        HttpPool* pool;  // lives as long as the finder
    };
    // Where to send the next attempt. With etcd and no leader known, reads
    // the leader key first (bounded by `deadline`); nothing when that finds
    // no leader, and `why` says why.
    std::optional<Target> current(Clock::time_point deadline, std::string& why);
    // `from` answered 503 naming `leader`: the next attempt goes there.
    // False when `leader` is not an http://HOST:PORT URL (then treat the
    // answer as one without a leader).
    bool redirected(const std::string& from, const std::string& leader);
    // `url` did not answer, or answered that it is not the leader without
    // naming one: move on to the next in the list, or to etcd's leader key.
    void failed(const std::string& url);
    // `url` answered a request: it stays the one to ask.
    void answered(const std::string& url);

    // How many failures in a row try every replica once: the list's length,
    // 1 with etcd (each failure reads the leader key again).
    std::size_t sweep() const { return set_.etcd ? 1 : set_.urls.size(); }
    const UrlSet& set() const { return set_; }
    // The replica last answered or to be asked next; "" with etcd before
    // the leader key was read.
    std::string leader() const;

private:
    HttpPool* pool_for(const std::string& url);  // mutex_ held
    std::optional<std::string> read_leader_key(Clock::time_point deadline, std::string& why);

    const UrlSet set_;
    const std::string token_;
    const HttpTls tls_;
    std::unique_ptr<etcd::EtcdClient> etcd_;
    mutable std::mutex mutex_;
    std::string leader_;      // "" with etcd: read the key
    std::size_t index_ = 0;   // the list entry tried last
    std::mutex etcd_mutex_;   // one read of the leader key at a time
    std::map<std::string, std::unique_ptr<HttpPool>> pools_;
};

}  // namespace cohort::coord::client
