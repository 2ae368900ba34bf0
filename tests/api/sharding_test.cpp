// ShardPlan::create: each strategy's promises, and bad options.
#include "plan_checks.hpp"

#include <cohort/sharding.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

namespace cohort::test {
namespace {

using ::testing::HasSubstr;

// A custom assignment: the first member from (shard * 7 + replica) that is
// not yet taken.
uint32_t stride_assign(uint64_t shard, uint32_t replica, std::span<const uint32_t> taken, uint32_t n) {
    for (uint32_t k = 0;; ++k) {
        const auto m = static_cast<uint32_t>((shard * 7 + replica + k) % n);
        if (std::find(taken.begin(), taken.end(), m) == taken.end()) return m;
    }
}

PlanOptions options_for(Strategy strategy, uint32_t replication, uint64_t seed = 0) {
    PlanOptions o;
    o.strategy = strategy;
    o.replication = replication;
    o.seed = seed;
    if (strategy == Strategy::custom) o.custom = stride_assign;
    return o;
}

class EveryStrategy : public ::testing::TestWithParam<Strategy> {};

TEST_P(EveryStrategy, EveryShardGetsReplicationDistinctMembers) {
    const ShardSet shards = even_shards(97);
    for (const Topology& members : {flat_cluster(1), flat_cluster(5), racked_cluster(3, 2, 2), racked_cluster(4, 3, 4)}) {
        for (uint32_t r = 1; r <= std::min<std::size_t>(members.size(), 4); ++r) {
            SCOPED_TRACE("members " + std::to_string(members.size()) + " replication " + std::to_string(r));
            const ShardPlan plan = ShardPlan::create(shards, members, options_for(GetParam(), r));
            EXPECT_EQ(plan.shard_count(), 97u);
            EXPECT_EQ(plan.replication(), r);
            EXPECT_EQ(plan.member_count(), members.size());
            EXPECT_EQ(plan.moved(), 0u);
            check_plan(plan);
        }
    }
}

TEST_P(EveryStrategy, ReplicationAboveMemberCountIsUnsatisfiable) {
    const ShardSet shards = even_shards(10);
    const std::string m = error_message(Errc::unsatisfiable, [&] {
        ShardPlan::create(shards, flat_cluster(3), options_for(GetParam(), 4));
    });
    EXPECT_EQ(m, "replication 4 needs at least 4 ready members, but there are only 3");
}

TEST_P(EveryStrategy, NonReadyNodesAreNotMembers) {
    Topology t = flat_cluster(6);
    t.at("node-1").status = NodeStatus::down;
    t.at("node-3").status = NodeStatus::joining;
    t.at("node-4").status = NodeStatus::draining;
    const ShardPlan plan = ShardPlan::create(even_shards(30), t, options_for(GetParam(), 2));
    ASSERT_EQ(plan.member_count(), 3u);
    EXPECT_EQ(plan.members()[0].id, "node-0");  // in the caller's order
    EXPECT_EQ(plan.members()[1].id, "node-2");
    EXPECT_EQ(plan.members()[2].id, "node-5");
    check_plan(plan);
    t.at("node-0").status = NodeStatus::down;
    t.at("node-2").status = NodeStatus::down;
    EXPECT_THAT(error_message(Errc::unsatisfiable,
                              [&] { ShardPlan::create(even_shards(30), t, options_for(GetParam(), 2)); }),
                HasSubstr("only 1"));
}

TEST_P(EveryStrategy, SameInputsSamePlan) {
    const ShardSet shards = even_shards(200);
    const Topology t = racked_cluster(3, 2, 2);
    const ShardPlan a = ShardPlan::create(shards, t, options_for(GetParam(), 2, 9));
    const ShardPlan b = ShardPlan::create(shards, t, options_for(GetParam(), 2, 9));
    EXPECT_EQ(owner_ids(a), owner_ids(b));
    EXPECT_EQ(a.to_json(), b.to_json());
}

INSTANTIATE_TEST_SUITE_P(Strategies, EveryStrategy,
                         ::testing::Values(Strategy::round_robin, Strategy::hash, Strategy::locality,
                                           Strategy::random, Strategy::custom),
                         strategy_name);

class BuiltinStrategy : public ::testing::TestWithParam<Strategy> {};

TEST_P(BuiltinStrategy, ReplicasOnDistinctHostsWhenThereAreEnough) {
    // 3 hosts of 4 nodes: hosts >= r for r <= 3.
    Topology t;
    for (int h = 0; h < 3; ++h)
        for (int n = 0; n < 4; ++n) t.add(make_node("h" + std::to_string(h) + "-n" + std::to_string(n), "h" + std::to_string(h)));
    for (uint32_t r = 2; r <= 3; ++r) {
        const ShardPlan plan = ShardPlan::create(even_shards(120), t, options_for(GetParam(), r));
        check_plan(plan);
        for (uint64_t s = 0; s < plan.shard_count(); ++s) {
            std::set<std::string> hosts;
            for (uint32_t m : plan.owners(s)) hosts.insert(plan.members()[m].host_name());
            ASSERT_EQ(hosts.size(), r) << "shard " << s << ", replication " << r << ", owners " << owners_text(plan, s);
        }
    }
}

TEST_P(BuiltinStrategy, ReplicasOnDistinctRacksWhenThereAreEnough) {
    const Topology t = racked_cluster(4, 2, 2);  // 4 racks of 4 nodes
    for (uint32_t r = 2; r <= 4; ++r) {
        const ShardPlan plan = ShardPlan::create(even_shards(120), t, options_for(GetParam(), r));
        check_plan(plan);
        for (uint64_t s = 0; s < plan.shard_count(); ++s) {
            std::set<std::string> racks;
            for (uint32_t m : plan.owners(s)) racks.insert(plan.members()[m].label(Level::rack));
            ASSERT_EQ(racks.size(), r) << "shard " << s << ", replication " << r << ", owners " << owners_text(plan, s);
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Strategies, BuiltinStrategy, ::testing::ValuesIn(kBuiltinStrategies), strategy_name);

TEST(RoundRobin, ShardIGoesToMemberIModN) {
    const ShardPlan plan = ShardPlan::create(even_shards(20), flat_cluster(6), options_for(Strategy::round_robin, 1));
    for (uint64_t s = 0; s < 20; ++s) EXPECT_EQ(plan.owner(s), s % 6);
    EXPECT_LE(max_load(plan) - min_load(plan), 1u);
}

TEST(Hash, MaxLoadWithinTheSlack) {
    const ShardSet shards = even_shards(1000);
    for (double slack : {0.0, 0.03, 0.1, 0.5}) {
        for (uint32_t r : {1u, 2u}) {
            PlanOptions o = options_for(Strategy::hash, r);
            o.load_slack = slack;
            const ShardPlan plan = ShardPlan::create(shards, flat_cluster(37), o);
            check_plan(plan);
            const double average = 1000.0 * r / 37;
            EXPECT_LE(max_load(plan), static_cast<uint64_t>(std::ceil(average * (1 + slack))))
                << "slack " << slack << " replication " << r;
        }
    }
}

TEST(Hash, SeedChangesThePlan) {
    const ShardSet shards = even_shards(300);
    const ShardPlan a = ShardPlan::create(shards, flat_cluster(10), options_for(Strategy::hash, 1, 1));
    const ShardPlan b = ShardPlan::create(shards, flat_cluster(10), options_for(Strategy::hash, 1, 2));
    EXPECT_NE(owner_ids(a), owner_ids(b));
    EXPECT_EQ(a.hash_table_bits(), b.hash_table_bits());
    EXPECT_GE(uint64_t{1} << a.hash_table_bits(), 20u);
}

TEST(Random, SameSeedSamePlanOtherSeedOtherPlan) {
    const ShardSet shards = even_shards(300);
    const Topology t = flat_cluster(12);
    const auto a = owner_ids(ShardPlan::create(shards, t, options_for(Strategy::random, 1, 5)));
    EXPECT_EQ(a, owner_ids(ShardPlan::create(shards, t, options_for(Strategy::random, 1, 5))));
    EXPECT_NE(a, owner_ids(ShardPlan::create(shards, t, options_for(Strategy::random, 1, 6))));
}

TEST(Random, LoadsBalancedWithinOne) {
    const uint64_t seed = test_seed();
    std::mt19937_64 rng(seed);
    for (int round = 0; round < 30; ++round) {
        const uint64_t count = 1 + rng() % 500;
        const int members = 1 + static_cast<int>(rng() % 40);
        const ShardPlan plan = ShardPlan::create(even_shards(count, 3), flat_cluster(members),
                                                 options_for(Strategy::random, 1, rng()));
        check_plan(plan);
        ASSERT_LE(max_load(plan) - min_load(plan), 1u) << "seed " << seed << " round " << round;
    }
}

TEST(Random, LoadsBalancedWithinOneWithReplicas) {
    // No host or rack rule gets in the way here: every node is its own host.
    // 7 shards x 3 replicas over 5 members can be 5/4/4/4/4.
    for (int members = 3; members <= 12; ++members) {
        for (uint64_t count : {7u, 50u, 333u}) {
            for (uint32_t r = 2; r <= 3; ++r) {
                const ShardPlan plan = ShardPlan::create(even_shards(count, 1), flat_cluster(members),
                                                         options_for(Strategy::random, r, 3));
                check_plan(plan);
                EXPECT_LE(max_load(plan) - min_load(plan), 1u)
                    << members << " members, " << count << " shards, replication " << r << ": loads from "
                    << min_load(plan) << " to " << max_load(plan);
            }
        }
    }
}

TEST(Locality, EachNodeGetsTheShardsOfItsLocalFile) {
    const ShardSet shards = even_shards(16, 8);  // two shards per file
    const Topology t = flat_cluster(8);
    PlanOptions o = options_for(Strategy::locality, 1);
    for (int i = 0; i < 8; ++i) o.locality.push_back({"node-" + std::to_string((i * 3) % 8), "file-" + std::to_string(i), 1.0});
    const ShardPlan plan = ShardPlan::create(shards, t, o);
    check_plan(plan);
    for (uint64_t s = 0; s < 16; ++s) {
        const uint32_t file = shards.segments(s)[0].file;
        EXPECT_EQ(plan.members()[plan.owner(s)].id, "node-" + std::to_string((file * 3) % 8)) << "shard " << s;
    }
}

TEST(Locality, ReplicasGoToEveryNodeHoldingTheFile) {
    const ShardSet shards = even_shards(12, 6);
    PlanOptions o = options_for(Strategy::locality, 2);
    for (int f = 0; f < 6; ++f) {
        o.locality.push_back({"node-" + std::to_string(f), "file-" + std::to_string(f), 1.0});
        o.locality.push_back({"node-" + std::to_string((f + 1) % 6), "file-" + std::to_string(f), 1.0});
    }
    const ShardPlan plan = ShardPlan::create(shards, flat_cluster(6), o);
    check_plan(plan);
    for (uint64_t s = 0; s < 12; ++s) {
        const uint32_t f = shards.segments(s)[0].file;
        std::set<std::string> expected = {"node-" + std::to_string(f), "node-" + std::to_string((f + 1) % 6)};
        std::set<std::string> got;
        for (uint32_t m : plan.owners(s)) got.insert(plan.members()[m].id);
        EXPECT_EQ(got, expected) << "shard " << s;
    }
}

TEST(Locality, CapacityBoundsEvenAPopularNode) {
    const ShardSet shards = even_shards(100, 10);
    PlanOptions o = options_for(Strategy::locality, 1);
    for (int f = 0; f < 10; ++f) o.locality.push_back({"node-0", "file-" + std::to_string(f), 1.0});
    const ShardPlan plan = ShardPlan::create(shards, flat_cluster(8), o);
    check_plan(plan);
    const uint64_t cap = (100 + 7) / 8 + 1;  // ceil(placements / members) + 1
    EXPECT_EQ(plan.load(0), cap) << "the local node fills up to the cap";
    EXPECT_LE(max_load(plan), cap);
}

TEST(Locality, CapHoldsWithReplicasWhenTwoNodesHoldEverything) {
    // node-0 and node-2 hold the only file; node-1 holds nothing. 30 shards
    // x 2 replicas over 3 members: cap = ceil(60 / 3) + 1 = 21 each, and
    // a plan within it exists (e.g. 20 / 20 / 20).
    Dataset d;
    d.add({"data", 30000, {}});
    const ShardSet shards = ShardSet::split(d, {.shard_count = 30});
    PlanOptions o = options_for(Strategy::locality, 2);
    o.locality = {{"node-0", "data", 1.0}, {"node-2", "data", 1.0}};
    const ShardPlan plan = ShardPlan::create(shards, flat_cluster(3), o);
    check_plan(plan);
    EXPECT_LE(max_load(plan), 21u) << "loads " << plan.load(0) << " " << plan.load(1) << " " << plan.load(2);
}

TEST(Locality, NoNodePastTheCapOnRandomMaps) {
    const uint64_t seed = test_seed();
    std::mt19937_64 rng(seed);
    for (int round = 0; round < 20; ++round) {
        const int members = 2 + static_cast<int>(rng() % 20);
        const uint32_t r = 1 + static_cast<uint32_t>(rng() % 2);
        const ShardSet shards = even_shards(1 + rng() % 300, 1 + rng() % 12);
        PlanOptions o = options_for(Strategy::locality, r);
        for (int k = 0, entries = static_cast<int>(rng() % 40); k < entries; ++k) {
            o.locality.push_back({"node-" + std::to_string(rng() % (members + 2)),  // some are not members
                                  "file-" + std::to_string(rng() % shards.dataset().size()),
                                  static_cast<double>(rng() % 101) / 100});
        }
        const ShardPlan plan = ShardPlan::create(shards, flat_cluster(members), o);
        check_plan(plan);
        const uint64_t placements = plan.shard_count() * r;
        ASSERT_LE(max_load(plan), (placements + members - 1) / members + 1) << "seed " << seed << " round " << round;
    }
}

TEST(Locality, BadEntries) {
    const ShardSet shards = even_shards(10, 2);
    PlanOptions o = options_for(Strategy::locality, 1);
    o.locality = {{"node-0", "no-such-file", 1.0}};
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { ShardPlan::create(shards, flat_cluster(3), o); }),
                HasSubstr("'no-such-file'"));
    o.locality = {{"node-0", "file-0", 1.5}};
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { ShardPlan::create(shards, flat_cluster(3), o); }),
                HasSubstr("[0, 1]"));
    o.locality = {{"node-0", "file-0", std::nan("")}};
    error_message(Errc::invalid_argument, [&] { ShardPlan::create(shards, flat_cluster(3), o); });
}

}  // namespace
}  // namespace cohort::test
