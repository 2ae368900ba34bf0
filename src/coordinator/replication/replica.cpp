#include "coordinator/replication/replica.hpp"

#include "etcd/client.hpp"
#include "etcd/txn.hpp"
#include "etcd/watch.hpp"

#include <cohort/error.hpp>

#include <boost/json.hpp>

#include <pthread.h>

#include <cstdio>

#include <fmt/format.h>

namespace cohort::coord::replication {

namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr auto kCall = std::chrono::seconds(2);    // one etcd call
constexpr auto kLoad = std::chrono::seconds(10);  // reading the whole state

int64_t ticks(SteadyClock::time_point t) {
    return t.time_since_epoch().count();
}

std::string url_of(const std::string& leader_value) {
    try {
        const auto v = boost::json::parse(leader_value);
        if (const auto* url = v.as_object().if_contains("url"); url != nullptr && url->is_string()) {
            return std::string(url->get_string());
        }
    } catch (const std::exception&) {
    }
    return {};
}

}  // namespace

Replica::Replica(ReplicaOptions options, ReplicaEvents events)
    : options_(std::move(options)),
      events_(std::move(events)),
      layout_(layout_for(options_.prefix)),
      client_(std::make_shared<etcd::EtcdClient>(options_.etcd)) {
    if (options_.id.empty() || options_.url.empty()) {
        throw Error(Errc::invalid_argument, "coordinator replica: give it an id and the URL clients reach it at");
    }
    if (options_.lease_ttl < std::chrono::seconds(1)) {
        throw Error(Errc::invalid_argument,
                    fmt::format("coordinator replica: the leader lease TTL must be at least 1 s, not {} s",
                                options_.lease_ttl.count()));
    }
    thread_ = std::thread([this] { run(); });
    ::pthread_setname_np(thread_.native_handle(), "cohort-replica");
}

Replica::~Replica() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    cancel_watch_ = true;
    wake_.notify_all();
    thread_.join();
}

SteadyClock::time_point Replica::lease_confirmed_until() const {
    return SteadyClock::time_point(SteadyClock::duration(confirmed_until_.load()));
}

std::string Replica::last_etcd_error() const {
    std::lock_guard lock(mutex_);
    return last_error_;
}

void Replica::deposed(std::string why) {
    {
        std::lock_guard lock(mutex_);
        if (deposed_.empty()) deposed_ = std::move(why);
    }
    wake_.notify_all();
}

bool Replica::stopping() const {
    std::lock_guard lock(mutex_);
    return stop_;
}

void Replica::pause(std::chrono::milliseconds ms) {
    std::unique_lock lock(mutex_);
    wake_.wait_for(lock, ms, [&] { return stop_; });
}

void Replica::note_error(const std::exception& e) {
    const auto* error = dynamic_cast<const Error*>(&e);
    if (error == nullptr || error->code() == Errc::unavailable || error->code() == Errc::timeout) reachable_ = false;
    std::lock_guard lock(mutex_);
    if (last_error_ != e.what()) std::fprintf(stderr, "cohort-coordinator: etcd: %s\n", e.what());
    last_error_ = e.what();
}

std::string Replica::leader_value() const {
    const double since =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    return boost::json::serialize(boost::json::object{{"id", options_.id}, {"url", options_.url}, {"since", since}});
}

void Replica::load_hot_copy() {
    hot_ = load_state(*client_, layout_, etcd::Clock::now() + kLoad);
    reachable_ = true;
}

void Replica::run() {
    while (!stopping()) {
        try {
            if (!hot_) load_hot_copy();
            if (lease_.id == 0) {
                const auto sent = SteadyClock::now();
                lease_ = client_->grant_lease(options_.lease_ttl, etcd::Clock::now() + kCall);
                confirmed_until_ = ticks(sent + std::chrono::seconds(lease_.ttl));
                reachable_ = true;
            }
            const int64_t fence = follow_and_campaign();
            if (fence == 0) continue;
            LoadedState loaded = std::move(*hot_);
            hot_.reset();
            {
                std::lock_guard lock(mutex_);
                deposed_.clear();
            }
            events_.promoted(std::move(loaded), fence);
            const std::string why = lead();
            events_.demoted(why);
            // Still ours, the key goes now rather than at the lease's end.
            try {
                client_->revoke_lease(lease_.id, etcd::Clock::now() + std::chrono::seconds(1));
            } catch (const std::exception&) {
            }
            lease_ = {};
        } catch (const std::exception& e) {
            note_error(e);
            const auto* error = dynamic_cast<const Error*>(&e);
            // A damaged record or a gap: read everything again.
            if (error != nullptr && error->code() == Errc::parse) hot_.reset();
            pause(std::chrono::milliseconds(250));
        }
    }
    if (lease_.id != 0) {
        try {
            client_->revoke_lease(lease_.id, etcd::Clock::now() + std::chrono::seconds(1));
        } catch (const std::exception&) {
        }
    }
}

