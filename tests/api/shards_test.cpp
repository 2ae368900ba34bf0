// ShardSet::split: byte ranges that cover the dataset exactly once.
#include "support.hpp"

#include <cohort/shards.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

namespace cohort::test {
namespace {

using ::testing::HasSubstr;

uint64_t ceil_div(uint64_t a, uint64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

// No empty shard, sizes within one byte of each other, and the segments,
// read in shard order, walk every non-empty file from its first byte to its
// last with no gap and no overlap.
void check_cover(const ShardSet& shards, const std::string& trace) {
    SCOPED_TRACE(trace);
    const auto files = shards.dataset().files();
    std::size_t file = 0;
    uint64_t offset = 0;
    auto skip_empty = [&] {
        while (file < files.size() && offset == files[file].bytes) {
            ++file;
            offset = 0;
        }
    };
    skip_empty();
    uint64_t smallest = UINT64_MAX, largest = 0, sum = 0;
    for (uint64_t s = 0; s < shards.size(); ++s) {
        const auto segments = shards.segments(s);
        ASSERT_FALSE(segments.empty()) << "shard " << s << " has no segment";
        uint64_t bytes = 0;
        for (const Segment& seg : segments) {
            ASSERT_LT(file, files.size()) << "shard " << s << " runs past the last file";
            ASSERT_EQ(seg.file, file) << "shard " << s << ": segment out of order";
            ASSERT_EQ(seg.begin, offset) << "shard " << s << ": gap or overlap in file " << file;
            ASSERT_GT(seg.end, seg.begin) << "shard " << s << ": empty segment";
            ASSERT_LE(seg.end, files[file].bytes) << "shard " << s << ": segment past the end of its file";
            bytes += seg.bytes();
            offset = seg.end;
            skip_empty();
        }
        EXPECT_EQ(shards.bytes(s), bytes);
        ASSERT_GT(bytes, 0u) << "shard " << s << " is empty";
        smallest = std::min(smallest, bytes);
        largest = std::max(largest, bytes);
        sum += bytes;
    }
    EXPECT_EQ(file, files.size()) << "bytes left uncovered";
    EXPECT_EQ(sum, shards.dataset().total_bytes());
    EXPECT_LE(largest - smallest, 1u) << "shards are not near even";
}

TEST(Shards, SplitByTargetSize) {
    const Dataset d = Dataset::from_file(data_path("dataset.txt"));  // 5248 bytes
    for (uint64_t target : {1u, 7u, 100u, 1000u, 1024u, 2624u, 2625u, 5247u, 5248u, 100000u}) {
        const ShardSet s = ShardSet::split(d, {.shard_bytes = target});
        EXPECT_EQ(s.size(), ceil_div(d.total_bytes(), target)) << "target " << target;
        for (uint64_t i = 0; i < s.size(); ++i) ASSERT_LE(s.bytes(i), target) << "target " << target << " shard " << i;
        check_cover(s, "target " + std::to_string(target));
    }
}

TEST(Shards, SplitByCount) {
    const Dataset d = Dataset::from_file(data_path("dataset.txt"));
    for (uint64_t count : {1u, 2u, 3u, 4u, 5u, 64u, 1000u, 5248u}) {
        const ShardSet s = ShardSet::split(d, {.shard_count = count});
        EXPECT_EQ(s.size(), count);
        check_cover(s, "count " + std::to_string(count));
    }
}

TEST(Shards, ExactLayoutOfASmallSplit) {
    const Dataset d = dataset_of({10, 0, 5, 5});
    const ShardSet s = ShardSet::split(d, {.shard_count = 3});  // 20 bytes: 6, 7, 7
    ASSERT_EQ(s.size(), 3u);
    ASSERT_EQ(s.segments(0).size(), 1u);
    EXPECT_EQ(s.segments(0)[0].file, 0u);
    EXPECT_EQ(s.segments(0)[0].end, 6u);
    ASSERT_EQ(s.segments(1).size(), 2u);
    EXPECT_EQ(s.segments(1)[0].file, 0u);
    EXPECT_EQ(s.segments(1)[0].begin, 6u);
    EXPECT_EQ(s.segments(1)[1].file, 2u);  // the empty file has no segment
    EXPECT_EQ(s.segments(1)[1].end, 3u);
    ASSERT_EQ(s.segments(2).size(), 2u);
    EXPECT_EQ(s.segments(2)[0].file, 2u);
    EXPECT_EQ(s.segments(2)[1].file, 3u);
    EXPECT_EQ(s.bytes(0) + s.bytes(1) + s.bytes(2), 20u);
}

TEST(Shards, RandomDatasetsAreCoveredExactlyOnce) {
    const uint64_t seed = test_seed();
    std::mt19937_64 rng(seed);
    for (int round = 0; round < 300; ++round) {
        std::vector<uint64_t> sizes(1 + rng() % 30);
        for (auto& b : sizes) {
            switch (rng() % 5) {
                case 0: b = 0; break;                          // empty files
                case 1: b = 1 + rng() % 3; break;              // tiny
                case 2: b = rng() % (uint64_t{1} << 50); break;  // huge
                default: b = rng() % 100000; break;
            }
        }
        if (std::all_of(sizes.begin(), sizes.end(), [](uint64_t b) { return b == 0; })) sizes.push_back(1);
        const Dataset d = dataset_of(sizes);
        const uint64_t total = d.total_bytes();
        SplitSpec spec;
        if (rng() % 2 == 0) spec.shard_count = 1 + rng() % std::min<uint64_t>(total, 2000);
        else spec.shard_bytes = std::max<uint64_t>(1, total / (1 + rng() % 2000)) + rng() % 3;
        const ShardSet s = ShardSet::split(d, spec);
        const std::string trace = "seed " + std::to_string(seed) + " round " + std::to_string(round);
        if (spec.shard_count != 0) {
            EXPECT_EQ(s.size(), spec.shard_count) << trace;
        } else {
            EXPECT_EQ(s.size(), ceil_div(total, spec.shard_bytes)) << trace;
            for (uint64_t i = 0; i < s.size(); ++i) ASSERT_LE(s.bytes(i), spec.shard_bytes) << trace;
        }
        check_cover(s, trace);
        if (HasFatalFailure()) return;
    }
}

TEST(Shards, MoreShardsThanBytesIsUnsatisfiable) {
    const Dataset d = dataset_of({3, 0, 2});
    EXPECT_EQ(ShardSet::split(d, {.shard_count = 5}).size(), 5u);
    EXPECT_THAT(error_message(Errc::unsatisfiable, [&] { ShardSet::split(d, {.shard_count = 6}); }),
                HasSubstr("at most 5"));
    EXPECT_THAT(error_message(Errc::unsatisfiable, [] { ShardSet::split(dataset_of({0, 0}), {.shard_bytes = 1}); }),
                HasSubstr("no bytes"));
    error_message(Errc::unsatisfiable, [] { ShardSet::split(Dataset{}, {.shard_count = 1}); });
}

TEST(Shards, SpecNeedsExactlyOneOfBytesAndCount) {
    const Dataset d = dataset_of({100});
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { ShardSet::split(d, {}); }), HasSubstr("exactly one"));
    EXPECT_THAT(error_message(Errc::invalid_argument,
                              [&] { ShardSet::split(d, {.shard_bytes = 10, .shard_count = 10}); }),
                HasSubstr("exactly one"));
}

TEST(Shards, TooManyShardsIsRejected) {
    const Dataset d = dataset_of({uint64_t{1} << 50});
    error_message(Errc::invalid_argument, [&] { ShardSet::split(d, {.shard_count = (uint64_t{1} << 40) + 1}); });
    error_message(Errc::invalid_argument, [&] { ShardSet::split(d, {.shard_bytes = 512}); });
}

// Found by tests/fuzz/dataset_file: a listing with one 63 PiB file cut into
// 1 MiB shards asked for 63 * 2^30 shards, under the old cap of 2^40, and the
// split tried to reserve half a terabyte. The cap is now one that fits in
// memory, and the message says what to do.
TEST(Shards, ShardCountIsCappedAtWhatFitsInMemory) {
    const Dataset d = Dataset::from_string("0.rec\t63PiB\n", Format::listing);
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { ShardSet::split(d, {.shard_bytes = 1 << 20}); }),
                HasSubstr("67645734912 shards is too many (at most 2^24, 16777216): ask for larger shards"));
    EXPECT_THAT(error_message(Errc::invalid_argument,
                              [&] { ShardSet::split(d, {.shard_count = (uint64_t{1} << 24) + 1}); }),
                HasSubstr("too many"));
}

