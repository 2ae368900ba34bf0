// cohort-plan's command line.
#pragma once

#include <cohort/cohort.hpp>

#include <optional>
#include <string>
#include <vector>

namespace cohort_plan {

struct Options {
    std::string cluster;
    std::string dataset;
    cohort::PlanOptions plan;
    std::string locality_file;
    uint64_t shard_bytes = 0;
    uint64_t shard_count = 0;
    cohort::RoleMask roles = cohort::kTrainingRoles;
    std::vector<std::string> remove;  // replan without these node ids
    bool json = false;
    // --advise: the DataAdvisor's advice for the plan, with its options.
    bool advise = false;
    cohort::DataAdvisorOptions advisor;
    std::string measurements_file;
    uint64_t limit = 32;  // shard rows in the table; 0 = all
};

// Parses argv. Returns nullopt after printing help or the version (exit 0);
// throws cohort::Error(invalid_argument) naming the flag on bad input.
std::optional<Options> parse_options(int argc, char** argv);

}  // namespace cohort_plan
