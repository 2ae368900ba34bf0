// Linear regression by full-batch gradient descent (model.hpp).
#include "model.hpp"

#include <algorithm>
#include <cmath>

namespace cohort_train {

Model initial_model(const ModelConfig& config) {
    Model model;
    model.w.assign(config.data.features, 0.0);
    return model;
}

ShardGradient shard_gradient(const Model& model, const Shard& shard) {
    const std::size_t d = model.w.size();
    ShardGradient out;
    out.grad.assign(d + 1, 0.0);
    out.rows = static_cast<double>(shard.y.size());
    for (std::size_t row = 0; row < shard.y.size(); ++row) {
        const double* x = &shard.x[row * d];
        double prediction = 0;
        for (std::size_t j = 0; j < d; ++j) prediction += model.w[j] * x[j];
        const double residual = prediction + model.b - shard.y[row];
        out.loss_sum += residual * residual;
        for (std::size_t j = 0; j < d; ++j) out.grad[j] += 2.0 * residual * x[j];
        out.grad[d] += 2.0 * residual;
    }
    return out;
}

void apply_update(Model& model, std::span<const double> grad_sum, const ModelConfig& config) {
    const double scale = config.lr / static_cast<double>(config.total_rows());
    for (std::size_t j = 0; j < model.w.size(); ++j) model.w[j] -= scale * grad_sum[j];
    model.b -= scale * grad_sum[model.w.size()];
}

Reference train_reference(const ModelConfig& config) {
    const Truth truth = make_truth(config.data);
    std::vector<Shard> shards;
    shards.reserve(config.data.shards);
    for (uint32_t i = 0; i < config.data.shards; ++i) shards.push_back(make_shard(config.data, truth, i));

    Reference ref{initial_model(config), {}};
    for (uint32_t epoch = 0; epoch < config.epochs; ++epoch) {
        std::vector<double> sum(config.data.features + 1, 0.0);
        double loss = 0;
        for (const Shard& shard : shards) {
            const ShardGradient g = shard_gradient(ref.model, shard);
            for (std::size_t j = 0; j < sum.size(); ++j) sum[j] += g.grad[j];
            loss += g.loss_sum;
        }
        apply_update(ref.model, sum, config);
        ref.epoch_loss.push_back(loss / static_cast<double>(config.total_rows()));
    }
    return ref;
}

double max_difference(const Model& a, const Model& b) {
    double worst = std::abs(a.b - b.b);
    for (std::size_t j = 0; j < a.w.size() && j < b.w.size(); ++j) worst = std::max(worst, std::abs(a.w[j] - b.w[j]));
    if (a.w.size() != b.w.size()) return INFINITY;
    return worst;
}

}  // namespace cohort_train
