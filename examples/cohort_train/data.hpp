// The training demo's synthetic data: a linear model with noise, generated
// from (seed, shard) alone so that any worker can make any shard, and so
// that examples/train_numpy.py makes the same numbers. Both sides use the
// splitmix64 streams defined here; change one, change the other.
#pragma once

#include <cstdint>
#include <vector>

namespace cohort_train {

struct DataConfig {
    uint64_t seed = 1;
    uint32_t features = 16;
    uint32_t rows_per_shard = 256;
    uint32_t shards = 64;
    double noise = 0.01;  // y's noise is uniform in [-noise, noise)
};

// splitmix64 (Steele, Lea and Flood 2014): one add and a bijective mix per
// draw, trivial to write identically in Python with 64-bit wrap-around.
class SplitMix64 {
public:
    explicit SplitMix64(uint64_t state) : state_(state) {}
    uint64_t next();
    double unit();       // [0, 1): the top 53 bits
    double symmetric();  // [-1, 1): 2 * unit() - 1, exact in double

private:
    uint64_t state_;
};

// The mix step of splitmix64.
uint64_t mix64(uint64_t z);
// The start of stream `stream` for `seed`: stream 0 draws the true model,
// stream i + 1 draws shard i.
uint64_t stream_state(uint64_t seed, uint64_t stream);

// The model the data comes from.
struct Truth {
    std::vector<double> w;
    double b = 0;
};
Truth make_truth(const DataConfig& config);

// One shard's rows. Per row, in draw order: the features, then the noise.
// y = ((x0*w0 + x1*w1) + ...) + b + noise, summed left to right.
struct Shard {
    std::vector<double> x;  // rows_per_shard x features, row-major
    std::vector<double> y;
};
Shard make_shard(const DataConfig& config, const Truth& truth, uint64_t index);

}  // namespace cohort_train
