// cohort-plan: the rank order of a cluster and a shard plan for a dataset.
// A starting point to copy: everything here uses the public C++ API.
#include "options.hpp"
#include "report.hpp"

#include <cohort/cohort.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace {

std::string read_measurements(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        throw cohort::Error(cohort::Errc::io,
                            fmt::format("--measurements: {}: cannot open: {}", path, std::strerror(errno)));
    }
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

}  // namespace

int main(int argc, char** argv) {
    std::optional<cohort_plan::Options> options;
    try {
        options = cohort_plan::parse_options(argc, argv);
    } catch (const cohort::Error& e) {
        fmt::print(stderr, "cohort-plan: {}\n", e.what());
        return 2;
    }
    if (!options) return 0;
    try {
        const cohort::Topology cluster = cohort::Topology::from_file(options->cluster);
        const cohort::Dataset dataset = cohort::Dataset::from_file(options->dataset);
        if (!options->locality_file.empty()) options->plan.locality = cohort::load_locality(options->locality_file);

        const cohort::RankOrder order(cluster, options->roles);
        options->plan.roles = options->roles;  // the ranked nodes hold the shards
        const auto shards = cohort::ShardSet::split(dataset, {options->shard_bytes, options->shard_count});
        const auto plan = cohort::ShardPlan::create(shards, cluster, options->plan);

        std::optional<cohort::ShardPlan> replanned;
        if (!options->remove.empty()) {
            cohort::Topology remaining;
            for (const std::string& id : options->remove) {
                if (!cluster.find(id))
                    throw cohort::Error(cohort::Errc::not_found, fmt::format("--remove: no node '{}' in {}", id, options->cluster));
            }
            for (const cohort::Node& node : cluster.nodes()) {
                if (std::find(options->remove.begin(), options->remove.end(), node.id) == options->remove.end())
                    remaining.add(node);
            }
            replanned = plan.replan(remaining);
        }

        std::optional<cohort::DataAdvice> advice;
        if (options->advise) {
            if (!options->measurements_file.empty()) {
                options->advisor.measurements = cohort::data_measurements_from_json(
                    read_measurements(options->measurements_file), options->measurements_file);
            }
            advice = cohort::DataAdvisor(options->advisor).advise(plan);
        }

        const cohort_plan::Report report{order,          plan, replanned ? &*replanned : nullptr, options->remove,
                                         options->limit, advice ? &*advice : nullptr};
        if (options->json) cohort_plan::print_json(report);
        else cohort_plan::print_tables(report);
    } catch (const cohort::Error& e) {
        fmt::print(stderr, "cohort-plan: {}\n", e.what());
        return 1;
    }
    return 0;
}
