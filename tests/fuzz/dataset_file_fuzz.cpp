// Dataset files (docs/formats.md): YAML, JSON or a listing of
// "PATH BYTES [RECORDS]" lines, the format sniffed. A dataset that loads
// is cut into shards, by count and by size, as the sharding API does next.
#include "fuzz_input.hpp"

#include <cohort/dataset.hpp>
#include <cohort/shards.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    cohort::fuzz::expect_named_errors("dataset file", [&] {
        const cohort::Dataset dataset = cohort::Dataset::from_string(text, cohort::Format::automatic, "fuzz");
        for (const uint64_t count : {uint64_t{1}, uint64_t{3}, uint64_t{64}}) {
            cohort::fuzz::expect_named_errors("dataset split", [&] {
                const cohort::ShardSet shards = cohort::ShardSet::split(dataset, {.shard_count = count});
                for (uint64_t s = 0; s < shards.size(); ++s) (void)shards.records(s);
            });
        }
        // Millions of shards are valid but slow the fuzzer down; past the
        // cap (2^24) the split must refuse at once.
        constexpr uint64_t kShardBytes = uint64_t{1} << 20;
        const uint64_t count = dataset.total_bytes() / kShardBytes;
        if (count <= (uint64_t{1} << 16) || count > (uint64_t{1} << 24)) {
            cohort::fuzz::expect_named_errors(
                "dataset split", [&] { (void)cohort::ShardSet::split(dataset, {.shard_bytes = kShardBytes}); });
        }
    });
    return 0;
}
