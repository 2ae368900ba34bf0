// Scaling plans as people and programs read them: names of the enums, one
// line per step, JSON.
#include <cohort/scaling.hpp>

#include <fmt/format.h>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <string>
#include <vector>

namespace cohort {

std::string_view to_string(EventKind kind) noexcept {
    switch (kind) {
        case EventKind::failed:
            return "failed";
        case EventKind::straggler:
            return "straggler";
        case EventKind::hung:
            return "hung";
        case EventKind::job_hung:
            return "job_hung";
        case EventKind::capacity:
            return "capacity";
        case EventKind::exited_ok:
            return "exited_ok";
    }
    return "unknown";
}

std::string_view to_string(ExitCause cause) noexcept {
    switch (cause) {
        case ExitCause::none:
            return "none";
        case ExitCause::node_lost:
            return "node_lost";
        case ExitCause::out_of_memory:
            return "oom";
        case ExitCause::preempted:
            return "preempted";
        case ExitCause::evicted:
            return "evicted";
        case ExitCause::pending_timeout:
            return "pending_timeout";
        case ExitCause::image_pull:
            return "image_pull";
        case ExitCause::deleted:
            return "deleted";
        case ExitCause::api_error:
            return "api_error";
    }
    return "unknown";
}

std::string_view to_string(StepKind kind) noexcept {
    switch (kind) {
        case StepKind::launch:
            return "launch";
        case StepKind::remove:
            return "remove";
        case StepKind::relaunch:
            return "relaunch";
        case StepKind::restart_all:
            return "restart_all";
    }
    return "unknown";
}

namespace {

// " (1 GPU, 4 CPUs)", or nothing when no resources are asked for.
std::string resources_text(const Resources& r) {
    std::vector<std::string> parts;
    if (r.gpus != 0) parts.push_back(fmt::format("{} GPU{}", r.gpus, r.gpus == 1 ? "" : "s"));
    if (r.cpus != 0) parts.push_back(fmt::format("{} CPU{}", r.cpus, r.cpus == 1 ? "" : "s"));
    return parts.empty() ? std::string() : fmt::format(" ({})", fmt::join(parts, ", "));
}

std::string where(const std::string& host) {
    return host.empty() ? std::string(" where the scheduler chooses") : " on " + host;
}

}  // namespace

std::string describe(const PlanStep& step) {
    std::string out;
    switch (step.kind) {
        case StepKind::launch:
            out = fmt::format("launch a worker{}{}", where(step.host), resources_text(step.resources));
            break;
        case StepKind::remove:
            out = fmt::format("remove {}", step.node);
            break;
        case StepKind::relaunch:
            out = fmt::format("relaunch {}{}{}", step.node, where(step.host), resources_text(step.resources));
            break;
        case StepKind::restart_all:
            out = "restart all workers";
            break;
    }
    if (!step.reason.empty()) out += ": " + step.reason;
    if (!step.rule.empty()) out += fmt::format(" [rule {}]", step.rule);
    return out;
}

std::string describe(const ScalingPlan& plan) {
    std::vector<std::string> lines;
    for (const PlanStep& step : plan.steps) lines.push_back(describe(step));
    for (const std::string& warning : plan.warnings) lines.push_back("warning: " + warning);
    if (lines.empty()) return "no change";
    return fmt::format("{}", fmt::join(lines, "\n"));
}

std::string to_json(const ScalingPlan& plan) {
    boost::json::array steps;
    for (const PlanStep& step : plan.steps) {
        steps.push_back(boost::json::object{
            {"kind", to_string(step.kind)},
            {"node", step.node},
            {"host", step.host},
            {"resources", boost::json::object{{"gpus", step.resources.gpus}, {"cpus", step.resources.cpus}}},
            {"rule", step.rule},
            {"reason", step.reason},
        });
    }
    boost::json::array warnings(plan.warnings.begin(), plan.warnings.end());
    boost::json::array avoid(plan.avoid_hosts.begin(), plan.avoid_hosts.end());
    boost::json::object out;
    out["steps"] = std::move(steps);
    out["warnings"] = std::move(warnings);
    out["avoid_hosts"] = std::move(avoid);
    out["nodes_after"] = plan.nodes_after;
    out["below_min_nodes"] = plan.below_min_nodes;
    return boost::json::serialize(out);
}

}  // namespace cohort
