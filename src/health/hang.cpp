// Stalled members and the evidence for why: per node, then for the job.
#include "health/hang.hpp"

#include "health/gpu_evidence.hpp"

#include <algorithm>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace cohort::health {

namespace {

// Ranks and member ids of some nodes, sorted by rank, for name_nodes.
struct Named {
    std::vector<uint32_t> ranks;
    std::vector<std::string> members;
};

Named named(std::vector<std::pair<uint32_t, std::string_view>> nodes) {
    std::sort(nodes.begin(), nodes.end());
    Named n;
    for (const auto& [rank, member] : nodes) {
        n.ranks.push_back(rank);
        n.members.emplace_back(member);
    }
    return n;
}

Diagnosis blaming(Cause cause, std::string summary, std::vector<std::string> evidence, const Named& blamed) {
    const std::size_t shown = std::min(blamed.ranks.size(), kMaxNamed);
    Diagnosis d{cause, std::move(summary), std::move(evidence), {}, {}};
    d.ranks.assign(blamed.ranks.begin(), blamed.ranks.begin() + static_cast<std::ptrdiff_t>(shown));
    d.members.assign(blamed.members.begin(), blamed.members.begin() + static_cast<std::ptrdiff_t>(shown));
    return d;
}

// "all 4 judged ranks", "the 1 judged rank".
std::string judged_ranks(std::size_t n) {
    return n == 1 ? "the 1 judged rank" : fmt::format("all {} judged ranks", n);
}

// "3 s" or "3 to 12 s".
std::string span_of(double low, double high) {
    return fmt::format("{:.0f}", low) == fmt::format("{:.0f}", high) ? fmt::format("{:.0f} s", low)
                                                                     : fmt::format("{:.0f} to {:.0f} s", low, high);
}

std::string collective_overview(std::span<const NodeInput> nodes) {
    std::optional<uint64_t> highest;
    std::size_t reporting = 0;
    for (const NodeInput& n : nodes) {
        const auto seq = n.window->collective_seq();
        if (!seq) continue;
        ++reporting;
        if (n.window->in_collective().value_or(false) && (!highest || *seq > *highest)) highest = seq;
    }
    if (reporting == 0) return "collective: no rank reports collective state";
    if (!highest) return "collective: no rank is inside a collective";
    std::vector<uint32_t> inside;
    for (const NodeInput& n : nodes) {
        if (n.window->collective_seq() == highest && n.window->in_collective().value_or(false))
            inside.push_back(n.rank);
    }
    std::sort(inside.begin(), inside.end());
    return fmt::format("collective: {} inside collective {}, none behind it", name_ranks(inside), *highest);
}

}  // namespace

std::optional<double> stalled_for(const NodeWindow& window, double now) {
    if (!window.step()) return std::nullopt;
    return std::max(0.0, now - window.step_advanced_at());
}

std::vector<std::string> node_evidence(const NodeWindow& window, double now) {
    std::vector<std::string> evidence;
    if (window.step()) {
        evidence.push_back(
            fmt::format("last step {}, not advanced for {:.0f} s", *window.step(), *stalled_for(window, now)));
    } else {
        evidence.push_back("no step reported yet");
    }
    if (const auto seq = window.collective_seq()) {
        evidence.push_back(window.in_collective().value_or(false)
                               ? fmt::format("inside collective {}", *seq)
                               : fmt::format("not inside a collective; the latest it entered is {}", *seq));
    } else {
        evidence.push_back("no collective state reported");
    }
    evidence.push_back(gpu_overview(window.gpu(), window.gpu_at(), now));
    return evidence;
}

Diagnosis diagnose_node(const NodeInput& node, const CollectiveStall* stall, double now, const Settings& settings) {
    const NodeWindow& w = *node.window;
    std::vector<std::string> evidence = node_evidence(w, now);
    std::vector<std::string> faults = gpu_faults(w.gpu(), w.xids(), settings);
    evidence.insert(evidence.end(), faults.begin(), faults.end());
    if (stall != nullptr && stall->involves(w)) return stall->diagnosis(std::move(evidence));
    const Named self = named({{node.rank, node.member}});
    if (!faults.empty()) return blaming(Cause::gpu, faults.front(), std::move(evidence), self);
    std::string summary = w.step()
                              ? fmt::format("step {} has not advanced for {:.0f} s; no collective or GPU cause found",
                                            *w.step(), *stalled_for(w, now))
                              : "no step reported yet; no collective or GPU cause found";
    return blaming(Cause::unknown, std::move(summary), std::move(evidence), self);
}

