// The simulated GPUs of a file (docs/gpu.md): fixed readings plus a timeline
// of steps (set, ramp, Xid, hang, fail, recover), evaluated at any time since
// the backend opened. Pure data and arithmetic; the backend adds the clock,
// the blocking and the once-only delivery.
#pragma once

#include <cohort/format.hpp>
#include <cohort/gpu.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::detail {

// The numeric fields a file gives and a timeline can set or ramp.
enum class SimField : uint8_t {
    memory_total,
    memory_used,
    utilization,
    memory_busy,
    temperature,
    power_draw,
    power_limit,
    sm_clock,
    memory_clock,
    fan,
    ecc_corrected,
    ecc_uncorrected,
};
inline constexpr std::size_t kSimFieldCount = 12;

// The field's name in the file: "memory_used".
std::string_view sim_field_name(SimField field);

// A value of any numeric field, as a double so that ramps can interpolate
// (sizes stay exact up to 2^53 bytes, 8 PiB).
struct SimValue {
    FieldState state = FieldState::not_supported;
    double value = 0;
};

struct SimGpu {
    // Index, uuid, name, PCI bus id, MIG and processes; the numeric fields
    // are filled from `values` on each read.
    GpuReading identity;
    std::array<SimValue, kSimFieldCount> values;
};

struct TimelineStep {
    enum class Kind : uint8_t { set, ramp, xid, hang, fail, recover };
    Kind kind = Kind::set;
    double at = 0;        // seconds since the backend opened
    std::size_t gpu = 0;  // position in Simulation::gpus (set, ramp, xid)
    std::vector<std::pair<SimField, SimValue>> values;  // set: new values; ramp: targets
    bool sets_processes = false;                         // set
    FieldState processes_state = FieldState::ok;
    std::vector<GpuProcess> processes;
    double over = 0;  // ramp: seconds from `at` to the target
    uint64_t xid = 0;  // xid
    std::string detail;
    double hang_seconds = 0;  // hang
    std::string message;      // fail
};

struct Simulation {
    std::vector<SimGpu> gpus;
    std::vector<TimelineStep> timeline;  // in time order

    // The GPUs as they are `t` seconds after the start, without Xid events
    // (the backend delivers each of those once).
    std::vector<GpuReading> readings_at(double t) const;
    // The message of the fail step in force at `t`: the latest at or before
    // `t` that no recover step has followed.
    std::optional<std::string> failure_at(double t) const;
};

// Reads a simulation from YAML or JSON; Error(parse) "source:line:col:
// field.path: what" for anything malformed.
Simulation read_simulation(std::string_view text, Format format, const std::string& source);

}  // namespace cohort::detail
