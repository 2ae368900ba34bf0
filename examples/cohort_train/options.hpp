// cohort-train's command line.
#pragma once

#include "model.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace cohort_train {

// A fault one worker injects into itself, for the tests: the worker whose
// LOCAL_RANK is `local_rank`, on its first start only (COHORT_RESTART_COUNT
// 0 or unset), so a relaunched worker is healthy.
struct Fault {
    uint32_t local_rank = 0;
    double value = 0;  // --slow: the factor; --stall-at-step: the step; --skip-collective: the sequence number
};

struct Faults {
    std::optional<Fault> slow;
    std::optional<Fault> stall_at_step;
    std::optional<Fault> skip_collective;
};

struct Options {
    ModelConfig model;
    std::chrono::milliseconds step_delay{30};  // simulated compute per shard
    bool reference = false;                    // single process, no coordinator
    bool check = true;                         // rank 0 compares with the reference at the end
    std::string weights_out;                   // final weights as JSON
    std::string checkpoint;                    // empty: $COHORT_CHECKPOINT_DIR's, if set
    bool register_plan = true;
    // After a failed collective, report the peers whose connection closed
    // without a goodbye (Membership::report_dead) before asking for a round.
    bool report_dead = true;
    uint32_t min_nodes = 0;  // --nodes: create the job when missing; 0: it must exist
    uint32_t max_nodes = 0;
    std::chrono::milliseconds world_timeout{std::chrono::minutes(10)};
    std::chrono::milliseconds collective_timeout{std::chrono::seconds(60)};
    Faults faults;
};

// Parses argv. Returns nullopt after printing help or the version (exit 0);
// throws cohort::Error(invalid_argument) naming the flag on bad usage.
std::optional<Options> parse_options(int argc, char** argv);

}  // namespace cohort_train
