// Tracker: one evaluation of a job's health, and the slowness it carries
// from one evaluation to the next.
#include "health/tracker.hpp"

#include "health/collective.hpp"
#include "health/hang.hpp"
#include "health/straggler.hpp"

#include <algorithm>
#include <utility>

namespace cohort::health {

void Tracker::forget(std::string_view member) {
    if (auto it = slow_.find(member); it != slow_.end()) slow_.erase(it);
}

void Tracker::track_slowness(NodeHealth& node, std::string_view member, double now, const Settings& settings) {
    auto it = slow_.find(member);
    // No score is no evidence of slowness: the clock starts over.
    if (!node.relative_score || *node.relative_score >= settings.straggler_threshold) {
        if (it != slow_.end()) slow_.erase(it);
        return;
    }
    if (it == slow_.end()) it = slow_.emplace(std::string(member), Slow{now, tick_}).first;
    it->second.seen_tick = tick_;
    node.slow_since = it->second.since;
    node.straggler = now - it->second.since >= settings.straggler_for;
}

JobHealth Tracker::evaluate(std::span<const NodeInput> nodes, double now, const Settings& settings) {
    ++tick_;
    std::vector<Busy> busy;
    busy.reserve(nodes.size());
    for (const NodeInput& n : nodes) busy.push_back(busy_of(*n.window, settings, scratch_));
    const std::vector<Scores> scores = score(busy, settings);
    const std::optional<CollectiveStall> stall = find_collective_stall(nodes);

    JobHealth job;
    job.time = now;
    job.nodes.reserve(nodes.size());
    std::size_t judged = 0;
    std::vector<std::pair<uint32_t, std::string_view>> stragglers;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        const NodeInput& in = nodes[i];
        NodeHealth& h = job.nodes.emplace_back();
        h.member = std::string(in.member);
        h.rank = in.rank;
        h.relative_score = scores[i].relative;
        h.individual_score = scores[i].individual;
        h.busy_unit = busy[i].unit;
        if (busy[i].unit != BusyUnit::none) h.busy = busy[i].recent;
        track_slowness(h, in.member, now, settings);
        if (h.straggler) stragglers.emplace_back(in.rank, in.member);

        h.step = in.window->step();
        h.stalled_for = stalled_for(*in.window, now);
        if (!h.stalled_for) continue;
        ++judged;
        h.hung = *h.stalled_for >= settings.hang_timeout;
        if (!h.hung) continue;
        ++job.hung_nodes;
        h.diagnosis = diagnose_node(in, stall ? &*stall : nullptr, now, settings);
    }
    job.hung = judged > 0 && job.hung_nodes == judged;
    if (job.hung) job.diagnosis = diagnose_job(nodes, job.nodes, stall ? &*stall : nullptr);

    std::sort(stragglers.begin(), stragglers.end());
    job.stragglers.reserve(stragglers.size());
    for (const auto& [rank, member] : stragglers) job.stragglers.emplace_back(member);
    // Members not passed in are gone from the job: forget them.
    std::erase_if(slow_, [&](const auto& entry) { return entry.second.seen_tick != tick_; });
    return job;
}

}  // namespace cohort::health
