// The training state every rank holds a copy of. It changes only through
// steps that every rank of a world applies alike, or through the state
// sync at the start of a world, so every rank agrees on which shards the
// current epoch's gradient already includes: that set is what makes a
// shard count once however often workers die (docs in elastic_loop.hpp).
#pragma once

#include "model.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace cohort_train {

struct EpochRecord {
    double loss = 0;     // mean squared error over the epoch's rows
    uint64_t steps = 0;  // steps the epoch took
};

// What a step adds: the contributions of every rank, summed.
struct StepSum {
    std::span<const double> grad;  // features + 1
    double loss_sum = 0;
    double rows = 0;
};

class TrainState {
public:
    explicit TrainState(const ModelConfig& config);

    const Model& model() const { return model_; }
    uint32_t epoch() const { return epoch_; }
    bool finished() const { return epoch_ >= config_.epochs; }
    uint64_t applied_steps() const { return applied_steps_; }
    const std::vector<EpochRecord>& history() const { return history_; }
    bool included(uint64_t shard) const { return shard < included_.size() && included_[shard] != 0; }
    uint64_t included_count() const { return included_count_; }

    // Adds a step's sums and marks `shards` (this epoch's) included. When
    // the epoch is complete it applies the update and moves to the next
    // epoch; returns true then.
    bool apply_step(const StepSum& sum, std::span<const int64_t> shards);

    // The whole state as doubles (integers below 2^53 are exact), the same
    // length for every rank that runs with the same flags.
    std::vector<double> serialize() const;
    // Error(invalid_argument) when `data` does not fit these flags.
    void deserialize(std::span<const double> data);
    std::size_t serialized_size() const;

private:
    ModelConfig config_;
    Model model_;
    uint32_t epoch_ = 0;
    uint64_t applied_steps_ = 0;
    uint64_t epoch_steps_ = 0;
    std::vector<double> grad_sum_;
    double loss_sum_ = 0;
    double rows_ = 0;
    std::vector<uint8_t> included_;
    uint64_t included_count_ = 0;
    std::vector<EpochRecord> history_;
};

}  // namespace cohort_train
