// What cohort-train prints and writes at the end: the per-epoch table, the
// comparison with the single-process reference, the weights as JSON.
#pragma once

#include "model.hpp"
#include "train_state.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace cohort_train {

// "epoch | shards | steps | loss" lines, each after `prefix`.
void print_summary(std::string_view prefix, const std::vector<EpochRecord>& history, uint32_t shards);

// Trains the reference in this process, prints "max |w - w_ref| = X
// (tolerance 1e-9): OK" (or FAIL) after `prefix`; true when within it.
bool check_against_reference(std::string_view prefix, const Model& model, const ModelConfig& config);

// {"features", "shards", "epochs", "seed", "weights": [...], "bias", "loss": [...]}
// with every double written so that it reads back exactly. Error(io) naming
// the file when it cannot be written.
void write_weights(const std::string& path, const Model& model, const std::vector<double>& epoch_loss,
                   const ModelConfig& config);

}  // namespace cohort_train
