// cohort-train: the end-to-end elastic training demo. A starting point to
// copy: a worker that leases shards, all-reduces gradients, survives peers
// that die or join, and ends with the same weights as a single process.
#include "elastic_loop.hpp"
#include "options.hpp"
#include "report.hpp"

#include <cohort/error.hpp>

#include <cstdio>

#include <fmt/format.h>

namespace {

// --reference: the sequential run the elastic one must match.
int run_reference(const cohort_train::Options& options) {
    const cohort_train::Reference ref = cohort_train::train_reference(options.model);
    std::vector<cohort_train::EpochRecord> history;
    for (double loss : ref.epoch_loss) history.push_back({loss, options.model.data.shards});
    cohort_train::print_summary("", history, options.model.data.shards);
    fmt::print("w[0] = {:.6g}, w[1] = {:.6g}, ... ({} weights), b = {:.6g}\n", ref.model.w[0],
               ref.model.w.size() > 1 ? ref.model.w[1] : 0.0, ref.model.w.size(), ref.model.b);
    if (!options.weights_out.empty())
        cohort_train::write_weights(options.weights_out, ref.model, ref.epoch_loss, options.model);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    std::optional<cohort_train::Options> options;
    try {
        options = cohort_train::parse_options(argc, argv);
    } catch (const cohort::Error& e) {
        fmt::print(stderr, "cohort-train: {}\n", e.what());
        return 2;
    }
    if (!options) return 0;
    try {
        if (options->reference) return run_reference(*options);
        return cohort_train::run_elastic(*options);
    } catch (const cohort::Error& e) {
        fmt::print(stderr, "cohort-train: {}\n", e.what());
        // A missing or malformed COHORT_* variable is a usage error.
        return e.code() == cohort::Errc::invalid_argument ? 2 : 1;
    }
}
