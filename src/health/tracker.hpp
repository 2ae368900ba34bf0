// Evaluates a job's health on each coordinator tick: scores every live
// member, tracks since when each has been slow (a straggler must stay slow
// for straggler_for), and judges and diagnoses hangs. One Tracker per job.
#pragma once

#include "health/job_health.hpp"
#include "health/settings.hpp"
#include "health/window.hpp"

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace cohort::health {

class Tracker {
public:
    // `nodes`: the job's live members. A member left out of an evaluation is
    // forgotten, so its slowness starts over if it comes back. O(n log n) in
    // the number of members and allocates little per member: fit for a tick
    // over 10,000 of them.
    JobHealth evaluate(std::span<const NodeInput> nodes, double now, const Settings& settings);

    // Forgets a member's slowness now (it left, or restarts).
    void forget(std::string_view member);

private:
    struct StringHash {
        using is_transparent = void;
        std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
    };
    struct Slow {
        double since = 0;        // when its relative score went below the threshold
        uint64_t seen_tick = 0;  // the last evaluation that found it slow
    };

    // Sets node.straggler and node.slow_since from its relative score.
    void track_slowness(NodeHealth& node, std::string_view member, double now, const Settings& settings);

    std::unordered_map<std::string, Slow, StringHash, std::equal_to<>> slow_;
    uint64_t tick_ = 0;
    std::vector<double> scratch_;
};

}  // namespace cohort::health