Diagnosis diagnose_job(std::span<const NodeInput> nodes, std::span<const NodeHealth> health,
                       const CollectiveStall* stall) {
    std::size_t judged = 0;
    uint64_t low_step = UINT64_MAX, high_step = 0;
    double low_stall = 0, high_stall = 0;
    std::vector<std::pair<uint32_t, std::string_view>> faulty, no_gpu;
    std::vector<std::size_t> faulty_index;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        const NodeHealth& h = health[i];
        if (!h.step) continue;
        const double stalled = h.stalled_for.value_or(0);
        low_stall = judged == 0 ? stalled : std::min(low_stall, stalled);
        high_stall = judged == 0 ? stalled : std::max(high_stall, stalled);
        ++judged;
        low_step = std::min(low_step, *h.step);
        high_step = std::max(high_step, *h.step);
        if (h.diagnosis && h.diagnosis->cause == Cause::gpu) {
            faulty.emplace_back(h.rank, nodes[i].member);
            faulty_index.push_back(i);
        }
        if (nodes[i].window->gpu().is_null()) no_gpu.emplace_back(h.rank, nodes[i].member);
    }
    std::vector<std::string> evidence;
    evidence.push_back(fmt::format(
        "{} hung at {}, not advanced for {}", judged_ranks(judged),
        low_step == high_step ? fmt::format("step {}", low_step) : fmt::format("steps {} to {}", low_step, high_step),
        span_of(low_stall, high_stall)));
    if (judged < nodes.size())
        evidence.push_back(fmt::format("{} more {} not reported a step yet", nodes.size() - judged,
                                       nodes.size() - judged == 1 ? "rank has" : "ranks have"));
    evidence.push_back(stall != nullptr ? "collective: " + stall->summary : collective_overview(nodes));
    const Named with_faults = named(faulty);
    if (!faulty.empty()) evidence.push_back("GPU: faults on " + name_nodes(with_faults.ranks, with_faults.members));
    if (!no_gpu.empty()) evidence.push_back("GPU: no samples from " + name_ranks(named(no_gpu).ranks));
    if (faulty.empty() && no_gpu.size() < judged) evidence.push_back("GPU: no faults in the samples");
    // Each faulty node's own finding, in rank order.
    std::sort(faulty_index.begin(), faulty_index.end(),
              [&](std::size_t a, std::size_t b) { return health[a].rank < health[b].rank; });
    for (std::size_t k = 0; k < faulty_index.size() && k < kMaxNamed; ++k) {
        const NodeHealth& h = health[faulty_index[k]];
        evidence.push_back(fmt::format("rank {} (member {}): {}", h.rank, h.member, h.diagnosis->summary));
    }

    if (stall != nullptr) return stall->diagnosis(std::move(evidence));
    if (!faulty.empty()) {
        const NodeHealth& first = health[faulty_index.front()];
        std::string summary =
            faulty.size() == 1
                ? fmt::format("rank {} (member {}): {}", first.rank, first.member, first.diagnosis->summary)
                : fmt::format("{} report GPU faults; rank {}: {}", name_nodes(with_faults.ranks, with_faults.members),
                              first.rank, first.diagnosis->summary);
        return blaming(Cause::gpu, std::move(summary), std::move(evidence), with_faults);
    }
    // Ranks at a lower step than the rest stopped first: look at them first.
    std::vector<std::pair<uint32_t, std::string_view>> behind;
    if (low_step < high_step) {
        for (std::size_t i = 0; i < nodes.size(); ++i) {
            if (health[i].step == low_step) behind.emplace_back(health[i].rank, nodes[i].member);
        }
    }
    const Named first = named(behind);
    std::string summary = fmt::format("{} stalled for {}; no collective or GPU cause found", judged_ranks(judged),
                                      span_of(low_stall, high_stall));
    if (!behind.empty()) {
        summary += fmt::format("; {} stopped first, at step {}", name_nodes(first.ranks, first.members), low_step);
    }
    return blaming(Cause::unknown, std::move(summary), std::move(evidence), first);
}

}  // namespace cohort::health
