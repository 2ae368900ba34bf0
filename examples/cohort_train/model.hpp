// The training demo's model: linear regression trained by full-batch
// gradient descent, one update per epoch from the gradient summed over
// every shard. The sum does not depend on who computed which shard, so an
// elastic run must end where the sequential reference ends (up to rounding).
#pragma once

#include "data.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace cohort_train {

struct ModelConfig {
    DataConfig data;
    uint32_t epochs = 3;
    double lr = 0.5;

    uint64_t total_rows() const { return uint64_t{data.shards} * data.rows_per_shard; }
};

// w, then b; both start at zero.
struct Model {
    std::vector<double> w;
    double b = 0;
};

Model initial_model(const ModelConfig& config);

// A shard's share of the squared error's gradient, summed over its rows
// (features + 1 values: d/dw, then d/db), with its loss sum and row count.
struct ShardGradient {
    std::vector<double> grad;
    double loss_sum = 0;
    double rows = 0;
};
ShardGradient shard_gradient(const Model& model, const Shard& shard);

// w -= lr * grad_sum / total_rows (and b with the last element).
void apply_update(Model& model, std::span<const double> grad_sum, const ModelConfig& config);

// The single-process run: every epoch visits the shards in order.
struct Reference {
    Model model;
    std::vector<double> epoch_loss;  // mean squared error during each epoch
};
Reference train_reference(const ModelConfig& config);

// The largest |a - b| over the weights and the bias.
double max_difference(const Model& a, const Model& b);

}  // namespace cohort_train
