// Evaluating a simulation at a point in time: replay the steps up to it,
// each field either a constant or a ramp in progress.
#include "gpu/file/timeline.hpp"

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace cohort::detail {

namespace {

// A field as the replay left it: a constant, or a ramp from `from` (its value
// when the ramp started) to `to` over [start, start + over].
struct Track {
    SimValue base;
    bool ramping = false;
    SimValue from;
    double to = 0, start = 0, over = 0;

    SimValue at(double t) const {
        if (!ramping) return base;
        // A field with no value to ramp from takes the target at once.
        if (from.state != FieldState::ok || over <= 0 || t >= start + over) return {FieldState::ok, to};
        const double fraction = std::clamp((t - start) / over, 0.0, 1.0);
        return {FieldState::ok, from.value + (to - from.value) * fraction};
    }
};

template <typename T>
Reading<T> reading_of(const SimValue& v) {
    if (v.state != FieldState::ok) return {v.state, T{}};
    if constexpr (std::is_same_v<T, double>) {
        return Reading<T>::of(v.value);
    } else {
        // Ramps pass through fractions; counters and sizes round to the nearest.
        return Reading<T>::of(static_cast<T>(std::llround(std::max(0.0, v.value))));
    }
}

GpuReading reading_from(const GpuReading& identity, const std::array<Track, kSimFieldCount>& tracks, double t) {
    auto value = [&](SimField f) { return tracks[static_cast<std::size_t>(f)].at(t); };
    GpuReading r = identity;
    r.memory_total_bytes = reading_of<uint64_t>(value(SimField::memory_total));
    r.memory_used_bytes = reading_of<uint64_t>(value(SimField::memory_used));
    if (r.memory_total_bytes.ok() && r.memory_used_bytes.ok()) {
        const uint64_t used = std::min(r.memory_used_bytes.value, r.memory_total_bytes.value);
        r.memory_free_bytes = Reading<uint64_t>::of(r.memory_total_bytes.value - used);
    } else if (r.memory_total_bytes.state == FieldState::not_supported ||
               r.memory_used_bytes.state == FieldState::not_supported) {
        r.memory_free_bytes = Reading<uint64_t>::unsupported();
    } else {
        r.memory_free_bytes = {};
    }
    r.gpu_utilization_percent = reading_of<double>(value(SimField::utilization));
    r.memory_busy_percent = reading_of<double>(value(SimField::memory_busy));
    r.temperature_celsius = reading_of<double>(value(SimField::temperature));
    r.power_draw_watts = reading_of<double>(value(SimField::power_draw));
    r.power_limit_watts = reading_of<double>(value(SimField::power_limit));
    r.sm_clock_mhz = reading_of<uint32_t>(value(SimField::sm_clock));
    r.memory_clock_mhz = reading_of<uint32_t>(value(SimField::memory_clock));
    r.fan_percent = reading_of<double>(value(SimField::fan));
    r.ecc_corrected_errors = reading_of<uint64_t>(value(SimField::ecc_corrected));
    r.ecc_uncorrected_errors = reading_of<uint64_t>(value(SimField::ecc_uncorrected));
    r.xid_events.clear();
    return r;
}

}  // namespace

std::string_view sim_field_name(SimField field) {
    switch (field) {
        case SimField::memory_total: return "memory_total";
        case SimField::memory_used: return "memory_used";
        case SimField::utilization: return "utilization";
        case SimField::memory_busy: return "memory_busy";
        case SimField::temperature: return "temperature";
        case SimField::power_draw: return "power_draw";
        case SimField::power_limit: return "power_limit";
        case SimField::sm_clock: return "sm_clock";
        case SimField::memory_clock: return "memory_clock";
        case SimField::fan: return "fan";
        case SimField::ecc_corrected: return "ecc_corrected";
        case SimField::ecc_uncorrected: return "ecc_uncorrected";
    }
    return "unknown";
}

std::vector<GpuReading> Simulation::readings_at(double t) const {
    std::vector<std::array<Track, kSimFieldCount>> tracks(gpus.size());
    std::vector<GpuReading> identity;
    identity.reserve(gpus.size());
    for (std::size_t g = 0; g < gpus.size(); ++g) {
        for (std::size_t f = 0; f < kSimFieldCount; ++f) tracks[g][f].base = gpus[g].values[f];
        identity.push_back(gpus[g].identity);
    }
    for (const TimelineStep& step : timeline) {
        if (step.at > t) break;  // in time order: nothing later applies
        if (step.kind == TimelineStep::Kind::set) {
            for (const auto& [field, v] : step.values) {
                Track& track = tracks[step.gpu][static_cast<std::size_t>(field)];
                track.ramping = false;  // a set ends a ramp in progress
                track.base = v;
            }
            if (step.sets_processes) {
                identity[step.gpu].processes_state = step.processes_state;
                identity[step.gpu].processes = step.processes;
            }
        } else if (step.kind == TimelineStep::Kind::ramp) {
            for (const auto& [field, target] : step.values) {
                Track& track = tracks[step.gpu][static_cast<std::size_t>(field)];
                // Starts from wherever the field is then, an earlier ramp included.
                const SimValue from = track.at(step.at);
                track = Track{from, true, from, target.value, step.at, step.over};
            }
        }
    }
    std::vector<GpuReading> out;
    out.reserve(gpus.size());
    for (std::size_t g = 0; g < gpus.size(); ++g) out.push_back(reading_from(identity[g], tracks[g], t));
    return out;
}

std::optional<std::string> Simulation::failure_at(double t) const {
    std::optional<std::string> failure;
    for (const TimelineStep& step : timeline) {
        if (step.at > t) break;
        if (step.kind == TimelineStep::Kind::fail) failure = step.message;
        if (step.kind == TimelineStep::Kind::recover) failure.reset();
    }
    return failure;
}

}  // namespace cohort::detail
