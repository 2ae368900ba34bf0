// A lease kept alive by a thread of its own: keys attached to it live while
// the holder does, and go TTL seconds after it stops (a crash included).
#pragma once

#include "etcd/client.hpp"

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace cohort::etcd {

class LeaseKeeper {
public:
    // Refreshes `lease` every third of `ttl`. When etcd says the lease is
    // gone, or no refresh got through for a whole TTL, the lease is lost:
    // lost() turns true and `on_lost` (may be empty) is called once, on the
    // keeper's thread, with the reason.
    LeaseKeeper(std::shared_ptr<EtcdClient> client, Lease lease, std::function<void(const std::string&)> on_lost = {});
    LeaseKeeper(const LeaseKeeper&) = delete;
    LeaseKeeper& operator=(const LeaseKeeper&) = delete;
    // Stops refreshing; the lease then expires by itself (revoke() ends it
    // at once).
    ~LeaseKeeper();

    int64_t id() const { return lease_.id; }
    std::chrono::seconds ttl() const { return std::chrono::seconds(lease_.ttl); }
    bool lost() const;
    std::string lost_reason() const;
    // Stops refreshing and deletes the lease with its keys.
    void revoke(Clock::time_point deadline);

private:
    void run();
    void stop();

    std::shared_ptr<EtcdClient> client_;
    Lease lease_;
    std::function<void(const std::string&)> on_lost_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    bool stopping_ = false;
    std::string lost_;
    std::thread thread_;
};

}  // namespace cohort::etcd
