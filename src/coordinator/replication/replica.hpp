// One replica of an etcd-backed coordinator: it follows the leader's log,
// campaigns for the leader key when it is free, and leads until its lease
// is lost or its fenced writes fail (docs/coordinator.md, "High
// availability").
//
// Election: every replica holds an etcd lease (ttl, refreshed every third
// of it) and tries a transaction "if PREFIX/leader is absent, put it with my
// lease". The winner's fence is the revision that created the key; every
// write it makes requires the key's create_revision to still be that
// (log_writer.hpp). When the leader dies its lease expires (ttl after its
// last refresh) and etcd deletes the key; the followers, watching it, try
// again at once. A leader that stops cleanly revokes its lease, which hands
// over at once.
//
// Followers keep a hot copy of the state: they load the snapshot and the log,
// then watch the prefix and apply each log entry. Winning the election
// costs only a catch-up read of the entries the watch has not delivered yet.
//
// Threads: the replica runs on a thread of its own; it reports to the
// server through ReplicaEvents (called on that thread: the server posts them
// to its own).
#pragma once

#include "coordinator/replication/etcd_log.hpp"
#include "etcd/config.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace cohort::coord::replication {

struct ReplicaOptions {
    etcd::EtcdConfig etcd;
    std::string prefix = "/cohort/coordinator";
    std::string id;   // unique among the replicas; shown in the leader key
    std::string url;  // where clients reach this replica
    // The leader's lease: a dead leader is replaced about this long after
    // its last refresh. etcd rounds it up to whole seconds and to its own
    // minimum (about 1.5 s with default etcd settings).
    std::chrono::seconds lease_ttl{2};
};

struct ReplicaEvents {
    // This replica leads from now on: `loaded` is the state etcd holds (the
    // log up to loaded.seq applied), `fence` the leader key's create revision.
    std::function<void(LoadedState loaded, int64_t fence)> promoted;
    // It leads no more (lease lost, fenced, or stopping): `why` says which.
    std::function<void(std::string why)> demoted;
    // The leader's URL as the leader key says (empty during an election).
    std::function<void(std::string url)> leader;
};

enum class ReplicaRole { follower, leader };

class Replica {
public:
    // Starts the replica's thread. Error(invalid_argument) for bad options.
    Replica(ReplicaOptions options, ReplicaEvents events);
    Replica(const Replica&) = delete;
    Replica& operator=(const Replica&) = delete;
    // A leader revokes its lease, so another replica takes over at once.
    ~Replica();

    const std::shared_ptr<etcd::EtcdClient>& client() const { return client_; }
    const EtcdLayout& layout() const { return layout_; }
    const ReplicaOptions& options() const { return options_; }

    // Until when etcd has confirmed this replica's lease (the last refresh
    // that got through, from when it was sent, plus the TTL): past it, a
    // leader cannot know whether another replica leads.
    std::chrono::steady_clock::time_point lease_confirmed_until() const;
    // False when the last call to etcd failed to reach it.
    bool etcd_reachable() const { return reachable_.load(); }
    std::string last_etcd_error() const;
    // From the server: a fenced write failed; step down.
    void deposed(std::string why);

private:
    void run();
    // Follows until the leader key is free and this replica wins it: then
    // returns the fence. Returns 0 when stopping.
    int64_t follow_and_campaign();
    // Keeps the lease while leading; returns why leadership ended.
    std::string lead();
    bool stopping() const;
    void pause(std::chrono::milliseconds ms);
    void note_error(const std::exception& e);
    // The hot copy: loaded once, then kept current by the watch.
    void load_hot_copy();
    std::string leader_value() const;

    ReplicaOptions options_;
    ReplicaEvents events_;
    EtcdLayout layout_;
    std::shared_ptr<etcd::EtcdClient> client_;

    mutable std::mutex mutex_;
    std::condition_variable wake_;
    bool stop_ = false;
    std::string deposed_;
    std::string last_error_;
    std::atomic<bool> reachable_{true};
    std::atomic<int64_t> confirmed_until_{0};  // steady_clock ticks

    etcd::Lease lease_;
    std::optional<LoadedState> hot_;
    std::atomic<bool> cancel_watch_{false};
    std::thread thread_;
};

}  // namespace cohort::coord::replication
