// Plan steps from fired actions. Each event gets at most one step per
// worker: actions are taken in the order the engine returns them (highest
// priority first), and a later action on a worker that already has a step
// is skipped. Budgets are charged as steps are made.
#include "elastic/plan_builder.hpp"

#include "elastic/policy_pack.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace cohort::detail {
namespace {

std::string event_text(const ScalingEvent& event) {
    std::string out;
    switch (event.kind) {
        case EventKind::failed:
            out = fmt::format("node {} failed", event.node);
            if (event.exit_code) out += fmt::format(" (exit code {})", *event.exit_code);
            break;
        case EventKind::straggler:
            out = fmt::format("node {} is a straggler", event.node);
            if (event.straggler_score)
                out += fmt::format(" (it steps at {:.2g} times the median rate)", *event.straggler_score);
            break;
        case EventKind::hung:
            out = fmt::format("node {} hung", event.node);
            break;
        case EventKind::job_hung:
            out = "the job hung";
            break;
        case EventKind::capacity:
            out = "capacity appeared";
            if (!event.host.empty()) out += " on " + event.host;
            if (event.free_slots)
                out += fmt::format(" ({} free slot{})", *event.free_slots, *event.free_slots == 1 ? "" : "s");
            break;
        case EventKind::exited_ok:
            out = fmt::format("node {} exited", event.node);
            break;
    }
    if (!event.detail.empty()) out += ": " + event.detail;
    return out;
}

}  // namespace

PlanBuilder::PlanBuilder(const ScalingOptions& options, RelaunchBudget& budget, const HostBlacklist& blacklist,
                         const ScalingEvent& event, const ClusterView& cluster, double now)
    : options_(options),
      budget_(budget),
      blacklist_(blacklist),
      event_(event),
      now_(now),
      event_text_(event_text(event)),
      node_host_(event.host),
      node_resources_(options.node_resources),
      hosts_(cluster.hosts) {
    node_gone_ = event.kind == EventKind::failed || event.kind == EventKind::exited_ok;
    for (const NodeInfo& node : cluster.nodes) {
        if (!event.node.empty() && node.id == event.node) {
            if (node_host_.empty()) node_host_ = node.host;
            node_resources_ = node.resources;
            if (node_gone_) continue;
        }
        ++live_;
    }
    // The capacity event is fresher than the view about its own host.
    if (event.kind == EventKind::capacity && event.free_slots) {
        if (event.host.empty() && hosts_.empty()) {
            unlisted_capacity_ = std::max(0, *event.free_slots);
        } else if (!event.host.empty()) {
            auto it =
                std::find_if(hosts_.begin(), hosts_.end(), [&](const HostInfo& h) { return h.name == event.host; });
            if (it != hosts_.end())
                it->free_slots = *event.free_slots;
            else if (!hosts_.empty())
                hosts_.push_back({event.host, *event.free_slots});
            else
                unlisted_capacity_ = std::max(0, *event.free_slots);
        }
    }
}

std::optional<int> PlanBuilder::free_slots() const {
    if (hosts_.empty()) {
        if (unlisted_capacity_ && !event_.host.empty() && blacklist_.blacklisted(event_.host, now_)) return 0;
        return unlisted_capacity_;
    }
    int total = 0;
    for (const HostInfo& host : hosts_)
        if (host.free_slots > 0 && !blacklist_.blacklisted(host.name, now_)) total += host.free_slots;
    return total;
}

void PlanBuilder::add(StepKind kind, std::string node, std::string host, Resources resources, const Firing& firing,
                      std::string reason) {
    plan_.steps.push_back({kind, std::move(node), std::move(host), resources, firing.rule, std::move(reason)});
}

std::string PlanBuilder::blacklist_note() const {
    std::vector<std::string> notes;
    for (const std::string& host : blacklist_.hosts(now_))
        notes.push_back(fmt::format("{} until {:g}", host, *blacklist_.until(host, now_)));
    return notes.empty() ? std::string() : fmt::format(" (blacklisted: {})", fmt::join(notes, ", "));
}

std::optional<std::string> PlanBuilder::place(const std::string& avoid, bool allow_avoided) {
    if (hosts_.empty()) return std::string();
    HostInfo* best = nullptr;
    for (HostInfo& host : hosts_) {
        if (host.free_slots <= 0 || host.name == avoid || blacklist_.blacklisted(host.name, now_)) continue;
        if (best == nullptr || host.free_slots > best->free_slots) best = &host;
    }
    if (best != nullptr) {
        --best->free_slots;
        return best->name;
    }
    // The avoided host is the worker's own: the slot it leaves is free.
    if (allow_avoided && !avoid.empty() && !blacklist_.blacklisted(avoid, now_)) return avoid;
    return std::nullopt;
}

std::optional<std::string> PlanBuilder::place_new() {
    if (!hosts_.empty()) return place({}, false);
    if (unlisted_capacity_) {
        if (*unlisted_capacity_ == 0) return std::nullopt;
        --*unlisted_capacity_;
    }
    if (!event_.host.empty() && event_.kind == EventKind::capacity) {
        if (blacklist_.blacklisted(event_.host, now_)) return std::nullopt;
        return event_.host;
    }
    return std::string();
}

bool PlanBuilder::claim_node(const Firing& firing, const Action& action) {
    if (event_.node.empty()) {
        warn(fmt::format("rule {}: action '{}' needs a node, and a '{}' event has none; ignored", firing.rule,
                         action.type, to_string(event_.kind)));
        return false;
    }
    return decided_.insert(event_.node).second;
}

