// Relaunch budgets: a worker that keeps failing, or a job that keeps
// restarting, must stop being relaunched at some point instead of looping.
#include <cohort/error.hpp>
#include <cohort/scaling.hpp>

#include <fmt/format.h>

namespace cohort {

RelaunchBudget::RelaunchBudget(int per_node, int per_job) : per_node_(per_node), per_job_(per_job) {
    if (per_node < 0 || per_job < 0)
        throw Error(Errc::invalid_argument,
                    fmt::format("RelaunchBudget: budgets must be 0 or more, not {} per node and {} per job; 0 "
                                "means never relaunch",
                                per_node, per_job));
}

int RelaunchBudget::node_used(std::string_view node) const {
    auto it = used_.find(node);
    return it == used_.end() ? 0 : it->second;
}

std::string RelaunchBudget::refusal(std::string_view node) const {
    if (!node.empty() && node_used(node) >= per_node_)
        return fmt::format("node {}: relaunch budget {} used up", node, per_node_);
    if (job_used_ >= per_job_) return fmt::format("job: relaunch budget {} used up", per_job_);
    return {};
}

void RelaunchBudget::charge(std::string_view node) {
    ++job_used_;
    if (node.empty()) return;
    auto it = used_.find(node);
    if (it == used_.end()) it = used_.emplace(std::string(node), 0).first;
    ++it->second;
}

}  // namespace cohort
