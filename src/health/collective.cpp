// Finding the ranks that never entered the collective the others wait in.
#include "health/collective.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

namespace cohort::health {

bool CollectiveStall::involves(const NodeWindow& window) const {
    const auto seq_of = window.collective_seq();
    if (!seq_of) return false;
    return *seq_of < seq || (*seq_of == seq && window.in_collective().value_or(false));
}

Diagnosis CollectiveStall::diagnosis(std::vector<std::string> evidence) const {
    Diagnosis d;
    d.cause = Cause::collective;
    d.summary = summary;
    d.evidence = std::move(evidence);
    const std::size_t named = std::min(lagging.size(), kMaxNamed);
    d.ranks.assign(lagging.begin(), lagging.begin() + static_cast<std::ptrdiff_t>(named));
    d.members.assign(lagging_members.begin(), lagging_members.begin() + static_cast<std::ptrdiff_t>(named));
    return d;
}

std::optional<CollectiveStall> find_collective_stall(std::span<const NodeInput> nodes) {
    std::optional<uint64_t> highest;
    for (const NodeInput& n : nodes) {
        const auto seq = n.window->collective_seq();
        if (seq && n.window->in_collective().value_or(false) && (!highest || *seq > *highest)) highest = seq;
    }
    if (!highest) return std::nullopt;
    CollectiveStall stall;
    stall.seq = *highest;
    std::vector<std::pair<uint32_t, std::string_view>> lagging;
    for (const NodeInput& n : nodes) {
        const auto seq = n.window->collective_seq();
        if (!seq) continue;
        if (*seq < stall.seq) lagging.emplace_back(n.rank, n.member);
        if (*seq == stall.seq && n.window->in_collective().value_or(false)) stall.waiting.push_back(n.rank);
    }
    if (lagging.empty()) return std::nullopt;
    std::sort(lagging.begin(), lagging.end());
    std::sort(stall.waiting.begin(), stall.waiting.end());
    stall.lagging.reserve(lagging.size());
    stall.lagging_members.reserve(lagging.size());
    for (const auto& [rank, member] : lagging) {
        stall.lagging.push_back(rank);
        stall.lagging_members.emplace_back(member);
    }
    stall.summary =
        fmt::format("{} never entered collective {}; {} {} in it", name_nodes(stall.lagging, stall.lagging_members),
                    stall.seq, name_ranks(stall.waiting), stall.waiting.size() == 1 ? "waits" : "wait");
    return stall;
}

}  // namespace cohort::health
