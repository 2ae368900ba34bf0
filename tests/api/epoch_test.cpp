// epoch_permutation / epoch_order: deterministic, platform-independent, with
// DistributedSampler's padding and drop_last rules.
#include "support.hpp"

#include <cohort/epoch.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

namespace cohort::test {
namespace {

using ::testing::HasSubstr;

bool is_permutation_of_n(const std::vector<uint64_t>& p, uint64_t n) {
    std::vector<uint64_t> sorted = p;
    std::sort(sorted.begin(), sorted.end());
    std::vector<uint64_t> iota(n);
    std::iota(iota.begin(), iota.end(), uint64_t{0});
    return sorted == iota;
}

// Rank r's i-th index at position i * world + r.
std::vector<uint64_t> interleave(uint64_t n, uint64_t seed, uint64_t epoch, uint32_t world, EpochOptions options) {
    std::vector<std::vector<uint64_t>> per_rank;
    for (uint32_t r = 0; r < world; ++r) per_rank.push_back(epoch_order(n, seed, epoch, r, world, options));
    for (uint32_t r = 1; r < world; ++r) EXPECT_EQ(per_rank[r].size(), per_rank[0].size()) << "rank " << r;
    std::vector<uint64_t> all;
    for (std::size_t i = 0; i < per_rank[0].size(); ++i)
        for (uint32_t r = 0; r < world; ++r) all.push_back(per_rank[r].at(i));
    return all;
}

TEST(EpochPermutation, GoldenValue) {
    // Pinned (and checked against an independent reimplementation of
    // SplitMix64 + Lemire + Fisher-Yates): a change reshuffles every user's data.
    EXPECT_THAT(epoch_permutation(10, 42, 0), ::testing::ElementsAre(8, 9, 5, 2, 3, 1, 0, 4, 6, 7));
}

TEST(EpochPermutation, IsAPermutation) {
    for (uint64_t n : {0u, 1u, 2u, 3u, 10u, 1000u, 65537u}) {
        EXPECT_TRUE(is_permutation_of_n(epoch_permutation(n, 7, 3), n)) << "n " << n;
    }
}

TEST(EpochPermutation, DeterministicPerSeedAndEpoch) {
    EXPECT_EQ(epoch_permutation(500, 1, 2), epoch_permutation(500, 1, 2));
    EXPECT_NE(epoch_permutation(500, 1, 2), epoch_permutation(500, 1, 3));
    EXPECT_NE(epoch_permutation(500, 1, 2), epoch_permutation(500, 2, 2));
    // Consecutive epochs all differ from each other.
    std::vector<std::vector<uint64_t>> seen;
    for (uint64_t e = 0; e < 20; ++e) {
        auto p = epoch_permutation(100, 9, e);
        EXPECT_EQ(std::count(seen.begin(), seen.end(), p), 0) << "epoch " << e;
        seen.push_back(std::move(p));
    }
}

TEST(EpochPermutation, ActuallyShuffles) {
    const auto p = epoch_permutation(1000, 0, 0);
    int fixed = 0;
    for (uint64_t i = 0; i < p.size(); ++i) fixed += p[i] == i ? 1 : 0;
    EXPECT_LT(fixed, 10);  // about one expected
}

TEST(EpochOrder, PaddedByRepeatingFromTheStart) {
    for (uint64_t n : {1u, 7u, 10u, 11u, 12u, 100u}) {
        for (uint32_t world : {1u, 2u, 3u, 4u, 7u}) {
            const auto perm = epoch_permutation(n, 5, 1);
            const auto all = interleave(n, 5, 1, world, {});
            const uint64_t total = (n + world - 1) / world * world;
            ASSERT_EQ(all.size(), total) << "n " << n << " world " << world;
            for (uint64_t i = 0; i < total; ++i) ASSERT_EQ(all[i], perm[i % n]) << "n " << n << " world " << world;
        }
    }
}

TEST(EpochOrder, DropLastTrims) {
    for (uint64_t n : {0u, 1u, 7u, 10u, 11u, 12u, 100u}) {
        for (uint32_t world : {1u, 2u, 3u, 4u, 7u}) {
            const auto perm = epoch_permutation(n, 5, 1);
            EpochOptions o;
            o.drop_last = true;
            for (uint32_t r = 0; r < world; ++r) EXPECT_EQ(epoch_order(n, 5, 1, r, world, o).size(), n / world);
            if (n / world == 0) continue;
            const auto all = interleave(n, 5, 1, world, o);
            ASSERT_EQ(all.size(), n / world * world);
            EXPECT_TRUE(std::equal(all.begin(), all.end(), perm.begin()));
        }
    }
}

TEST(EpochOrder, FewerItemsThanRanksPadsSeveralTimesOver) {
    const auto perm = epoch_permutation(3, 11, 0);
    for (uint32_t r = 0; r < 8; ++r) {
        const auto mine = epoch_order(3, 11, 0, r, 8);
        ASSERT_EQ(mine.size(), 1u);
        EXPECT_EQ(mine[0], perm[r % 3]) << "rank " << r;
    }
    EpochOptions o;
    o.drop_last = true;
    EXPECT_TRUE(epoch_order(3, 11, 0, 0, 8, o).empty());
}

TEST(EpochOrder, WithoutShuffleInOrder) {
    EpochOptions o;
    o.shuffle = false;
    EXPECT_THAT(epoch_order(10, 99, 4, 0, 3, o), ::testing::ElementsAre(0, 3, 6, 9));
    EXPECT_THAT(epoch_order(10, 99, 4, 1, 3, o), ::testing::ElementsAre(1, 4, 7, 0));
    EXPECT_THAT(epoch_order(10, 99, 4, 2, 3, o), ::testing::ElementsAre(2, 5, 8, 1));
    o.drop_last = true;
    EXPECT_THAT(epoch_order(10, 99, 4, 2, 3, o), ::testing::ElementsAre(2, 5, 8));
    EXPECT_THAT(epoch_order(5, 0, 0, 0, 1, o), ::testing::ElementsAre(0, 1, 2, 3, 4));
}

TEST(EpochOrder, EmptyDataset) {
    EXPECT_TRUE(epoch_order(0, 1, 1, 0, 4).empty());
    EXPECT_TRUE(epoch_permutation(0, 1, 1).empty());
}

TEST(EpochOrder, RandomSizesCoverEveryIndex) {
    const uint64_t seed = test_seed();
    std::mt19937_64 rng(seed);
    for (int round = 0; round < 100; ++round) {
        const uint64_t n = 1 + rng() % 300;
        const auto world = static_cast<uint32_t>(1 + rng() % 16);
        const uint64_t data_seed = rng(), epoch = rng() % 100;
        const auto all = interleave(n, data_seed, epoch, world, {});
        std::vector<uint64_t> head(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(std::min<uint64_t>(n, all.size())));
        ASSERT_TRUE(is_permutation_of_n(head, n)) << "seed " << seed << " round " << round;
        ASSERT_EQ(all.size() % world, 0u);
        ASSERT_LT(all.size() - n, world) << "pads less than one item per rank";
    }
}

TEST(EpochOrder, BadRankOrWorld) {
    EXPECT_THAT(error_message(Errc::invalid_argument, [] { epoch_order(10, 0, 0, 4, 4); }),
                HasSubstr("rank 4 is out of range for world_size 4"));
    error_message(Errc::invalid_argument, [] { epoch_order(10, 0, 0, 9, 4); });
    EXPECT_THAT(error_message(Errc::invalid_argument, [] { epoch_order(10, 0, 0, 0, 0); }), HasSubstr("world_size"));
    EXPECT_THAT(error_message(Errc::invalid_argument, [] { epoch_order((uint64_t{1} << 40) + 1, 0, 0, 0, 1); }),
                HasSubstr("too large"));
}

}  // namespace
}  // namespace cohort::test
