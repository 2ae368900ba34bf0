// The replicated training state and its wire form (train_state.hpp).
#include "train_state.hpp"

#include <cohort/error.hpp>

#include <algorithm>

#include <fmt/format.h>

namespace cohort_train {

TrainState::TrainState(const ModelConfig& config)
    : config_(config),
      model_(initial_model(config)),
      grad_sum_(config.data.features + 1, 0.0),
      included_(config.data.shards, 0) {}

bool TrainState::apply_step(const StepSum& sum, std::span<const int64_t> shards) {
    for (std::size_t j = 0; j < grad_sum_.size(); ++j) grad_sum_[j] += sum.grad[j];
    loss_sum_ += sum.loss_sum;
    rows_ += sum.rows;
    for (const int64_t shard : shards) {
        if (shard < 0 || static_cast<uint64_t>(shard) >= included_.size() || included_[shard]) continue;
        included_[shard] = 1;
        ++included_count_;
    }
    ++applied_steps_;
    ++epoch_steps_;
    if (included_count_ < included_.size()) return false;

    apply_update(model_, grad_sum_, config_);
    history_.push_back({loss_sum_ / static_cast<double>(config_.total_rows()), epoch_steps_});
    ++epoch_;
    epoch_steps_ = 0;
    std::fill(grad_sum_.begin(), grad_sum_.end(), 0.0);
    loss_sum_ = rows_ = 0;
    std::fill(included_.begin(), included_.end(), 0);
    included_count_ = 0;
    return true;
}

// Layout: applied_steps, epoch, epoch_steps, loss_sum, rows, b, w[d],
// grad_sum[d + 1], included[shards] (0 or 1), then per epoch loss, steps.
std::size_t TrainState::serialized_size() const {
    return 6 + model_.w.size() + grad_sum_.size() + included_.size() + 2 * std::size_t{config_.epochs};
}

std::vector<double> TrainState::serialize() const {
    std::vector<double> out;
    out.reserve(serialized_size());
    out.insert(out.end(), {static_cast<double>(applied_steps_), static_cast<double>(epoch_),
                           static_cast<double>(epoch_steps_), loss_sum_, rows_, model_.b});
    out.insert(out.end(), model_.w.begin(), model_.w.end());
    out.insert(out.end(), grad_sum_.begin(), grad_sum_.end());
    for (const uint8_t bit : included_) out.push_back(bit);
    for (uint32_t e = 0; e < config_.epochs; ++e) {
        const EpochRecord r = e < history_.size() ? history_[e] : EpochRecord{};
        out.push_back(r.loss);
        out.push_back(static_cast<double>(r.steps));
    }
    return out;
}

void TrainState::deserialize(std::span<const double> data) {
    if (data.size() != serialized_size()) {
        throw cohort::Error(cohort::Errc::invalid_argument,
                            fmt::format("state sync: got {} values, expected {}: do all workers run with the same "
                                        "--features, --shards and --epochs?",
                                        data.size(), serialized_size()));
    }
    std::size_t i = 0;
    auto take = [&] { return data[i++]; };
    applied_steps_ = static_cast<uint64_t>(take());
    epoch_ = static_cast<uint32_t>(take());
    epoch_steps_ = static_cast<uint64_t>(take());
    loss_sum_ = take();
    rows_ = take();
    model_.b = take();
    for (double& w : model_.w) w = take();
    for (double& g : grad_sum_) g = take();
    included_count_ = 0;
    for (uint8_t& bit : included_) {
        bit = take() != 0 ? 1 : 0;
        included_count_ += bit;
    }
    history_.clear();
    for (uint32_t e = 0; e < config_.epochs; ++e) {
        const double loss = take();
        const auto steps = static_cast<uint64_t>(take());
        if (e < epoch_) history_.push_back({loss, steps});
    }
}

}  // namespace cohort_train
