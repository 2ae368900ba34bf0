// Synthetic shards (data.hpp).
#include "data.hpp"

namespace cohort_train {

namespace {

constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ULL;   // splitmix64's increment
constexpr uint64_t kStream = 0xD1B54A32D192ED03ULL;  // spreads stream numbers apart

}  // namespace

uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

uint64_t SplitMix64::next() {
    state_ += kGamma;
    return mix64(state_);
}

double SplitMix64::unit() {
    return static_cast<double>(next() >> 11) * 0x1.0p-53;
}

double SplitMix64::symmetric() {
    return 2.0 * unit() - 1.0;
}

uint64_t stream_state(uint64_t seed, uint64_t stream) {
    return mix64(seed ^ (kStream * (stream + 1)));
}

Truth make_truth(const DataConfig& config) {
    SplitMix64 rng(stream_state(config.seed, 0));
    Truth truth;
    truth.w.resize(config.features);
    for (double& w : truth.w) w = rng.symmetric();
    truth.b = rng.symmetric();
    return truth;
}

Shard make_shard(const DataConfig& config, const Truth& truth, uint64_t index) {
    SplitMix64 rng(stream_state(config.seed, index + 1));
    const std::size_t d = config.features;
    Shard shard;
    shard.x.resize(std::size_t{config.rows_per_shard} * d);
    shard.y.resize(config.rows_per_shard);
    for (std::size_t row = 0; row < config.rows_per_shard; ++row) {
        double* x = &shard.x[row * d];
        double y = 0;
        for (std::size_t j = 0; j < d; ++j) {
            x[j] = rng.symmetric();
            y += x[j] * truth.w[j];
        }
        shard.y[row] = y + truth.b + config.noise * rng.symmetric();
    }
    return shard;
}

}  // namespace cohort_train
