#include <cohort/error.hpp>
#include <cohort/shards.hpp>

#include "core/hash.hpp"

#include <fmt/format.h>

namespace cohort {

namespace {

using u128 = detail::uint128;

constexpr uint64_t kMaxShards = uint64_t{1} << 24;

// Start of shard i in the concatenated byte stream: floor(i * total / count),
// so sizes differ by at most one byte.
uint64_t boundary(uint64_t i, uint64_t total, uint64_t count) {
    return static_cast<uint64_t>(static_cast<u128>(i) * total / count);
}

}  // namespace

ShardSet ShardSet::split(const Dataset& dataset, SplitSpec spec) {
    if ((spec.shard_bytes == 0) == (spec.shard_count == 0)) {
        throw Error(Errc::invalid_argument,
                    "give exactly one of shard_bytes (a target shard size) and shard_count");
    }
    const uint64_t total = dataset.total_bytes();
    if (total == 0) {
        throw Error(Errc::unsatisfiable,
                    fmt::format("the dataset has {} file(s) and no bytes: nothing to shard", dataset.size()));
    }
    uint64_t count = spec.shard_count;
    if (count == 0) count = total / spec.shard_bytes + (total % spec.shard_bytes != 0 ? 1 : 0);
    if (count > total) {
        throw Error(Errc::unsatisfiable,
                    fmt::format("cannot cut {} bytes into {} non-empty shards; ask for at most {}", total, count,
                                total));
    }
    // Every shard costs about 32 bytes here before any is used: a count a
    // file's sizes can reach (a 63 PiB file in 1 MiB shards) must be an
    // error, not an allocation of terabytes.
    if (count > kMaxShards) {
        throw Error(Errc::invalid_argument,
                    fmt::format("{} shards is too many (at most 2^24, {}): ask for larger shards", count, kMaxShards));
    }

    ShardSet set;
    set.dataset_ = std::make_shared<const Dataset>(dataset);
    set.offsets_.reserve(count + 1);
    set.segments_.reserve(count + dataset.size());
    const auto files = dataset.files();
    std::size_t file = 0;
    uint64_t file_start = 0;  // global offset of files[file]
    while (file < files.size() && files[file].bytes == 0) ++file;
    for (uint64_t shard = 0; shard < count; ++shard) {
        uint64_t begin = boundary(shard, total, count);
        const uint64_t end = boundary(shard + 1, total, count);
        while (begin < end) {
            const uint64_t file_end = file_start + files[file].bytes;
            const uint64_t stop = std::min(end, file_end);
            set.segments_.push_back(Segment{static_cast<uint32_t>(file), begin - file_start, stop - file_start});
            begin = stop;
            if (stop == file_end) {
                file_start = file_end;
                ++file;
                while (file < files.size() && files[file].bytes == 0) ++file;
            }
        }
        set.offsets_.push_back(set.segments_.size());
    }
    return set;
}

uint64_t ShardSet::bytes(uint64_t shard) const {
    uint64_t total = 0;
    for (const Segment& s : segments(shard)) total += s.bytes();
    return total;
}

std::optional<uint64_t> ShardSet::records(uint64_t shard) const {
    uint64_t total = 0;
    for (const Segment& s : segments(shard)) {
        const DataFile& file = dataset_->files()[s.file];
        if (!file.records) return std::nullopt;
        const u128 r = *file.records;
        total += static_cast<uint64_t>(r * s.end / file.bytes - r * s.begin / file.bytes);
    }
    return total;
}

}  // namespace cohort
