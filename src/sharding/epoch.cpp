#include <cohort/epoch.hpp>
#include <cohort/error.hpp>

#include "core/hash.hpp"

#include <numeric>

#include <fmt/format.h>

namespace cohort {

std::vector<uint64_t> epoch_permutation(uint64_t n, uint64_t seed, uint64_t epoch) {
    std::vector<uint64_t> order(n);
    std::iota(order.begin(), order.end(), uint64_t{0});
    // Fisher-Yates with our own generator and bounded draw, so every platform
    // and every rank computes the same order.
    detail::Rng rng(detail::hash_combine(detail::mix64(seed), epoch));
    for (uint64_t i = n; i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
    return order;
}

std::vector<uint64_t> epoch_order(uint64_t n, uint64_t seed, uint64_t epoch, uint32_t rank, uint32_t world_size,
                                  EpochOptions options) {
    if (world_size == 0) throw Error(Errc::invalid_argument, "world_size must be at least 1");
    if (rank >= world_size)
        throw Error(Errc::invalid_argument, fmt::format("rank {} is out of range for world_size {}", rank, world_size));
    if (n > (uint64_t{1} << 40)) throw Error(Errc::invalid_argument, fmt::format("n = {} is too large (at most 2^40)", n));
    std::vector<uint64_t> order;
    if (options.shuffle) {
        order = epoch_permutation(n, seed, epoch);
    } else {
        order.resize(n);
        std::iota(order.begin(), order.end(), uint64_t{0});
    }
    // Like DistributedSampler: drop the tail, or pad by repeating from the
    // start (several times over if n < world_size).
    const uint64_t total = options.drop_last ? n / world_size * world_size
                                             : (n + world_size - 1) / world_size * world_size;
    std::vector<uint64_t> mine;
    if (n == 0) return mine;
    mine.reserve(total / world_size);
    for (uint64_t i = rank; i < total; i += world_size) mine.push_back(order[i % n]);
    return mine;
}

}  // namespace cohort
