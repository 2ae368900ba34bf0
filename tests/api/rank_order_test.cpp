// RankOrder: ranks contiguous at every locality level, deterministic, with
// the chief first; ring_crossings at its minimum.
#include "support.hpp"

#include <cohort/rank_order.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

namespace cohort::test {
namespace {

using ::testing::HasSubstr;

constexpr Level kLevels[] = {Level::host, Level::network_switch, Level::rack, Level::zone, Level::region};

// A node's group at `level`: its labels from the region down to `level`
// (a label only means something inside its parent).
std::vector<std::string> group_key(const Node& node, Level level) {
    std::vector<std::string> key;
    for (Level l : {Level::region, Level::zone, Level::rack, Level::network_switch}) {
        if (static_cast<int>(l) < static_cast<int>(level)) break;
        key.push_back(node.label(l));
    }
    if (level == Level::host) key.push_back(node.host_name());
    return key;
}

const Node& node_at(const RankOrder& order, uint32_t rank) { return order.topology()[order[rank].node_index]; }

std::vector<std::string> ids_by_rank(const RankOrder& order) {
    std::vector<std::string> ids;
    for (uint32_t r = 0; r < order.world_size(); ++r) ids.push_back(node_at(order, r).id);
    return ids;
}

// Every group's ranks form one block, group() agrees with the labels, and
// ring_crossings is the number of groups (0 for one).
void check_contiguous(const RankOrder& order, uint64_t seed) {
    for (Level level : kLevels) {
        SCOPED_TRACE(std::string("level ") + std::string(to_string(level)) + ", seed " + std::to_string(seed));
        std::set<std::vector<std::string>> finished;
        std::map<std::vector<std::string>, uint32_t> group_of;
        for (uint32_t r = 0; r < order.world_size(); ++r) {
            const auto key = group_key(node_at(order, r), level);
            if (r > 0) {
                const auto previous = group_key(node_at(order, r - 1), level);
                if (previous != key) finished.insert(previous);
            }
            ASSERT_EQ(finished.count(key), 0u) << "group of rank " << r << " (" << node_at(order, r).id
                                               << ") was already left: not contiguous";
            auto [it, fresh] = group_of.emplace(key, order.group(r, level));
            ASSERT_EQ(it->second, order.group(r, level)) << "rank " << r << ": one group, two keys";
        }
        std::set<uint32_t> distinct_ids;
        for (const auto& [key, id] : group_of) distinct_ids.insert(id);
        ASSERT_EQ(distinct_ids.size(), group_of.size()) << "two groups share a key";
        const auto groups = static_cast<uint32_t>(group_of.size());
        EXPECT_EQ(ring_crossings(order, level), groups == 1 ? 0u : groups);
    }
}

void check_local_ranks(const RankOrder& order) {
    std::map<std::vector<std::string>, std::vector<uint32_t>> by_host;
    std::vector<std::vector<std::string>> host_order;
    for (uint32_t r = 0; r < order.world_size(); ++r) {
        auto key = group_key(node_at(order, r), Level::host);
        if (by_host[key].empty()) host_order.push_back(key);
        by_host[key].push_back(r);
    }
    EXPECT_EQ(order.host_count(), host_order.size());
    for (uint32_t h = 0; h < host_order.size(); ++h) {
        const auto& ranks = by_host[host_order[h]];
        for (uint32_t i = 0; i < ranks.size(); ++i) {
            const RankInfo& info = order[ranks[i]];
            EXPECT_EQ(info.local_rank, i) << "rank " << ranks[i];
            EXPECT_EQ(info.local_world_size, ranks.size()) << "rank " << ranks[i];
            EXPECT_EQ(info.node_rank, h) << "rank " << ranks[i];
        }
    }
}

TEST(RankOrder, ClusterFileOrder) {
    const RankOrder order(Topology::from_file(data_path("cluster.yaml")));
    // The chief's zone, rack, switch and host come first; then natural order.
    EXPECT_THAT(ids_by_rank(order), ::testing::ElementsAre("chief", "n4", "n5", "n0", "n1", "n2", "n3"));
    EXPECT_EQ(order.world_size(), 7u);
    EXPECT_EQ(order.host_count(), 4u);
    EXPECT_EQ(ring_crossings(order, Level::host), 4u);
    EXPECT_EQ(ring_crossings(order, Level::network_switch), 4u);
    EXPECT_EQ(ring_crossings(order, Level::rack), 3u);
    EXPECT_EQ(ring_crossings(order, Level::zone), 2u);
    EXPECT_EQ(ring_crossings(order, Level::region), 0u);
    EXPECT_EQ(order.rank_of("n0"), 3u);
    EXPECT_EQ(order[3].local_rank, 0u);
    EXPECT_EQ(order[4].local_rank, 1u);
    EXPECT_EQ(order[4].local_world_size, 2u);
    EXPECT_EQ(order[4].node_rank, 2u);
    EXPECT_EQ(order[0].local_world_size, 1u);
    check_contiguous(order, 0);
    check_local_ranks(order);
}

TEST(RankOrder, OnlyReadyNodesWithARoleInTheMask) {
    const Topology t = Topology::from_file(data_path("cluster.yaml"));
    const RankOrder training(t);
    for (const char* id : {"eval", "dead", "ps0"}) EXPECT_EQ(training.rank_of(id), std::nullopt) << id;
    EXPECT_EQ(training.rank_of("unknown"), std::nullopt);

    const RankOrder all(t, kAllRoles);
    EXPECT_EQ(all.world_size(), 9u);  // everyone but the node that is down
    EXPECT_EQ(all.rank_of("dead"), std::nullopt);
    EXPECT_TRUE(all.rank_of("eval").has_value());
    EXPECT_TRUE(all.rank_of("ps0").has_value());

    const RankOrder eval(t, role_bit(Role::evaluator));
    ASSERT_EQ(eval.world_size(), 1u);
    EXPECT_EQ(node_at(eval, 0).id, "eval");
    EXPECT_EQ(ring_crossings(eval, Level::host), 0u);

    for (NodeStatus s : {NodeStatus::joining, NodeStatus::draining, NodeStatus::down}) {
        Topology u = t;
        u.at("n0").status = s;
        EXPECT_EQ(RankOrder(u).rank_of("n0"), std::nullopt) << to_string(s);
        EXPECT_EQ(RankOrder(u).world_size(), 6u);
    }
}

TEST(RankOrder, NothingToRankIsUnsatisfiable) {
    EXPECT_THAT(error_message(Errc::unsatisfiable, [] { RankOrder(Topology{}); }), HasSubstr("no node to rank"));
    Topology down;
    down.add(make_node("a", "", {}, Role::worker, NodeStatus::down));
    down.add(make_node("e", "", {}, Role::evaluator));
    error_message(Errc::unsatisfiable, [&] { RankOrder{down}; });
    error_message(Errc::unsatisfiable, [&] { RankOrder(down, 0); });
    EXPECT_EQ(RankOrder(down, kAllRoles).world_size(), 1u);
}

TEST(RankOrder, NaturalOrderWithinAHost) {
    Topology t;
    for (const char* id : {"gpu-10", "gpu-2", "gpu-1", "gpu-0"}) t.add(make_node(id, "box"));
    const RankOrder order(t);
    EXPECT_THAT(ids_by_rank(order), ::testing::ElementsAre("gpu-0", "gpu-1", "gpu-2", "gpu-10"));
    EXPECT_EQ(order.host_count(), 1u);
    EXPECT_EQ(order[3].local_rank, 3u);
    EXPECT_EQ(order[3].local_world_size, 4u);
}

TEST(RankOrder, SameRackLabelInDifferentZonesIsTwoRacks) {
    Topology t;
    t.add(make_node("a0", "ha", Place{"", "zone-a", "r1", ""}));
    t.add(make_node("b0", "hb", Place{"", "zone-b", "r1", ""}));
    t.add(make_node("a1", "hc", Place{"", "zone-a", "r1", ""}));
    const RankOrder order(t);
    EXPECT_EQ(ring_crossings(order, Level::rack), 2u);
    EXPECT_EQ(ring_crossings(order, Level::zone), 2u);
    check_contiguous(order, 0);
}

TEST(RankOrder, RandomClustersAreContiguousAtEveryLevel) {
    const uint64_t seed = test_seed();
    std::mt19937_64 rng(seed);
    for (int round = 0; round < 40; ++round) {
        const Topology t = random_cluster(rng);
        const RankOrder order(t);
        ASSERT_EQ(order.world_size(), t.size());
        check_contiguous(order, seed);
        check_local_ranks(order);
        if (HasFatalFailure()) return;
    }
}

TEST(RankOrder, InputOrderDoesNotMatter) {
    const uint64_t seed = test_seed();
    std::mt19937_64 rng(seed);
    for (int round = 0; round < 20; ++round) {
        Topology t = random_cluster(rng);
        if (round % 2 == 1) t.at(t[rng() % t.size()].id).role = Role::chief;
        const auto expected = ids_by_rank(RankOrder(t));
        for (int k = 0; k < 3; ++k) {
            const RankOrder again(shuffled(t, rng));
            ASSERT_EQ(ids_by_rank(again), expected) << "seed " << seed << " round " << round;
            // Per-rank details agree too.
            const RankOrder first(t);
            for (uint32_t r = 0; r < again.world_size(); ++r) {
                ASSERT_EQ(again[r].local_rank, first[r].local_rank);
                ASSERT_EQ(again[r].node_rank, first[r].node_rank);
            }
        }
    }
}

TEST(RankOrder, ChiefGetsRankZeroAndGroupsStayContiguous) {
    const uint64_t seed = test_seed();
    std::mt19937_64 rng(seed);
    for (int round = 0; round < 40; ++round) {
        Topology t = random_cluster(rng);
        const std::string chief = t[rng() % t.size()].id;
        t.at(chief).role = Role::chief;
        const RankOrder order(t);
        ASSERT_EQ(node_at(order, 0).id, chief) << "seed " << seed << " round " << round;
        check_contiguous(order, seed);
        check_local_ranks(order);
        if (HasFatalFailure()) return;
    }
}

TEST(RankOrder, OfSeveralChiefsTheFirstByNaturalOrderLeads) {
    Topology t = racked_cluster(2, 2, 2);
    t.add(make_node("chief-10", "c1", Place{"region", "zone", "rack-0", "sw-0"}, Role::chief));
    t.add(make_node("chief-2", "c2", Place{"region", "zone", "rack-1", "sw-1"}, Role::chief));
    const RankOrder order(t);
    EXPECT_EQ(node_at(order, 0).id, "chief-2");
    EXPECT_EQ(node_at(order, 0).label(Level::rack), "rack-1");
    check_contiguous(order, 0);
}

TEST(RankOrder, ChiefLeadsItsHost) {
    Topology t;
    t.add(make_node("a-0", "h"));
    t.add(make_node("a-1", "h"));
    t.add(make_node("z-9", "h", {}, Role::chief));
    t.add(make_node("b-0", "g"));
    const RankOrder order(t);
    EXPECT_THAT(ids_by_rank(order), ::testing::ElementsAre("z-9", "a-0", "a-1", "b-0"));
    EXPECT_EQ(order[0].local_rank, 0u);
    EXPECT_EQ(order[0].local_world_size, 3u);
}

TEST(RankOrder, SingleRankRing) {
    Topology t;
    t.add(make_node("solo"));
    const RankOrder order(t);
    for (Level level : kLevels) EXPECT_EQ(ring_crossings(order, level), 0u);
    EXPECT_EQ(order[0].local_world_size, 1u);
    EXPECT_EQ(order.host_count(), 1u);
}

}  // namespace
}  // namespace cohort::test
