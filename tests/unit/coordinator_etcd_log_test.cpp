// coordinator/replication against a real etcd: what the leader's LogWriter
// writes loads back as the same state (through snapshots too, with the log
// they replace deleted); heartbeats stay out of etcd; a writer whose fence
// no longer holds writes nothing and says so; catch_up() applies only what
// follows, and asks for a reload once a snapshot replaced it.
#include "../fixtures/etcd_cluster.hpp"
#include "coordinator/replication/log_writer.hpp"
#include "coordinator/state/json_parse.hpp"
#include "core/json_text.hpp"
#include "etcd/client.hpp"
#include "etcd/txn.hpp"

#include <cohort/error.hpp>

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

namespace cohort::coord::replication {
namespace {

using namespace std::chrono_literals;
using test::EtcdCluster;

std::shared_ptr<etcd::EtcdClient> client_for(const EtcdCluster& cluster) {
    etcd::EtcdConfig config;
    config.endpoints = {cluster.url(0)};
    return std::make_shared<etcd::EtcdClient>(config);
}

etcd::Clock::time_point soon() {
    return etcd::Clock::now() + 10s;
}

std::string text_of(const CoordinatorState& state) {
    return detail::to_text(state.snapshot());
}

// The leader key as a replica writes it: the fence is its create revision.
// As Replica's campaign does, a retried attempt (the first one timed out on
// a loaded machine after etcd applied it) finds its own value there: CI saw
// the plain check fail so.
int64_t take_leadership(etcd::EtcdClient& client, const EtcdLayout& layout) {
    const std::string value = R"({"id":"test","url":"http://x"})";
    etcd::Txn txn;
    txn.if_absent(layout.leader()).then_put(layout.leader(), value).else_get(layout.leader());
    const auto result = client.txn(txn, soon(), etcd::Replay::safe);
    if (result.succeeded) return result.revision;
    const bool ours = !result.responses.empty() && !result.responses[0].kvs.empty() &&
                      result.responses[0].kvs.front().value == value;
    EXPECT_TRUE(ours) << "the leader key is someone else's";
    return ours ? result.responses[0].kvs.front().create_revision : 0;
}

// What the writer reports, waited for.
class Reports {
public:
    Journal::DurableCallback callback() {
        return [this](uint64_t seq, std::exception_ptr failure) {
            std::lock_guard lock(mutex_);
            if (failure) {
                try {
                    std::rethrow_exception(failure);
                } catch (const std::exception& e) {
                    failure_ = e.what();
                }
            } else {
                durable_ = std::max(durable_, seq);
            }
            changed_.notify_all();
        };
    }
    bool wait_durable(uint64_t seq) {
        std::unique_lock lock(mutex_);
        return changed_.wait_for(lock, 10s, [&] { return durable_ >= seq; });
    }
    std::string wait_failure() {
        std::unique_lock lock(mutex_);
        changed_.wait_for(lock, 10s, [&] { return !failure_.empty(); });
        return failure_;
    }

private:
    std::mutex mutex_;
    std::condition_variable changed_;
    uint64_t durable_ = 0;
    std::string failure_;
};

// A two-node job with a dataset; every step writes the store and leases a
// shard (no heartbeats: those stay out of etcd).
class Workload {
public:
    void start(CoordinatorState& st) {
        JobSettings s;
        s.min_nodes = s.max_nodes = 2;
        s.failure_timeout = 1e6;
        st.create_job("j", s, t_);
        for (const char* id : {"a", "b"}) {
            Node n;
            n.id = id;
            n.host = std::string("host-") + id;
            n.address = std::string(id) + ":5000";
            st.join("j", n, t_);
        }
        DatasetPlan plan;
        for (int i = 0; i < 40; ++i) plan.shards.push_back(ShardSpec{"s" + std::to_string(i), 100u + i, {"host-a"}});
        plan.epochs = 3;
        plan.lease_duration = 1e6;
        st.register_dataset("j", plan, t_);
    }
    void step(CoordinatorState& st) {
        t_ += 0.1;
        const uint64_t gen = st.job("j").generation();
        st.store_set("j", gen, "key" + std::to_string(i_ % 5), "value " + std::to_string(i_), t_);
        st.store_add("j", gen, "count", 1, t_);
        const ShardLease next = st.next_shard("j", i_ % 2 == 0 ? "a" : "b", t_);
        if (next.granted && i_ % 3 != 0) st.shard_done("j", i_ % 2 == 0 ? "a" : "b", next.lease, t_);
        ++i_;
    }
    double now() const { return t_; }

private:
    double t_ = 1700000000.3;
    uint64_t i_ = 0;
};

TEST(CoordinatorEtcdLog, WhatTheLeaderWritesLoadsBack) {
    EtcdCluster cluster;
    auto client = client_for(cluster);
    const EtcdLayout layout = layout_for("/cohort/test-log/");
    EXPECT_EQ(layout.prefix, "/cohort/test-log");
    const int64_t fence = take_leadership(*client, layout);
    CoordinatorState state;
    Reports reports;
    LogWriterOptions options;
    options.snapshot_every = 0;
    options.entry_bytes = 600;  // several keys per commit
    LogWriter writer(client, layout, state, 0, fence, options, reports.callback());
    Workload w;
    w.start(state);
    writer.commit();
    for (int i = 0; i < 30; ++i) {
        w.step(state);
        writer.commit();
    }
    ASSERT_TRUE(reports.wait_durable(writer.queued_seq()));
    EXPECT_EQ(writer.stats().last_seq, writer.queued_seq());
    EXPECT_GT(writer.stats().syncs, 1u);

    const LoadedState loaded = load_state(*client, layout, soon());
    EXPECT_EQ(loaded.seq, writer.queued_seq());
    EXPECT_EQ(text_of(loaded.state), text_of(state));
    EXPECT_GT(client->get_prefix(layout.log_prefix(), soon()).kvs.size(), 31u);
}

TEST(CoordinatorEtcdLog, SnapshotsReplaceTheLogTheyCover) {
    EtcdCluster cluster;
    auto client = client_for(cluster);
    const EtcdLayout layout = layout_for("/cohort/test-snap");
    const int64_t fence = take_leadership(*client, layout);
    CoordinatorState state;
    Reports reports;
    LogWriterOptions options;
    options.snapshot_every = 4;
    options.chunk_bytes = 1000;  // several chunks
    LogWriter writer(client, layout, state, 0, fence, options, reports.callback());
    Workload w;
    w.start(state);
    writer.commit();
    for (int i = 0; i < 25; ++i) {
        w.step(state);
        writer.commit();
        // One log key per commit: snapshot_every counts keys.
        ASSERT_TRUE(reports.wait_durable(writer.queued_seq()));
    }
    ASSERT_TRUE(reports.wait_durable(writer.queued_seq()));
    writer.flush();
    const JournalStats stats = writer.stats();
    EXPECT_GT(stats.snapshots, 0u);
    EXPECT_GT(stats.snapshot_seq, 0u);

    // The log keys left are those after the newest snapshot; older
    // snapshots are gone.
    for (const auto& kv : client->get_prefix(layout.log_prefix(), soon()).kvs) {
        EXPECT_GT(log_seq(layout, kv.key), stats.snapshot_seq) << kv.key;
    }
    const auto chunks = client->get_prefix(layout.snapshot_prefix(), soon()).kvs;
    EXPECT_GT(chunks.size(), 1u);
    for (const auto& kv : chunks) {
        EXPECT_EQ(kv.key.rfind(layout.snapshot_chunk(stats.snapshot_seq, 0).substr(0, layout.snapshot_prefix().size() + 20), 0), 0u)
            << kv.key;
    }
    const LoadedState loaded = load_state(*client, layout, soon());
    EXPECT_EQ(loaded.seq, writer.queued_seq());
    EXPECT_EQ(text_of(loaded.state), text_of(state));
}

// Issue 19, defect 8: a snapshot is the snapshot thread's; an entry
// committed behind its marker is written and reported durable while the
// snapshot's chunks are still going out (before, the writer wrote them all
// first). 1,000-byte chunks of a state of about 300 KB: some 300 fenced
// transactions for the snapshot, one for the entry.
TEST(CoordinatorEtcdLog, ASnapshotInProgressHoldsNoEntry) {
    EtcdCluster cluster;
    auto client = client_for(cluster);
    const EtcdLayout layout = layout_for("/cohort/test-snap-thread");
    const int64_t fence = take_leadership(*client, layout);
    CoordinatorState state;
    Reports reports;
    LogWriterOptions options;
    options.snapshot_every = 0;
    options.chunk_bytes = 1000;
    LogWriter writer(client, layout, state, 0, fence, options, reports.callback());
    Workload w;
    w.start(state);
    const uint64_t gen = state.job("j").generation();
    for (int i = 0; i < 300; ++i) state.store_set("j", gen, "big" + std::to_string(i), std::string(1000, 'x'), w.now());
    writer.commit();
    ASSERT_TRUE(reports.wait_durable(writer.queued_seq()));
    ASSERT_EQ(writer.stats().snapshots, 0u);

    const uint64_t marked = writer.queued_seq();
    writer.snapshot();
    w.step(state);
    writer.commit();
    ASSERT_GT(writer.queued_seq(), marked);
    ASSERT_TRUE(reports.wait_durable(writer.queued_seq()));
    EXPECT_EQ(writer.stats().snapshots, 0u) << "the entry behind the marker waited for the snapshot";

    writer.flush();
    const JournalStats stats = writer.stats();
    EXPECT_EQ(stats.snapshots, 1u);
    // The snapshot is of the state at its marker; the entry after it stays
    // in the log and loads on top.
    EXPECT_EQ(stats.snapshot_seq, marked);
    const LoadedState loaded = load_state(*client, layout, soon());
    EXPECT_EQ(loaded.seq, writer.queued_seq());
    EXPECT_EQ(text_of(loaded.state), text_of(state));
}

TEST(CoordinatorEtcdLog, HeartbeatsStayOutOfEtcd) {
    EtcdCluster cluster;
    auto client = client_for(cluster);
    const EtcdLayout layout = layout_for("/cohort/test-hb");
    const int64_t fence = take_leadership(*client, layout);
    CoordinatorState state;
    Reports reports;
    LogWriter writer(client, layout, state, 0, fence, {}, reports.callback());
    Workload w;
    w.start(state);
    state.tick(w.now() + 1);
    writer.commit();
    const uint64_t after_start = writer.queued_seq();
    ASSERT_TRUE(reports.wait_durable(after_start));
    // Both join and a world forms: heartbeats now are liveness only.
    for (int i = 0; i < 5; ++i) {
        state.heartbeat("j", "a", state.job("j").generation(), std::nullopt, w.now() + i);
        writer.commit();
    }
    EXPECT_EQ(writer.queued_seq(), after_start);
    EXPECT_EQ(writer.answer_seq(), after_start);
    writer.flush();
    EXPECT_EQ(load_state(*client, layout, soon()).seq, after_start);
}

TEST(CoordinatorEtcdLog, ADeposedWriterWritesNothingAndSaysSo) {
    EtcdCluster cluster;
    auto client = client_for(cluster);
    const EtcdLayout layout = layout_for("/cohort/test-fence");
    const int64_t fence = take_leadership(*client, layout);
    CoordinatorState state;
    Reports reports;
    LogWriter writer(client, layout, state, 0, fence, {}, reports.callback());
    Workload w;
    w.start(state);
    writer.commit();
    ASSERT_TRUE(reports.wait_durable(writer.queued_seq()));
    const uint64_t kept = writer.queued_seq();

    // Another replica is elected: the key is deleted and created again.
    client->remove(layout.leader(), soon());
    take_leadership(*client, layout);
    w.step(state);
    writer.commit();
    const std::string failure = reports.wait_failure();
    EXPECT_NE(failure.find("deposed"), std::string::npos) << failure;
    EXPECT_NE(failure.find(std::to_string(fence)), std::string::npos) << failure;
    EXPECT_EQ(load_state(*client, layout, soon()).seq, kept);
    // Later commits are refused, not queued.
    w.step(state);
    try {
        writer.commit();
        ADD_FAILURE() << "a deposed writer took a commit";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::unavailable);
    }
}

TEST(CoordinatorEtcdLog, CatchUpAppliesWhatFollowsOrAsksForAReload) {
    EtcdCluster cluster;
    auto client = client_for(cluster);
    const EtcdLayout layout = layout_for("/cohort/test-catch");
    const int64_t fence = take_leadership(*client, layout);
    CoordinatorState state;
    Reports reports;
    LogWriterOptions options;
    options.snapshot_every = 0;
    LogWriter writer(client, layout, state, 0, fence, options, reports.callback());
    Workload w;
    w.start(state);
    writer.commit();
    ASSERT_TRUE(reports.wait_durable(writer.queued_seq()));
    LoadedState follower = load_state(*client, layout, soon());
    for (int i = 0; i < 5; ++i) {
        w.step(state);
        writer.commit();
    }
    ASSERT_TRUE(reports.wait_durable(writer.queued_seq()));
    EXPECT_TRUE(catch_up(*client, layout, follower.state, follower.seq, soon()));
    EXPECT_EQ(follower.seq, writer.queued_seq());
    EXPECT_EQ(text_of(follower.state), text_of(state));

    // A follower left behind a snapshot must reload.
    LoadedState behind = load_state(*client, layout, soon());
    w.step(state);
    writer.commit();
    writer.snapshot();
    writer.flush();
    EXPECT_FALSE(catch_up(*client, layout, behind.state, behind.seq, soon()));
    EXPECT_EQ(text_of(load_state(*client, layout, soon()).state), text_of(state));
}

TEST(CoordinatorEtcdLog, DamageIsNamed) {
    EtcdCluster cluster;
    auto client = client_for(cluster);
    const EtcdLayout layout = layout_for("/cohort/test-damage");
    client->put(layout.log_key(1), "{\"seq\":1,\"event\":{}}\n", 0, soon());
    try {
        load_state(*client, layout, soon());
        ADD_FAILURE() << "a damaged entry loaded";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::parse);
        EXPECT_NE(std::string(e.what()).find(layout.log_key(1)), std::string::npos) << e.what();
    }
    client->remove(layout.log_key(1), soon());
    client->put(layout.snapshot_head(), R"({"seq":5,"chunks":2})", 0, soon());
    try {
        load_state(*client, layout, soon());
        ADD_FAILURE() << "a snapshot without its chunks loaded";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::parse);
        EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos) << e.what();
    }
    EXPECT_THROW(layout_for("relative"), Error);
    EXPECT_THROW(layout_for("/"), Error);
}

}  // namespace
}  // namespace cohort::coord::replication
