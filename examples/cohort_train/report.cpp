#include "report.hpp"

#include "../common/files.hpp"

#include <cohort/error.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace cohort_train {

namespace {

constexpr double kTolerance = 1e-9;

}  // namespace

void print_summary(std::string_view prefix, const std::vector<EpochRecord>& history, uint32_t shards) {
    fmt::print("{}epoch | shards | steps | loss\n", prefix);
    for (std::size_t e = 0; e < history.size(); ++e) {
        fmt::print("{}{:>5} | {:>6} | {:>5} | {:.6g}\n", prefix, e + 1, shards, history[e].steps, history[e].loss);
    }
    std::fflush(stdout);
}

bool check_against_reference(std::string_view prefix, const Model& model, const ModelConfig& config) {
    const Reference ref = train_reference(config);
    const double diff = max_difference(model, ref.model);
    const bool ok = diff <= kTolerance;
    fmt::print("{}max |w - w_ref| = {:.3g} (tolerance 1e-9): {}\n", prefix, diff, ok ? "OK" : "FAIL");
    std::fflush(stdout);
    return ok;
}

void write_weights(const std::string& path, const Model& model, const std::vector<double>& epoch_loss,
                   const ModelConfig& config) {
    // fmt's "{}" for a double is the shortest text that reads back exactly.
    const std::string text = fmt::format(
        "{{\"features\": {}, \"shards\": {}, \"rows_per_shard\": {}, \"epochs\": {}, \"seed\": {}, "
        "\"weights\": [{}], \"bias\": {}, \"loss\": [{}]}}\n",
        config.data.features, config.data.shards, config.data.rows_per_shard, config.epochs, config.data.seed,
        fmt::join(model.w, ", "), model.b, fmt::join(epoch_loss, ", "));
    if (const int error = cohort_examples::write_file(path, text); error != 0) {
        throw cohort::Error(cohort::Errc::io,
                            fmt::format("--weights-out: cannot write '{}': {}", path, std::strerror(error)));
    }
}

}  // namespace cohort_train
