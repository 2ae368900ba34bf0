// sharding/placement.hpp SlotTable: the hash strategy's cheap rendezvous
// hashing. Its promises: every member can be reached (and is a first choice
// as often as any other), and a member's place depends only on its own id,
// never on who else is a member.
#include "sharding/placement.hpp"

#include <cohort/topology.hpp>

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

namespace cohort::detail {
namespace {

Topology members_named(const std::vector<std::string>& ids) {
    Topology t;
    for (const auto& id : ids) {
        Node n;
        n.id = id;
        t.add(n);
    }
    return t;
}

std::vector<std::string> numbered(int count, const char* prefix = "node-") {
    std::vector<std::string> ids;
    for (int i = 0; i < count; ++i) ids.push_back(fmt::format("{}{}", prefix, i));
    return ids;
}

std::vector<uint64_t> slots_of_id(const SlotTable& table, const Topology& members, const std::string& id) {
    const auto slots = table.slots_of(static_cast<uint32_t>(*members.find(id)));
    return {slots.begin(), slots.end()};
}

// Every member, best first, in the order the probe sequence of `key` meets them.
std::vector<std::string> preference(const SlotTable& table, const Topology& members, uint64_t key) {
    std::vector<std::string> order;
    std::set<uint32_t> seen;
    const uint64_t limit = (uint64_t{1} << table.bits()) * 200;
    std::vector<uint32_t> here;
    for (uint64_t i = 0; seen.size() < members.size(); ++i) {
        if (i > limit) {
            ADD_FAILURE() << "the probe sequence never meets every member";
            break;
        }
        here.clear();
        table.probe(key, i, here);
        for (uint32_t m : here) {
            EXPECT_LT(m, members.size());
            if (seen.insert(m).second) order.push_back(members[m].id);
        }
    }
    return order;
}

TEST(SlotTable, BitsGiveAtLeastTwoSlotsPerVirtualSlot) {
    EXPECT_GE(SlotTable::bits_for(0), 1u);
    constexpr std::size_t k = SlotTable::kSlotsPerMember;
    for (std::size_t n : {1u, 2u, 3u, 7u, 8u, 9u, 50u, 64u, 65u, 1000u, 4096u}) {
        const uint32_t bits = SlotTable::bits_for(n);
        EXPECT_GE(uint64_t{1} << bits, 2 * k * n) << n << " members";
        EXPECT_LE(uint64_t{1} << bits, 4 * k * n) << n << " members: table needlessly large";
    }
}

TEST(SlotTable, EveryMemberOwnsSlotsInTheTable) {
    const Topology members = members_named(numbered(37));
    const SlotTable table(members, 11, SlotTable::bits_for(members.size()));
    std::set<uint64_t> slots;
    for (uint32_t m = 0; m < members.size(); ++m) {
        ASSERT_EQ(table.slots_of(m).size(), SlotTable::kSlotsPerMember);
        for (uint64_t s : table.slots_of(m)) {
            EXPECT_LT(s, uint64_t{1} << table.bits());
            slots.insert(s);
        }
    }
    // Random slots in a table at most half full: most are distinct.
    EXPECT_GT(slots.size(), members.size() * SlotTable::kSlotsPerMember * 3 / 4);
}

TEST(SlotTable, EveryMemberIsReachedByProbing) {
    const Topology members = members_named(numbered(37));
    const SlotTable table(members, 11, SlotTable::bits_for(members.size()));
    for (uint64_t key : {uint64_t{1}, uint64_t{99}, table.shard_key(5)}) {
        std::set<uint32_t> reached;
        int empty = 0;
        for (uint64_t i = 0; i < 64 * (uint64_t{1} << table.bits()); ++i) {
            const auto here = table.slot(key, i);
            if (here.empty()) {
                ++empty;
                continue;
            }
            for (uint32_t m : here) {
                ASSERT_LT(m, members.size());
                reached.insert(m);
            }
        }
        EXPECT_EQ(reached.size(), members.size()) << "key " << key;
        EXPECT_GT(empty, 0) << "a table of 2^bits >= 2 * members has empty slots";
    }
}

TEST(SlotTable, EveryMemberIsAFirstChoiceAboutEquallyOften) {
    const Topology members = members_named(numbered(20));
    const SlotTable table(members, 3, SlotTable::bits_for(members.size()));
    std::vector<int> first(members.size(), 0);
    for (uint64_t shard = 0; shard < 4000; ++shard) {
        const auto order = preference(table, members, table.shard_key(shard));
        ASSERT_EQ(order.size(), members.size());
        ++first[*members.find(order.front())];
    }
    for (uint32_t m = 0; m < members.size(); ++m) {
        // 200 expected, standard deviation about 14.
        EXPECT_GT(first[m], 120) << members[m].id;
        EXPECT_LT(first[m], 280) << members[m].id;
    }
}

TEST(SlotTable, SameIdsInAnyOrderSameTable) {
    const auto ids = numbered(25);
    auto reversed = ids;
    std::reverse(reversed.begin(), reversed.end());
    const Topology a = members_named(ids), b = members_named(reversed);
    const SlotTable ta(a, 4, 6), tb(b, 4, 6);
    for (const auto& id : ids) EXPECT_EQ(slots_of_id(ta, a, id), slots_of_id(tb, b, id)) << id;
}

TEST(SlotTable, SeedMovesMembers) {
    const Topology members = members_named(numbered(16));
    const SlotTable a(members, 1, 6), b(members, 2, 6);
    int same = 0;
    for (uint32_t m = 0; m < members.size(); ++m) same += a.slots_of(m)[0] == b.slots_of(m)[0] ? 1 : 0;
    EXPECT_LT(same, 8);
    EXPECT_NE(a.shard_key(0), b.shard_key(0));
    EXPECT_NE(a.shard_key(0), a.shard_key(1));
    EXPECT_EQ(a.shard_key(10), SlotTable(members, 1, 5).shard_key(10)) << "keys depend on seed and shard only";
}

TEST(SlotTable, TwoMembersWhoseHomeSlotsCollide) {
    // Find two ids hashing to the same home slot of a 2^4 table.
    const uint64_t seed = 0;
    const uint32_t bits = 4;
    const uint64_t mask = (uint64_t{1} << bits) - 1;
    std::string a, b;
    for (int i = 0; b.empty(); ++i) {
        const std::string id = fmt::format("node-{}", i);
        for (int j = 0; j < i && b.empty(); ++j) {
            const std::string other = fmt::format("node-{}", j);
            if ((hash_string(id, seed) & mask) == (hash_string(other, seed) & mask)) {
                a = other;
                b = id;
            }
        }
    }
    const Topology both = members_named({a, b});
    const SlotTable together(both, seed, bits);
    for (const std::string& id : {a, b}) {
        const Topology alone = members_named({id});
        EXPECT_EQ(slots_of_id(together, both, id), slots_of_id(SlotTable(alone, seed, bits), alone, id))
            << "member '" << id << "' sits in a different slot when '" << (id == a ? b : a)
            << "' is (or is not) a member";
    }
}

TEST(SlotTable, AMembersSlotIgnoresTheOtherMembers) {
    const Topology big = members_named(numbered(30));
    const std::vector<std::string> common = {"node-3", "node-17", "node-29"};
    const Topology small = members_named({"node-3", "node-17", "node-29", "stranger", "other-1"});
    for (uint64_t seed = 0; seed < 20; ++seed) {
        const SlotTable tb(big, seed, 7), ts(small, seed, 7);
        for (const auto& id : common)
            EXPECT_EQ(slots_of_id(tb, big, id), slots_of_id(ts, small, id)) << id << " seed " << seed;
    }
}

TEST(SlotTable, RelativePreferenceOfTwoMembersIgnoresTheOthers) {
    const Topology big = members_named(numbered(40));
    const Topology small = members_named({"node-5", "node-21", "new-a", "node-33", "new-b"});
    const uint32_t bits = SlotTable::bits_for(big.size());
    const SlotTable tb(big, 1, bits), ts(small, 1, bits);
    int differ = 0;
    for (uint64_t shard = 0; shard < 300; ++shard) {
        auto restrict_to_common = [&](std::vector<std::string> order) {
            std::erase_if(order, [&](const std::string& id) { return !big.find(id) || !small.find(id); });
            return order;
        };
        const auto from_big = restrict_to_common(preference(tb, big, tb.shard_key(shard)));
        const auto from_small = restrict_to_common(preference(ts, small, ts.shard_key(shard)));
        ASSERT_EQ(from_big.size(), 3u);
        differ += from_big != from_small ? 1 : 0;
    }
    EXPECT_EQ(differ, 0) << "shards whose order of node-5, node-21, node-33 changed with the other members";
}

}  // namespace
}  // namespace cohort::detail