void PlanBuilder::give_up(const Firing& firing, std::string_view what, const std::string& why) {
    if (node_gone_) {
        add(StepKind::remove, event_.node, {}, {}, firing, fmt::format("{}; not {}: {}", event_text_, what, why));
    } else {
        warn(fmt::format("rule {}: node {} not {}: {}; it keeps running", firing.rule, event_.node, what, why));
    }
}

void PlanBuilder::apply(const Firing& firing, const Action& action) {
    if (action.type == "relaunch") {
        if (claim_node(firing, action)) relaunch(firing);
    } else if (action.type == "replace") {
        if (claim_node(firing, action)) replace(firing);
    } else if (action.type == "remove") {
        if (claim_node(firing, action)) remove(firing);
    } else if (action.type == "restart_workers") {
        restart(firing);
    } else if (action.type == "scale_up") {
        scale_up(firing, scale_up_count(action));
    } else {
        // Only reachable when the pack allows unhandled actions.
        warn(fmt::format("rule {}: action type '{}' is not one the auto-scaler carries out; ignored", firing.rule,
                         action.type));
    }
}

void PlanBuilder::relaunch(const Firing& firing) {
    const std::string& node = event_.node;
    if (std::string why = budget_.refusal(node); !why.empty()) return give_up(firing, "relaunched", why);
    std::string host;
    std::string moved;
    if (!node_host_.empty() && !blacklist_.blacklisted(node_host_, now_)) {
        host = node_host_;  // in place: the slot is its own
    } else if (auto placed = place(node_host_, false)) {
        host = *placed;
        if (!node_host_.empty()) moved = fmt::format(", away from blacklisted {}", node_host_);
    } else {
        const auto until = blacklist_.until(node_host_, now_);
        return give_up(firing, "relaunched",
                       until ? fmt::format("host {} is blacklisted until {:g} and no other host has a free slot",
                                           node_host_, *until)
                             : "no host has a free slot" + blacklist_note());
    }
    budget_.charge(node);
    add(StepKind::relaunch, node, host, node_resources_, firing,
        fmt::format("{}; relaunch {} of {} (job: {} of {}){}", event_text_, budget_.node_used(node), budget_.per_node(),
                    budget_.job_used(), budget_.per_job(), moved));
    if (node_gone_) ++live_;
}

void PlanBuilder::replace(const Firing& firing) {
    const std::string& node = event_.node;
    if (std::string why = budget_.refusal({}); !why.empty()) return give_up(firing, "replaced", why);
    auto host = place(node_host_, true);
    if (!host) return give_up(firing, "replaced", "no host has a free slot" + blacklist_note());
    budget_.charge({});
    add(StepKind::remove, node, {}, {}, firing, fmt::format("{}; replaced by a new worker", event_text_));
    add(StepKind::launch, {}, *host, node_resources_, firing,
        fmt::format("replaces node {} (job: relaunch {} of {})", node, budget_.job_used(), budget_.per_job()));
    if (node_gone_) ++live_;
}

void PlanBuilder::remove(const Firing& firing) {
    add(StepKind::remove, event_.node, {}, {}, firing, event_text_);
    if (!node_gone_) --live_;
}

void PlanBuilder::restart(const Firing& firing) {
    if (restarted_) return;
    if (std::string why = budget_.refusal({}); !why.empty()) {
        warn(fmt::format("rule {}: workers not restarted: {}", firing.rule, why));
        return;
    }
    budget_.charge({});
    restarted_ = true;
    add(StepKind::restart_all, {}, {}, {}, firing,
        fmt::format("{}; restart {} of {}", event_text_, budget_.job_used(), budget_.per_job()));
    // A running node is restarted with the others; a gone one may still
    // be relaunched by another action.
    if (!event_.node.empty() && !node_gone_) decided_.insert(event_.node);
}

void PlanBuilder::scale_up(const Firing& firing, std::optional<int> count) {
    int want = options_.max_nodes - live_;
    if (want <= 0) {
        warn(fmt::format("rule {}: no scale-up: the job has {} workers, max_nodes is {}", firing.rule, live_,
                         options_.max_nodes));
        return;
    }
    if (count) want = std::min(want, *count);
    int launched = 0;
    for (; launched < want; ++launched) {
        auto host = place_new();
        if (!host) break;
        add(StepKind::launch, {}, *host, options_.node_resources, firing,
            fmt::format("{}; worker {} of max_nodes {}", event_text_, live_ + 1, options_.max_nodes));
        ++live_;
    }
    if (launched < want)
        warn(fmt::format("rule {}: launched {} of the {} workers wanted: no more free slots{}", firing.rule, launched,
                         want, blacklist_note()));
}

ScalingPlan PlanBuilder::finish() {
    plan_.nodes_after = live_;
    plan_.avoid_hosts = blacklist_.hosts(now_);
    // A worker that exited with 0 finished its work: the job is ending,
    // not shrinking.
    if (event_.kind != EventKind::exited_ok && live_ < options_.min_nodes) {
        plan_.below_min_nodes = true;
        warn(fmt::format("the job will have {} worker{}, below min_nodes {}", live_, live_ == 1 ? "" : "s",
                         options_.min_nodes));
    }
    return std::move(plan_);
}

}  // namespace cohort::detail
