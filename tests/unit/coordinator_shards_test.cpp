// coordinator/state: dynamic data shards. Leases expire and return, a
// failed member's leases return, and a shard counts done once however many
// workers report it.
#include "coordinator/state/json_parse.hpp"
#include "coordinator/state/state.hpp"
#include "core/json_text.hpp"

#include <cohort/epoch.hpp>
#include <cohort/shards.hpp>

#include "coordinator_support.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cohort::coord {
namespace {

using testing::expect_error;
using testing::expect_replays;

Node node(std::string id, std::string host = "") {
    Node n;
    n.id = std::move(id);
    n.host = std::move(host);
    return n;
}



DatasetPlan plan(std::size_t shards, uint32_t epochs, double lease = 60) {
    DatasetPlan p;
    for (std::size_t i = 0; i < shards; ++i) p.shards.push_back(ShardSpec{"s" + std::to_string(i), 1000 + i, {}});
    p.epochs = epochs;
    p.lease_duration = lease;
    return p;
}

class CoordinatorShards : public ::testing::Test {
protected:
    void SetUp() override {
        JobSettings s;
        s.min_nodes = s.max_nodes = 2;
        s.failure_timeout = 1000;  // these tests are about leases, not heartbeats
        state.create_job("j", s, t);
        state.join("j", node("a", "h1"), t);
        state.join("j", node("b", "h2"), t);
    }
    void TearDown() override { expect_replays(state); }
    ShardLease next(std::string_view member) {
        const ShardLease n = state.next_shard("j", member, t);
        EXPECT_TRUE(n.granted) << member << " got no shard";
        return n;
    }
    EpochProgress progress(uint32_t epoch) const { return state.job("j").shards()->progress()[epoch]; }

