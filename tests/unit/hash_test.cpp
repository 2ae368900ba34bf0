// core/hash.hpp: the fixed hashes and generator that plans and epoch orders
// depend on being identical on every machine.
#include "core/hash.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <set>
#include <vector>

namespace cohort::detail {
namespace {

TEST(Mix64, KnownValues) {
    // SplitMix64 seeded with 0: the reference first output.
    EXPECT_EQ(mix64(0x9e3779b97f4a7c15ULL), 0xe220a8397b1dcdafULL);
    EXPECT_EQ(mix64(0), 0u);
    static_assert(mix64(1) != mix64(2));
}

TEST(HashString, DependsOnTextAndSeed) {
    EXPECT_EQ(hash_string("node-1"), hash_string("node-1"));
    EXPECT_NE(hash_string("node-1"), hash_string("node-2"));
    EXPECT_NE(hash_string("node-1", 1), hash_string("node-1", 2));
    EXPECT_NE(hash_string(""), hash_string("", 1));
}

TEST(Rng, MatchesSplitMix64) {
    Rng rng(0);
    EXPECT_EQ(rng.next(), 0xe220a8397b1dcdafULL);
    EXPECT_EQ(rng.next(), 0x6e789e6aa1b965f4ULL);
    EXPECT_EQ(rng.next(), 0x06c45d188009454fULL);
}

TEST(Rng, SameSeedSameSequence) {
    for (uint64_t seed : {uint64_t{0}, uint64_t{1}, uint64_t{42}, UINT64_MAX}) {
        Rng a(seed), b(seed);
        for (int i = 0; i < 1000; ++i) {
            ASSERT_EQ(a.next(), b.next()) << "seed " << seed << " step " << i;
            ASSERT_EQ(a.below(1000 + i), b.below(1000 + i));
        }
    }
}

TEST(Rng, DifferentSeedsDiffer) {
    Rng a(1), b(2);
    int equal = 0;
    for (int i = 0; i < 100; ++i) equal += a.next() == b.next() ? 1 : 0;
    EXPECT_EQ(equal, 0);
}

TEST(Rng, BelowStaysInBounds) {
    Rng rng(7);
    for (uint64_t bound : {uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{10}, uint64_t{1000003},
                           (uint64_t{1} << 63) + 1, UINT64_MAX - 1, UINT64_MAX}) {
        for (int i = 0; i < 2000; ++i) ASSERT_LT(rng.below(bound), bound) << "bound " << bound;
    }
    for (int i = 0; i < 100; ++i) EXPECT_EQ(rng.below(1), 0u);
}

TEST(Rng, BelowReachesEveryValueRoughlyEvenly) {
    Rng rng(2024);
    constexpr uint64_t kBound = 10;
    constexpr int kDraws = 100000;
    std::array<int, kBound> counts{};
    for (int i = 0; i < kDraws; ++i) ++counts[rng.below(kBound)];
    for (uint64_t v = 0; v < kBound; ++v) {
        // Expected 10000 each; 5 standard deviations is about 475.
        EXPECT_NEAR(counts[v], kDraws / kBound, 500) << "value " << v;
    }
}

TEST(Rng, BelowLargeBoundUsesTheHighHalf) {
    // With bound 2^63 + 1 about half the draws land at or above 2^62.
    Rng rng(99);
    const uint64_t bound = (uint64_t{1} << 63) + 1;
    int upper = 0;
    for (int i = 0; i < 10000; ++i) upper += rng.below(bound) >= (uint64_t{1} << 62) ? 1 : 0;
    EXPECT_NEAR(upper, 5000, 300);
}

TEST(Rng, UnitIsInTheHalfOpenInterval) {
    Rng rng(5);
    double lo = 1, hi = 0;
    for (int i = 0; i < 10000; ++i) {
        const double u = rng.unit();
        ASSERT_GE(u, 0.0);
        ASSERT_LT(u, 1.0);
        lo = std::min(lo, u);
        hi = std::max(hi, u);
    }
    EXPECT_LT(lo, 0.01);
    EXPECT_GT(hi, 0.99);
}

}  // namespace
}  // namespace cohort::detail