TEST(Shards, RecordEstimatesSumExactlyToTheFileRecords) {
    const uint64_t seed = test_seed();
    std::mt19937_64 rng(seed);
    for (int round = 0; round < 200; ++round) {
        Dataset d;
        uint64_t total_records = 0;
        const int files = 1 + static_cast<int>(rng() % 12);
        for (int f = 0; f < files; ++f) {
            const uint64_t bytes = 1 + rng() % (rng() % 2 == 0 ? 50 : (uint64_t{1} << 40));
            // Fewer, as many, or far more records than bytes.
            const uint64_t records = rng() % 3 == 0 ? rng() % (uint64_t{1} << 40) : rng() % (bytes + 1);
            d.add({"f" + std::to_string(f), bytes, records});
            total_records += records;
        }
        const ShardSet s = ShardSet::split(d, {.shard_count = 1 + rng() % std::min<uint64_t>(d.total_bytes(), 300)});
        uint64_t sum = 0;
        for (uint64_t i = 0; i < s.size(); ++i) {
            const auto r = s.records(i);
            ASSERT_TRUE(r.has_value());
            sum += *r;
        }
        ASSERT_EQ(sum, total_records) << "seed " << seed << " round " << round;
    }
}

TEST(Shards, RecordsProportionalToBytesAndUnknownWhenAFileHasNoCount) {
    Dataset d;
    d.add({"a", 100, 10});
    d.add({"b", 100, {}});
    const ShardSet s = ShardSet::split(d, {.shard_count = 4});
    EXPECT_EQ(s.records(0), 5u);
    EXPECT_EQ(s.records(1), 5u);
    EXPECT_EQ(s.records(2), std::nullopt);
    EXPECT_EQ(s.records(3), std::nullopt);
    EXPECT_EQ(s.dataset().size(), 2u);
}

TEST(Shards, KeepsItsOwnCopyOfTheDataset) {
    ShardSet s = [] {
        Dataset d = dataset_of({10, 20});
        return ShardSet::split(d, {.shard_count = 3});
    }();
    EXPECT_EQ(s.dataset().total_bytes(), 30u);
    EXPECT_EQ(s.dataset().files()[1].path, "file-1");
}

}  // namespace
}  // namespace cohort::test
