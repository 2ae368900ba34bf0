// --restart all, torchrun's semantics: a failure anywhere in the job stops
// every worker, on every launcher, and the group starts again in a new
// world. The policy that says so (charged against --max-restarts like any
// restart_all step), and how a launcher sees, in the job's state, that the
// world its workers run in has broken on another launcher.
#pragma once

#include "job_view.hpp"

#include <cohort/rules.hpp>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace cohort_run {

// The rule pack --restart all uses unless --rules gives one: a failed or
// hung worker restarts the group; stragglers are left alone (a restart
// would only start them again where they are).
cohort::RuleSet group_restart_rules();

// The world this launcher's workers were started in.
struct RunningWorld {
    uint64_t generation = 0;
    std::vector<std::string> members;  // every member of it, by rank
    std::set<std::string> local;       // this launcher's
    int max_workers = 0;               // the job's max_nodes
};

struct WorldChange {
    bool failure = false;  // a member failed or restarted (counts against the budget); else the job grew
    std::string member;    // the member whose state says so
    std::string why;       // for people
};

// What in `job` breaks `world` for a torch script: a newer generation, a
// member of the world that failed, went stale or joined again (its
// launcher restarted it), or a new worker waiting to join while the world
// is below max_workers. A member that left (it finished) breaks nothing;
// this launcher's own workers are its own business. nullopt: nothing.
std::optional<WorldChange> world_change(const JobView& job, const RunningWorld& world);

}  // namespace cohort_run
