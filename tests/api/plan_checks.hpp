// Checks every ShardPlan must pass, shared by the sharding and replan tests.
#pragma once

#include "support.hpp"

#include <cohort/sharding.hpp>

#include <gtest/gtest.h>

#include <ostream>
#include <set>
#include <string>
#include <vector>

namespace cohort {
// Test names print the strategy's name.
inline void PrintTo(Strategy strategy, std::ostream* os) { *os << to_string(strategy); }
}  // namespace cohort

namespace cohort::test {

inline constexpr Strategy kBuiltinStrategies[] = {Strategy::round_robin, Strategy::hash, Strategy::locality,
                                                  Strategy::random};

inline std::string strategy_name(const ::testing::TestParamInfo<Strategy>& info) {
    return std::string(to_string(info.param));
}

// Every shard has `replication` distinct owners among the members, and
// loads and member_shards agree with the owners.
inline void check_plan(const ShardPlan& plan) {
    const uint32_t n = plan.member_count();
    const uint32_t r = plan.replication();
    std::vector<uint64_t> loads(n, 0);
    std::vector<std::vector<uint64_t>> held(n);
    for (uint64_t s = 0; s < plan.shard_count(); ++s) {
        const auto owners = plan.owners(s);
        ASSERT_EQ(owners.size(), r);
        std::set<uint32_t> distinct;
        for (uint32_t k = 0; k < r; ++k) {
            ASSERT_LT(owners[k], n) << "shard " << s;
            ASSERT_EQ(plan.owner(s, k), owners[k]);
            distinct.insert(owners[k]);
            ++loads[owners[k]];
            held[owners[k]].push_back(s);
        }
        ASSERT_EQ(distinct.size(), r) << "shard " << s << " has a member twice";
    }
    ASSERT_EQ(plan.loads().size(), n);
    uint64_t total = 0;
    for (uint32_t m = 0; m < n; ++m) {
        EXPECT_EQ(plan.load(m), loads[m]) << "member " << m;
        const auto mine = plan.member_shards(m);
        EXPECT_EQ(std::vector<uint64_t>(mine.begin(), mine.end()), held[m]) << "member " << m;
        total += plan.load(m);
    }
    EXPECT_EQ(total, plan.shard_count() * r);
}

// "id (load), ..." for a shard's owners, for failure messages.
inline std::string owners_text(const ShardPlan& plan, uint64_t shard) {
    std::string text;
    for (uint32_t m : plan.owners(shard))
        text += (text.empty() ? "" : ", ") + plan.members()[m].id + " (load " + std::to_string(plan.load(m)) + ")";
    return text;
}

inline uint64_t max_load(const ShardPlan& plan) {
    uint64_t m = 0;
    for (uint64_t l : plan.loads()) m = std::max(m, l);
    return m;
}

inline uint64_t min_load(const ShardPlan& plan) {
    uint64_t m = UINT64_MAX;
    for (uint64_t l : plan.loads()) m = std::min(m, l);
    return m;
}

inline std::vector<std::string> owner_ids(const ShardPlan& plan) {
    std::vector<std::string> ids;
    for (uint64_t s = 0; s < plan.shard_count(); ++s)
        for (uint32_t m : plan.owners(s)) ids.push_back(plan.members()[m].id);
    return ids;
}

inline ShardSet even_shards(uint64_t count, uint64_t files = 10) {
    std::vector<uint64_t> sizes(files, count * 1000);
    return ShardSet::split(dataset_of(sizes), {.shard_count = count});
}

}  // namespace cohort::test
