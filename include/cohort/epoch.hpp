// Epoch order: the deterministic, platform-independent permutation each rank
// walks in an epoch, with the padding and drop_last rules of torch's
// DistributedSampler.
#pragma once

#include <cohort/export.hpp>

#include <cstdint>
#include <vector>

namespace cohort {

struct EpochOptions {
    bool shuffle = true;
    bool drop_last = false;  // trim to a multiple of world_size, else pad
};

// A permutation of 0..n-1 from (seed, epoch); the same on every machine.
COHORT_API std::vector<uint64_t> epoch_permutation(uint64_t n, uint64_t seed, uint64_t epoch);

// The indices rank `rank` of `world_size` visits: the permutation padded by
// repeating it from the start (or trimmed) to a multiple of world_size, then
// every world_size-th entry starting at `rank`. Throws Error(invalid_argument)
// if rank >= world_size or world_size == 0.
COHORT_API std::vector<uint64_t> epoch_order(uint64_t n, uint64_t seed, uint64_t epoch, uint32_t rank,
                                  uint32_t world_size, EpochOptions options = {});

}  // namespace cohort
