// ShardPlan::replan: a new membership moves only what it must.
#include "plan_checks.hpp"

#include <cohort/sharding.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

namespace cohort::test {
namespace {

using ::testing::HasSubstr;

PlanOptions options_for(Strategy strategy, uint32_t replication) {
    PlanOptions o;
    o.strategy = strategy;
    o.replication = replication;
    o.seed = 1234;
    if (strategy == Strategy::locality) {
        // Some locality so the strategy has something to weigh.
        for (int f = 0; f < 10; ++f) o.locality.push_back({"node-" + std::to_string(f * 2), "file-" + std::to_string(f), 1.0});
    }
    return o;
}

Topology without(const Topology& t, const std::string& id) {
    Topology out;
    for (const Node& n : t.nodes())
        if (n.id != id) out.add(n);
    return out;
}

Topology with(Topology t, const std::string& id) {
    t.add(make_node(id));
    return t;
}

// Placements whose owner (by id) differs between the two plans.
uint64_t changed(const ShardPlan& before, const ShardPlan& after) {
    const auto a = owner_ids(before), b = owner_ids(after);
    uint64_t n = 0;
    for (std::size_t i = 0; i < a.size(); ++i) n += a[i] != b[i] ? 1 : 0;
    return n;
}

uint64_t load_of(const ShardPlan& plan, const std::string& id) {
    return plan.load(static_cast<uint32_t>(*plan.members().find(id)));
}

// The most placements one member may hold under the plan's strategy.
uint64_t cap_of(const ShardPlan& plan) {
    const uint64_t placements = plan.shard_count() * plan.replication();
    const uint64_t n = plan.member_count();
    const uint64_t even = (placements + n - 1) / n;
    switch (plan.options().strategy) {
        case Strategy::hash:
            return std::max<uint64_t>(
                even, static_cast<uint64_t>(std::ceil(static_cast<double>(placements) / n * (1 + plan.options().load_slack))));
        case Strategy::locality: return even + 1;
        default: return even;
    }
}

struct Case {
    Strategy strategy;
    uint32_t replication;
};

void PrintTo(const Case& c, std::ostream* os) { *os << to_string(c.strategy) << " x" << c.replication; }

class Replan : public ::testing::TestWithParam<Case> {
protected:
    const ShardSet shards_ = even_shards(503);
    const Topology members_ = flat_cluster(20);
    ShardPlan plan() const {
        return ShardPlan::create(shards_, members_, options_for(GetParam().strategy, GetParam().replication));
    }
};

TEST_P(Replan, OneLeavesOnlyItsPlacementsMove) {
    const ShardPlan before = plan();
    for (const char* gone : {"node-0", "node-7", "node-19"}) {
        SCOPED_TRACE(gone);
        const ShardPlan after = before.replan(without(members_, gone));
        check_plan(after);
        EXPECT_EQ(after.member_count(), 19u);
        EXPECT_EQ(after.moved(), load_of(before, gone));
        EXPECT_EQ(after.moved(), changed(before, after));
        const auto a = owner_ids(before), b = owner_ids(after);
        for (std::size_t p = 0; p < a.size(); ++p) {
            if (a[p] != gone) {
                ASSERT_EQ(a[p], b[p]) << "placement " << p << " moved needlessly";
            } else {
                ASSERT_NE(b[p], gone);
            }
        }
        EXPECT_LE(max_load(after), cap_of(after));
    }
}

TEST_P(Replan, OneJoinsAndTakesAnEvenShare) {
    const ShardPlan before = plan();
    const ShardPlan after = before.replan(with(members_, "newcomer"));
    check_plan(after);
    ASSERT_EQ(after.member_count(), 21u);
    const uint64_t placements = after.shard_count() * after.replication();
    const uint64_t got = load_of(after, "newcomer");
    EXPECT_GE(got, placements / 21);
    EXPECT_EQ(after.moved(), got) << "only placements taken by the newcomer move";
    EXPECT_EQ(after.moved(), changed(before, after));
    const auto a = owner_ids(before), b = owner_ids(after);
    for (std::size_t p = 0; p < a.size(); ++p) {
        if (a[p] != b[p]) {
            ASSERT_EQ(b[p], "newcomer") << "placement " << p;
        }
    }
    EXPECT_LE(max_load(after), cap_of(after));
}

TEST_P(Replan, ReplacingANodeMovesOnlyTheDepartedPlacements) {
    const ShardPlan before = plan();
    for (const char* gone : {"node-3", "node-12"}) {
        SCOPED_TRACE(gone);
        const ShardPlan after = before.replan(with(without(members_, gone), "replacement"));
        check_plan(after);
        const uint64_t departed = load_of(before, gone);
        const uint64_t even = after.shard_count() * after.replication() / after.member_count();
        // The newcomer gets an even share: when the departed node held less
        // (hash, locality), the difference comes from the most loaded.
        EXPECT_EQ(after.moved(), std::max(departed, even));
        if (departed >= even) {
            EXPECT_EQ(after.moved(), departed);
        }
        EXPECT_EQ(after.moved(), changed(before, after));
        EXPECT_GE(load_of(after, "replacement"), even);
        const auto a = owner_ids(before), b = owner_ids(after);
        for (std::size_t p = 0; p < a.size(); ++p) {
            if (a[p] != b[p]) {
                ASSERT_TRUE(a[p] == gone || b[p] == "replacement") << "placement " << p;
            }
        }
    }
}

TEST_P(Replan, SameMembersMoveNothing) {
    const ShardPlan before = plan();
    std::mt19937_64 rng(5);
    const ShardPlan after = before.replan(shuffled(members_, rng));
    check_plan(after);
    EXPECT_EQ(after.moved(), 0u);
    EXPECT_EQ(owner_ids(before), owner_ids(after));
}

TEST_P(Replan, RandomMembershipChanges) {
    const uint64_t seed = test_seed();
    std::mt19937_64 rng(seed);
    ShardPlan current = plan();
    Topology members = members_;
    int next_id = 100;
    for (int step = 0; step < 12; ++step) {
        const std::string trace = "seed " + std::to_string(seed) + " step " + std::to_string(step);
        // Leave, join or both, keeping enough members for the replication.
        const int action = static_cast<int>(rng() % 3);
        if (action != 1 && members.size() > GetParam().replication + 1)
            members = without(members, members[rng() % members.size()].id);
        if (action != 0) members = with(members, "node-" + std::to_string(next_id++));
        const ShardPlan after = current.replan(members);
        check_plan(after);
        ASSERT_EQ(after.moved(), changed(current, after)) << trace;
        ASSERT_LE(max_load(after), cap_of(after)) << trace;
        current = after;
    }
}

INSTANTIATE_TEST_SUITE_P(Strategies, Replan,
                         ::testing::Values(Case{Strategy::round_robin, 1}, Case{Strategy::hash, 1},
                                           Case{Strategy::random, 1}, Case{Strategy::locality, 1},
                                           Case{Strategy::round_robin, 2}, Case{Strategy::hash, 2},
                                           Case{Strategy::random, 2}, Case{Strategy::locality, 3}),
                         [](const auto& param_info) {
                             return std::string(to_string(param_info.param.strategy)) + "_r" +
                                    std::to_string(param_info.param.replication);
                         });

TEST(ReplanHash, RemovingOneOfFiftyMovesAboutOneFiftieth) {
    const ShardSet shards = even_shards(1000);
    const Topology members = flat_cluster(50);
    const ShardPlan before = ShardPlan::create(shards, members, options_for(Strategy::hash, 1));
    for (int gone : {0, 13, 49}) {
        const ShardPlan after = before.replan(without(members, "node-" + std::to_string(gone)));
        EXPECT_LE(static_cast<double>(after.moved()), 1.05 / 50 * 1000) << "node-" << gone;
        EXPECT_EQ(after.hash_table_bits(), before.hash_table_bits()) << "the slot table is kept";
    }
}

TEST(ReplanHash, GrowingPastTheTableResizesIt) {
    const ShardPlan before = ShardPlan::create(even_shards(100), flat_cluster(3), options_for(Strategy::hash, 1));
    const ShardPlan after = before.replan(flat_cluster(40));
    check_plan(after);
    EXPECT_GE(uint64_t{1} << after.hash_table_bits(), 40u);
    EXPECT_EQ(after.moved(), changed(before, after));
}

TEST(Replan, ChangingReplicationIsAnInvalidArgument) {
    const ShardPlan before = ShardPlan::create(even_shards(30), flat_cluster(5), options_for(Strategy::hash, 2));
    PlanOptions o = before.options();
    o.replication = 3;
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { before.replan(flat_cluster(5), o); }),
                HasSubstr("replication"));
}

