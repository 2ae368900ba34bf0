#include "group_restart.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace cohort_run {
namespace {

// Variables the AutoScaler sets and this pack reads must be declared.
constexpr const char* kPack = R"yaml(version: 1
variables:
  event: string
rules:
  - id: restart_group_on_failure
    description: >-
      --restart all: a worker failed or hung, here or on another launcher.
      A torch script's world (its rank, its world size, rank 0's TCPStore)
      does not survive that, so every worker stops and the group starts
      again in a new world, once per event against the job's budget.
    condition: event == 'failed' OR event == 'hung' OR event == 'job_hung'
    actions: [{type: restart_workers, target: job}]
    priority: 100
    labels: {category: failure}
)yaml";

}  // namespace

cohort::RuleSet group_restart_rules() {
    return cohort::RuleSet::from_string(kPack, cohort::Format::automatic, "<cohort-run --restart all>");
}

std::optional<WorldChange> world_change(const JobView& job, const RunningWorld& world) {
    if (world.generation == 0) return std::nullopt;
    if (job.generation > world.generation) {
        return WorldChange{true,
                           {},
                           fmt::format("generation {} formed without this launcher's workers (they run in {})",
                                       job.generation, world.generation)};
    }
    for (const std::string& id : world.members) {
        if (world.local.contains(id)) continue;
        const auto it = job.members.find(id);
        if (it == job.members.end()) continue;
        const std::string& state = it->second.state;
        if (state == "failed" || state == "stale" || state == "waiting" || state == "timed_out") {
            const std::string what = state == "waiting" ? "was restarted by its launcher" : "is " + state;
            return WorldChange{true, id, fmt::format("worker {} of generation {} {}", id, world.generation, what)};
        }
    }
    if (static_cast<int>(world.members.size()) < world.max_workers) {
        for (const auto& [id, m] : job.members) {
            if (m.state == "waiting" && !world.local.contains(id) &&
                std::find(world.members.begin(), world.members.end(), id) == world.members.end()) {
                return WorldChange{false, id, fmt::format("worker {} joins the job", id)};
            }
        }
    }
    return std::nullopt;
}

}  // namespace cohort_run