    CoordinatorState state;
    double t = 50.0;
};

TEST_F(CoordinatorShards, LeasesInPlanOrderAndFinish) {
    expect_error([&] { state.next_shard("j", "a", t); }, Errc::not_found,
                 "job 'j' has no dataset plan (register one first)");
    state.register_dataset("j", plan(3, 2), t);
    state.register_dataset("j", plan(3, 2), t);  // the same plan again: nothing happens
    expect_error([&] { state.register_dataset("j", plan(4, 2), t); }, Errc::mismatch,
                 "job 'j' already has a dataset plan (3 shards, 2 epochs); a job's plan cannot change");

    const ShardLease g0 = next("a");
    EXPECT_EQ(g0.shard_id, "s0");
    EXPECT_EQ(g0.epoch, 0u);
    EXPECT_EQ(g0.bytes, 1000u);
    EXPECT_EQ(g0.expiry, t + 60);
    EXPECT_EQ(next("b").shard_id, "s1");
    EXPECT_EQ(state.shard_done("j", "a", g0.lease, t).outcome, "counted");
    const EpochProgress p = progress(0);
    EXPECT_EQ(p.done, 1u);
    EXPECT_EQ(p.leased, 1u);
    EXPECT_EQ(p.todo, 1u);

    // Drain both epochs.
    for (int i = 0; i < 10; ++i) {
        const ShardLease n = state.next_shard("j", "a", t);
        if (!n.granted) break;
        state.shard_done("j", "a", n.lease, t);
    }
    // b still holds s1 of epoch 0; a has done everything else, epoch 1 included.
    EXPECT_EQ(progress(0).done, 2u);
    EXPECT_EQ(progress(1).done, 3u);
    const ShardLease nothing_now = state.next_shard("j", "a", t);
    EXPECT_FALSE(nothing_now.granted);
    EXPECT_FALSE(nothing_now.finished);
    state.shard_done("j", "b", 2, t);
    EXPECT_TRUE(state.next_shard("j", "a", t).finished);
    EXPECT_TRUE(state.job("j").shards()->finished());
}

TEST_F(CoordinatorShards, ExpiredLeaseGoesBackToTheQueueFirst) {
    state.register_dataset("j", plan(3, 1, 30), t);
    const ShardLease g = next("a");  // s0, expires at 80
    state.tick(79.999);
    EXPECT_EQ(state.job("j").shards()->leases().size(), 1u);
    t = 80;
    state.tick(t);
    EXPECT_TRUE(state.job("j").shards()->leases().empty());
    EXPECT_EQ(progress(0).todo, 3u);
    EXPECT_EQ(next("b").shard_id, "s0");  // returned shards come first
    EXPECT_EQ(next("b").shard_id, "s1");
    EXPECT_EQ(state.job("j").shards()->counters().requeued, 1u);
    (void)g;
}

TEST_F(CoordinatorShards, FailedMembersLeasesAreReassigned) {
    state.register_dataset("j", plan(4, 1), t);
    next("a");
    next("a");
    next("b");
    t = 60;
    state.leave("j", "a", t);  // the same happens when a member fails
    EXPECT_EQ(progress(0).leased, 1u);
    EXPECT_EQ(next("b").shard_id, "s0");
    EXPECT_EQ(next("b").shard_id, "s1");
    EXPECT_EQ(next("b").shard_id, "s3");
}

TEST_F(CoordinatorShards, LateReportAfterReassignmentCountsOnce) {
    state.register_dataset("j", plan(2, 1, 10), t);
    const ShardLease slow = next("a");  // s0
    t = 60;
    state.tick(t);
    const ShardLease fast = next("b");  // s0 again
    ASSERT_EQ(fast.shard, slow.shard);
    EXPECT_EQ(state.shard_done("j", "b", fast.lease, t).outcome, "counted");
    EXPECT_EQ(state.shard_done("j", "a", slow.lease, t).outcome, "already_done");
    EXPECT_EQ(state.shard_done("j", "a", slow.lease, t).outcome, "already_done");  // and again
    EXPECT_EQ(progress(0).done, 1u);
    EXPECT_EQ(state.job("j").shards()->counters().duplicate, 2u);
}

TEST_F(CoordinatorShards, LateReportBeforeTheNewHolderCountsOnce) {
    state.register_dataset("j", plan(2, 1, 10), t);
    const ShardLease slow = next("a");
    t = 60;
    state.tick(t);
    const ShardLease fast = next("b");
    EXPECT_EQ(state.shard_done("j", "a", slow.lease, t).outcome, "counted_late");
    EXPECT_EQ(state.shard_done("j", "b", fast.lease, t).outcome, "already_done");
    EXPECT_EQ(progress(0).done, 1u);
    EXPECT_EQ(progress(0).leased, 0u);
    // The late report took s0 out of the queue; s1 is next.
    EXPECT_EQ(next("a").shard_id, "s1");
    // A late report of a shard still waiting in the queue also removes it.
    t = 80;
    state.tick(t);  // s1's lease expires: back in the queue
    EXPECT_EQ(state.shard_done("j", "a", 3, t).outcome, "counted_late");
    EXPECT_TRUE(state.next_shard("j", "b", t).finished);
}

TEST_F(CoordinatorShards, ReportsAreChecked) {
    state.register_dataset("j", plan(2, 1), t);
    const ShardLease g = next("a");
    expect_error([&] { state.shard_done("j", "b", g.lease, t); }, Errc::invalid_argument,
                 "job 'j': lease 1 (shard 's0', epoch 0) was granted to 'a', not 'b'");
    expect_error([&] { state.shard_done("j", "a", 99, t); }, Errc::not_found, "job 'j' never granted lease 99");
    expect_error([&] { state.shard_done("j", "zed", g.lease, t); }, Errc::not_found, "job 'j' has no member 'zed'");
    state.join("j", node("c"), t);  // waits: a full world
    expect_error([&] { state.next_shard("j", "c", t); }, Errc::unavailable,
                 "node 'c' is waiting; shards go to members of the running world");
}

// A member gives a lease back unread: its shard is the next one out, to any
// member, and only an outstanding lease of its own can be given back.
TEST_F(CoordinatorShards, ReleasedLeaseGoesToTheNextMemberAtOnce) {
    state.register_dataset("j", plan(3, 1), t);
    const ShardLease first = next("a");   // s0
    const ShardLease second = next("a");  // s1
    const ShardRelease r = state.shard_release("j", "a", second.lease, t);
    EXPECT_EQ(r.outcome, "released");
    EXPECT_TRUE(r.released);
    EXPECT_EQ(progress(0).leased, 1u);
    EXPECT_EQ(progress(0).todo, 2u);
    EXPECT_EQ(next("b").shard_id, "s1");  // returned shards first, no expiry waited for
    EXPECT_EQ(next("b").shard_id, "s2");
    const ShardCounters& c = state.job("j").shards()->counters();
    EXPECT_EQ(c.released, 1u);
    EXPECT_EQ(c.requeued, 1u);
    // Given back again, or after it was reported: nothing changes.
    EXPECT_EQ(state.shard_release("j", "a", second.lease, t).outcome, "requeued");
    EXPECT_FALSE(state.shard_release("j", "a", second.lease, t).released);
    EXPECT_EQ(state.shard_done("j", "a", first.lease, t).outcome, "counted");
    EXPECT_EQ(state.shard_release("j", "a", first.lease, t).outcome, "reported");
    EXPECT_EQ(state.job("j").shards()->counters().released, 1u);
    // The holder's late report of a lease it gave back still counts once.
    EXPECT_EQ(state.shard_done("j", "a", second.lease, t).outcome, "counted_late");
    EXPECT_EQ(progress(0).done, 2u);
}

TEST_F(CoordinatorShards, ReleaseIsChecked) {
    state.register_dataset("j", plan(3, 1, 10), t);
    const ShardLease g = next("a");
    expect_error([&] { state.shard_release("j", "b", g.lease, t); }, Errc::invalid_argument,
                 "job 'j': lease 1 (shard 's0', epoch 0) was granted to 'a', not 'b'");
    expect_error([&] { state.shard_release("j", "a", 0, t); }, Errc::not_found, "job 'j' never granted lease 0");
    expect_error([&] { state.shard_release("j", "a", 7, t); }, Errc::not_found, "job 'j' never granted lease 7");
    expect_error([&] { state.shard_release("j", "zed", g.lease, t); }, Errc::not_found,
                 "job 'j' has no member 'zed'");
    expect_error([&] { state.shard_release("nope", "a", g.lease, t); }, Errc::not_found, "nope");
    EXPECT_EQ(state.job("j").shards()->leases().size(), 1u);  // nothing changed
    // An expired lease was requeued by the coordinator already.
    t = 61;
    state.tick(t);
    EXPECT_EQ(state.shard_release("j", "a", g.lease, t).outcome, "requeued");
    EXPECT_EQ(state.job("j").shards()->counters().released, 0u);
}

// The counter survives a snapshot; a snapshot from before release has none.
TEST_F(CoordinatorShards, ReleasedCounterInTheSnapshot) {
    state.register_dataset("j", plan(3, 1), t);
    state.shard_release("j", "a", next("a").lease, t);
    boost::json::object q = state.job("j").shards()->to_json();
    EXPECT_EQ(q.at("counters").at("released").as_uint64(), 1u);
    EXPECT_EQ(ShardQueue::from_json(q, "queue").counters().released, 1u);
    q["counters"].as_object().erase("released");
    EXPECT_EQ(ShardQueue::from_json(q, "queue").counters().released, 0u);
}

TEST_F(CoordinatorShards, EpochsAreShuffledReproducibly) {
    DatasetPlan p = plan(8, 2);
    p.shuffle = true;
    p.seed = 7;
    state.register_dataset("j", p, t);
    std::vector<uint64_t> first;
    for (int i = 0; i < 8; ++i) {
        const ShardLease g = next("a");
        first.push_back(g.shard);
        state.shard_done("j", "a", g.lease, t);
    }
    EXPECT_EQ(first, epoch_permutation(8, 7, 0));
    EXPECT_EQ(next("a").epoch, 1u);
}

TEST_F(CoordinatorShards, PlacedShardsGoToTheirHostFirst) {
    DatasetPlan p = plan(4, 1);
    p.shards[2].hosts = {"h2"};
    p.shards[3].hosts = {"h1"};
    state.register_dataset("j", p, t);
    EXPECT_EQ(next("b").shard_id, "s2");  // b is on h2
    EXPECT_EQ(next("a").shard_id, "s3");
    EXPECT_EQ(next("b").shard_id, "s0");  // nothing left on h2
}

TEST_F(CoordinatorShards, PlanFromTheShardingModule) {
    Dataset dataset;
    dataset.add(DataFile{"/data/a", 4000, std::nullopt});
    const ShardSet set = ShardSet::split(dataset, SplitSpec{0, 4});
    Topology members;
    members.add(node("a", "h1"));
    members.add(node("b", "h2"));
    PlanOptions options;
    options.strategy = Strategy::round_robin;
    const DatasetPlan p = plan_from_shard_plan(ShardPlan::create(set, members, options), 3);
    ASSERT_EQ(p.shards.size(), 4u);
    EXPECT_EQ(p.epochs, 3u);
    EXPECT_EQ(p.shards[0].id, "0");
    EXPECT_EQ(p.shards[0].bytes, 1000u);
    ASSERT_EQ(p.shards[0].hosts.size(), 1u);
    EXPECT_NE(p.shards[0].hosts[0], p.shards[1].hosts[0]);
    state.register_dataset("j", p, t);
}

}  // namespace
}  // namespace cohort::coord