int64_t Replica::follow_and_campaign() {
    const auto refresh_every = std::chrono::duration_cast<std::chrono::milliseconds>(options_.lease_ttl) / 3;
    for (;;) {
        if (stopping()) return 0;
        etcd::Txn campaign;
        campaign.if_absent(layout_.leader())
            .then_put(layout_.leader(), leader_value(), lease_.id)
            .else_get(layout_.leader());
        const etcd::TxnResult won = client_->txn(campaign, etcd::Clock::now() + kCall, etcd::Replay::safe);
        reachable_ = true;
        int64_t fence = 0;
        if (won.succeeded) {
            fence = won.revision;
        } else if (!won.responses.empty() && !won.responses[0].kvs.empty()) {
            const etcd::KeyValue& kv = won.responses[0].kvs.front();
            // A retried campaign whose first attempt won.
            if (kv.lease == lease_.id) fence = kv.create_revision;
            else if (events_.leader) events_.leader(url_of(kv.value));
        }
        if (fence != 0) {
            // The old leader can write no more: what etcd holds now is final.
            if (!catch_up(*client_, layout_, hot_->state, hot_->seq, etcd::Clock::now() + kLoad)) load_hot_copy();
            return fence;
        }

        // Follow: apply the log, and watch the leader key go.
        bool free = false, reload = false;
        const auto on_batch = [&](const etcd::WatchBatch& batch) {
            if (batch.compact_revision > 0) {
                reload = true;
                return false;
            }
            for (const etcd::Event& e : batch.events) {
                hot_->revision = std::max(hot_->revision, e.kv.mod_revision);
                if (e.kv.key == layout_.leader()) {
                    if (e.type == etcd::Event::Type::remove) free = true;
                    else if (events_.leader) events_.leader(url_of(e.kv.value));
                } else if (e.type == etcd::Event::Type::put && log_seq(layout_, e.kv.key) != 0) {
                    if (!apply_entry(layout_, e.kv, hot_->state, hot_->seq)) reload = true;
                }
            }
            return !free && !reload && !stopping();
        };
        while (!free && !reload && !stopping()) {
            const auto until = etcd::Clock::now() + refresh_every;
            etcd::watch(*client_, etcd::watch_prefix(layout_.prefix + "/", hot_->revision + 1), until,
                        std::min(until, etcd::Clock::now() + kCall), on_batch, &cancel_watch_);
            reachable_ = true;
            // The follower's lease too stays alive, ready for a campaign.
            const auto sent = SteadyClock::now();
            const int64_t ttl = client_->keep_alive_once(lease_.id, etcd::Clock::now() + kCall);
            if (ttl <= 0) {
                lease_ = client_->grant_lease(options_.lease_ttl, etcd::Clock::now() + kCall);
                confirmed_until_ = ticks(SteadyClock::now() + std::chrono::seconds(lease_.ttl));
            } else {
                confirmed_until_ = ticks(sent + std::chrono::seconds(ttl));
            }
        }
        if (free && events_.leader) events_.leader("");
        if (reload) load_hot_copy();
    }
}

std::string Replica::lead() {
    const auto refresh_every = std::chrono::duration_cast<std::chrono::milliseconds>(options_.lease_ttl) / 3;
    // A call that timed out well past its deadline was stopped mid-way (a
    // SIGSTOP, a paused VM): it says nothing about etcd, which may well be
    // fine and have let the lease go meanwhile. It is made again at once,
    // and etcd is called unreachable only if that one fails too; else the
    // woken leader would answer as the leader of an etcd that is away
    // instead of hearing that it no longer leads. A call that failed on
    // time is not repeated, so an etcd that is down is known as soon.
    constexpr auto kLate = std::chrono::milliseconds(250);
    bool again = false;
    for (;;) {
        {
            std::unique_lock lock(mutex_);
            wake_.wait_for(lock, again ? std::chrono::milliseconds(0) : refresh_every,
                           [&] { return stop_ || !deposed_.empty(); });
            if (stop_) return "the coordinator is stopping";
            if (!deposed_.empty()) return deposed_;
        }
        const auto sent = SteadyClock::now();
        try {
            const int64_t ttl = client_->keep_alive_once(lease_.id, etcd::Clock::now() + kCall);
            reachable_ = true;
            if (ttl <= 0) {
                return fmt::format("etcd no longer has this replica's lease {:x}: it was not refreshed for its "
                                   "TTL of {} s (a pause, or a cut from etcd, that long)",
                                   lease_.id, lease_.ttl);
            }
            confirmed_until_ = ticks(sent + std::chrono::seconds(ttl));
            again = false;
        } catch (const std::exception& e) {
            const auto* error = dynamic_cast<const Error*>(&e);
            if (error == nullptr || (error->code() != Errc::unavailable && error->code() != Errc::timeout)) {
                return fmt::format("etcd refused to refresh this replica's lease: {}", e.what());
            }
            again = !again && reachable_ && SteadyClock::now() - (sent + kCall) > kLate;
            if (again) continue;
            // etcd is away: nobody else can be elected meanwhile; the
            // server answers reads and refuses changes until it is back.
            note_error(e);
        }
    }
}

}  // namespace cohort::coord::replication
