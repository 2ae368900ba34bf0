// Replication survives the loss of a failure domain: every strategy keeps the
// replicas of a shard spread over racks before it balances load, in create
// and in replan, and spreads as far as the racks allow when there are fewer
// racks than replicas.
#include "plan_checks.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>

namespace cohort::test {
namespace {

// Nodes on hosts of their own, in the racks given by size: {1, 5} is one
// node in rack "rack-0" and five in "rack-1".
Topology racks_of(std::initializer_list<int> sizes) {
    Topology t;
    int rack = 0;
    for (int size : sizes) {
        for (int i = 0; i < size; ++i) {
            const std::string id = "r" + std::to_string(rack) + "-n" + std::to_string(i);
            t.add(make_node(id, id, Place{"region", "zone", "rack-" + std::to_string(rack), ""}));
        }
        ++rack;
    }
    return t;
}

// The most replicas of one shard in one rack.
uint32_t most_in_one_rack(const ShardPlan& plan, uint64_t shard) {
    std::map<std::string, uint32_t> count;
    uint32_t most = 0;
    for (uint32_t m : plan.owners(shard)) most = std::max(most, ++count[plan.members()[m].label(Level::rack)]);
    return most;
}

// Shards whose replicas crowd a rack more than the racks force:
// ceil(replication / racks) is the least crowding possible.
uint64_t crowded_shards(const ShardPlan& plan, uint32_t racks) {
    const uint32_t allowed = (plan.replication() + racks - 1) / racks;
    uint64_t crowded = 0;
    for (uint64_t s = 0; s < plan.shard_count(); ++s) crowded += most_in_one_rack(plan, s) > allowed ? 1 : 0;
    return crowded;
}

uint64_t load_of(const ShardPlan& plan, const std::string& id) {
    const auto index = plan.members().find(id);
    if (!index) throw std::runtime_error("no member " + id);
    return plan.load(static_cast<uint32_t>(*index));
}

PlanOptions options_for(Strategy strategy, uint32_t replication) {
    PlanOptions o;
    o.strategy = strategy;
    o.replication = replication;
    return o;
}

class ReplicaSpread : public ::testing::TestWithParam<Strategy> {};

TEST_P(ReplicaSpread, ALoneRackHoldsAReplicaOfEveryShard) {
    // One node in rack-0, five in rack-1. A member going over the cap comes
    // before two replicas sharing a rack (docs/sharding.md, Replication), so
    // the lonely node holds all 60 shards, not the cap of 20.
    const Topology t = racks_of({1, 5});
    const ShardPlan plan = ShardPlan::create(even_shards(60), t, options_for(GetParam(), 2));
    check_plan(plan);
    EXPECT_EQ(crowded_shards(plan, 2), 0u);
    EXPECT_EQ(load_of(plan, "r0-n0"), 60u);
    // The other replica of each shard still spreads evenly over rack-1.
    for (uint32_t m = 1; m < 6; ++m) EXPECT_EQ(plan.load(m), 12u) << plan.members()[m].id;
}

TEST_P(ReplicaSpread, RacksOfFourThreeAndThreeEachHoldAReplica) {
    const Topology t = racks_of({4, 3, 3});
    const ShardPlan plan = ShardPlan::create(even_shards(60), t, options_for(GetParam(), 3));
    check_plan(plan);
    EXPECT_EQ(crowded_shards(plan, 3), 0u);
    // The cost: each rack holds 60 replicas, so rack-0's nodes hold 15 and
    // the others' 20 instead of an even 18.
    for (uint32_t m = 0; m < plan.member_count(); ++m) {
        const bool big_rack = plan.members()[m].label(Level::rack) == "rack-0";
        EXPECT_EQ(plan.load(m), big_rack ? 15u : 20u) << plan.members()[m].id;
    }
}

TEST_P(ReplicaSpread, FewerRacksThanReplicasSpreadAsFarAsTheyAllow) {
    // Two racks, three replicas: two in one rack and one in the other, never
    // all three in one.
    const Topology t = racked_cluster(2, 3, 1);
    const ShardPlan plan = ShardPlan::create(even_shards(60), t, options_for(GetParam(), 3));
    check_plan(plan);
    EXPECT_EQ(crowded_shards(plan, 2), 0u);
}

TEST_P(ReplicaSpread, FewerHostsThanReplicasSpreadAsFarAsTheyAllow) {
    // Two hosts of three nodes each, no racks, three replicas.
    Topology t;
    for (int h = 0; h < 2; ++h)
        for (int n = 0; n < 3; ++n) t.add(make_node("h" + std::to_string(h) + "-n" + std::to_string(n), "h" + std::to_string(h)));
    const ShardPlan plan = ShardPlan::create(even_shards(60), t, options_for(GetParam(), 3));
    check_plan(plan);
    for (uint64_t s = 0; s < plan.shard_count(); ++s) {
        std::map<std::string, int> per_host;
        for (uint32_t m : plan.owners(s)) ++per_host[plan.members()[m].host_name()];
        EXPECT_EQ(per_host.size(), 2u) << "shard " << s << ": " << owners_text(plan, s);
    }
}

TEST_P(ReplicaSpread, ReplanKeepsTheSpread) {
    // Start balanced over three racks of two, then lose a node: its
    // placements must not land in a rack that already holds the shard, even
    // though that leaves the other node of its rack over the cap.
    const Topology before = racks_of({2, 2, 2});
    const ShardPlan plan = ShardPlan::create(even_shards(60), before, options_for(GetParam(), 3));
    ASSERT_EQ(crowded_shards(plan, 3), 0u);
    Topology after;
    for (const Node& node : before.nodes())
        if (node.id != "r0-n0") after.add(node);
    const ShardPlan smaller = plan.replan(after);
    check_plan(smaller);
    EXPECT_EQ(crowded_shards(smaller, 3), 0u);
    EXPECT_EQ(load_of(smaller, "r0-n1"), 60u);

    // And growing rack-0 back relieves the lone node without crowding.
    const ShardPlan grown = smaller.replan(before);
    check_plan(grown);
    EXPECT_EQ(crowded_shards(grown, 3), 0u);
    EXPECT_EQ(max_load(grown) - min_load(grown), max_load(plan) - min_load(plan));
}

TEST_P(ReplicaSpread, ReplanIntoALoneRackSpreadsWhatItTakes) {
    // Six nodes in one rack, so every shard's two replicas share it; then a
    // seventh node arrives in a rack of its own. It fills up to an even share
    // (floor(120 / 7) = 17), and each placement it takes spreads its shard.
    const Topology before = racks_of({0, 6});
    const ShardPlan plan = ShardPlan::create(even_shards(60), before, options_for(GetParam(), 2));
    ASSERT_EQ(crowded_shards(plan, 1), 0u);
    Topology after = before;
    after.add(make_node("lone", "lone", Place{"region", "zone", "rack-9", ""}));
    const ShardPlan grown = plan.replan(after);
    check_plan(grown);
    const uint64_t lone = load_of(grown, "lone");
    EXPECT_GE(lone, 17u);
    EXPECT_EQ(crowded_shards(grown, 2), 60u - lone);
}

INSTANTIATE_TEST_SUITE_P(Strategies, ReplicaSpread, ::testing::ValuesIn(kBuiltinStrategies), strategy_name);

}  // namespace
}  // namespace cohort::test