TEST(Replan, TooFewMembersLeftIsUnsatisfiable) {
    const ShardPlan before = ShardPlan::create(even_shards(30), flat_cluster(5), options_for(Strategy::hash, 3));
    error_message(Errc::unsatisfiable, [&] { before.replan(flat_cluster(2)); });
}

TEST(Replan, EveryoneReplacedMovesEverything) {
    const ShardPlan before = ShardPlan::create(even_shards(40), flat_cluster(4), options_for(Strategy::round_robin, 2));
    const ShardPlan after = before.replan(flat_cluster(5, "other-"));
    check_plan(after);
    EXPECT_EQ(after.moved(), 80u);
    EXPECT_LE(max_load(after) - min_load(after), 1u);
}

TEST(Replan, NonReadyNodesLeave) {
    const Topology members = flat_cluster(6);
    const ShardPlan before = ShardPlan::create(even_shards(60), members, options_for(Strategy::hash, 1));
    Topology next = members;
    next.at("node-2").status = NodeStatus::draining;
    const ShardPlan after = before.replan(next);
    EXPECT_EQ(after.member_count(), 5u);
    EXPECT_FALSE(after.members().find("node-2").has_value());
    EXPECT_EQ(after.moved(), load_of(before, "node-2"));
}

}  // namespace
}  // namespace cohort::test
