// Straggler scores. In synchronous data-parallel training every rank steps
// at the same rate (each waits for the others in the all-reduce), so speed
// must come from the time a node is busy: busy = step_time - collective_wait,
// or step_time where collective_wait is not reported. A node that reports only
// samples_per_sec is measured per sample (1 / samples_per_sec) and compared
// only with nodes measured the same way.
#pragma once

#include "health/settings.hpp"
#include "health/window.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace cohort::health {

enum class BusyUnit : uint8_t {
    none = 0,    // no sample has a usable timing
    step = 1,    // seconds busy per step
    sample = 2,  // seconds per sample, from samples_per_sec
};
std::string_view to_string(BusyUnit unit) noexcept;

// A node's busy time over its window. The latest sample with a timing picks
// the unit; samples without one in that unit are skipped.
struct Busy {
    BusyUnit unit = BusyUnit::none;
    std::size_t count = 0;  // samples with a busy time
    double recent = 0;      // mean of the latest `recent` of them
    // The lowest mean over any `recent` consecutive of them: the node's own
    // best pace. A run rather than the single lowest sample, so one lucky
    // step does not make every later one look slow.
    double best = 0;
};

// `scratch` is reused across nodes so a tick allocates nothing per node.
Busy busy_of(const NodeWindow& window, const Settings& settings, std::vector<double>& scratch);

struct Scores {
    // reference busy / own recent busy, in [0, 1]; the reference is the median
    // (or lowest) recent busy of the nodes measured in the same unit. Empty
    // with fewer than 2 such nodes of min_samples samples each.
    std::optional<double> relative;
    // own best / own recent busy, in [0, 1]; empty below min_samples.
    std::optional<double> individual;
};

// One Scores per entry of `busy`, in order. O(n) in the number of nodes.
std::vector<Scores> score(std::span<const Busy> busy, const Settings& settings);

}  // namespace cohort::health
