// Turns the actions that fired for one event into plan steps, within the
// relaunch budget, away from blacklisted hosts, and within max_nodes.
#pragma once

#include <cohort/scaling.hpp>

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace cohort::detail {

class PlanBuilder {
public:
    PlanBuilder(const ScalingOptions& options, RelaunchBudget& budget, const HostBlacklist& blacklist,
                const ScalingEvent& event, const ClusterView& cluster, double now);

    // What the rules see: workers alive now (the event's node not counted
    // when it failed or exited), usable free slots (empty when unknown), the
    // event's node's host.
    int live() const { return live_; }
    std::optional<int> free_slots() const;
    const std::string& node_host() const { return node_host_; }

    void apply(const Firing& firing, const Action& action);
    void warn(std::string warning) { plan_.warnings.push_back(std::move(warning)); }
    ScalingPlan finish();

private:
    void relaunch(const Firing& firing);
    void replace(const Firing& firing);
    void remove(const Firing& firing);
    void restart(const Firing& firing);
    void scale_up(const Firing& firing, std::optional<int> count);
    // False (with a warning) when the action needs the event's node and
    // there is none, or the node already has a step.
    bool claim_node(const Firing& firing, const Action& action);
    // A step for a node-level action that cannot be done: a node that is
    // gone is removed with the reason, one still running is left alone
    // with a warning.
    void give_up(const Firing& firing, std::string_view what, const std::string& why);
    // A host with a free slot that is not blacklisted, other than `avoid`
    // (taken when `allow_avoided` and nothing else fits); "" when the
    // cluster lists no hosts (the scheduler chooses); nothing when full.
    std::optional<std::string> place(const std::string& avoid, bool allow_avoided);
    std::optional<std::string> place_new();
    std::string blacklist_note() const;
    void add(StepKind kind, std::string node, std::string host, Resources resources, const Firing& firing,
             std::string reason);

    const ScalingOptions& options_;
    RelaunchBudget& budget_;
    const HostBlacklist& blacklist_;
    const ScalingEvent& event_;
    double now_;
    std::string event_text_;
    std::string node_host_;
    Resources node_resources_;
    bool node_gone_ = false;  // the event's node no longer runs
    int live_ = 0;
    std::vector<HostInfo> hosts_;           // free slots left, as steps take them
    std::optional<int> unlisted_capacity_;  // no hosts listed: what the capacity event offers
    std::set<std::string, std::less<>> decided_;
    bool restarted_ = false;
    ScalingPlan plan_;
};

}  // namespace cohort::detail
