// LeaseKeeper's thread: a keep-alive each third of the TTL, more often once
// one has failed, until the lease is lost or the keeper stops.
#include "etcd/lease.hpp"

#include <cohort/error.hpp>

#include <fmt/format.h>

namespace cohort::etcd {

LeaseKeeper::LeaseKeeper(std::shared_ptr<EtcdClient> client, Lease lease,
                         std::function<void(const std::string&)> on_lost)
    : client_(std::move(client)), lease_(lease), on_lost_(std::move(on_lost)), thread_([this] { run(); }) {}

LeaseKeeper::~LeaseKeeper() { stop(); }

void LeaseKeeper::stop() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

bool LeaseKeeper::lost() const {
    std::lock_guard lock(mutex_);
    return !lost_.empty();
}

std::string LeaseKeeper::lost_reason() const {
    std::lock_guard lock(mutex_);
    return lost_;
}

void LeaseKeeper::revoke(Clock::time_point deadline) {
    stop();
    client_->revoke_lease(lease_.id, deadline);
}

void LeaseKeeper::run() {
    using namespace std::chrono;
    const auto ttl = seconds(std::max<int64_t>(lease_.ttl, 1));
    const auto period = duration_cast<milliseconds>(ttl) / 3;
    // The lease is good until this, as far as this side knows.
    auto good_until = Clock::now() + ttl;
    auto next = Clock::now() + period;
    std::string reason;
    for (;;) {
        {
            std::unique_lock lock(mutex_);
            if (wake_.wait_until(lock, next, [&] { return stopping_; })) return;
        }
        try {
            // Short enough that stopping the keeper never waits long on an
            // etcd that hangs.
            const int64_t left = client_->keep_alive_once(
                lease_.id, std::min({good_until, Clock::now() + period, Clock::now() + milliseconds(2000)}));
            if (left <= 0) {
                reason = fmt::format("etcd lease {} expired or was revoked", lease_.id);
                break;
            }
            good_until = Clock::now() + seconds(left);
            next = Clock::now() + period;
        } catch (const Error& e) {
            if (Clock::now() >= good_until) {
                reason = fmt::format("etcd lease {} was not refreshed for its whole TTL of {} s: {}", lease_.id,
                                     ttl.count(), e.what());
                break;
            }
            next = Clock::now() + std::min(period, milliseconds(200));
        }
    }
    {
        std::lock_guard lock(mutex_);
        lost_ = reason;
    }
    if (on_lost_) on_lost_(reason);
}

}  // namespace cohort::etcd
