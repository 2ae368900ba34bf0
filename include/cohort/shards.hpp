// Shards: the dataset cut into byte ranges. Stored flat (one array of
// segments, one of offsets) because plans reach millions of shards.
#pragma once

#include <cohort/export.hpp>

#include <cohort/dataset.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

namespace cohort {

struct Segment {
    uint32_t file = 0;   // index into the dataset
    uint64_t begin = 0;  // byte range [begin, end) of that file
    uint64_t end = 0;
    uint64_t bytes() const { return end - begin; }
};

struct SplitSpec {
    uint64_t shard_bytes = 0;  // target size: no shard larger, all near even
    uint64_t shard_count = 0;  // or an exact count; give exactly one
};

class COHORT_API ShardSet {
public:
    // Cuts the concatenated bytes of all files into near-equal shards: no
    // shard is empty and every byte of every file is in exactly one shard.
    // Throws Error(invalid_argument) for a bad spec and Error(unsatisfiable)
    // when the dataset has fewer bytes than shards asked for.
    static ShardSet split(const Dataset& dataset, SplitSpec spec);

    uint64_t size() const { return offsets_.size() - 1; }
    std::span<const Segment> segments(uint64_t shard) const {
        return {segments_.data() + offsets_[shard], segments_.data() + offsets_[shard + 1]};
    }
    uint64_t bytes(uint64_t shard) const;
    // Records in the shard, estimated per file as if records were of equal
    // size; exact in total. Empty if any file's record count is unknown.
    std::optional<uint64_t> records(uint64_t shard) const;
    const Dataset& dataset() const { return *dataset_; }

private:
    std::shared_ptr<const Dataset> dataset_;
    std::vector<Segment> segments_;
    std::vector<uint64_t> offsets_{0};
};

}  // namespace cohort
