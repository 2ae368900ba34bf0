// What a GPU probe reports: one sample per query, every field typed and
// able to say "not supported" or "not available" rather than a fake zero.
// Units are in the names: bytes, percent, celsius, watts, MHz.
#pragma once

#include <cohort/export.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cohort {

// Why a field has no value. `ok` fields hold one.
enum class FieldState : uint8_t {
    ok = 0,
    not_supported = 1,  // this GPU or driver cannot report it ("[Not Supported]")
    not_available = 2,  // it could, but did not this time ("[N/A]", a failed query)
};

template <typename T>
struct Reading {
    FieldState state = FieldState::not_available;
    T value{};

    bool ok() const { return state == FieldState::ok; }
    static Reading of(T v) { return {FieldState::ok, std::move(v)}; }
    static Reading unsupported() { return {FieldState::not_supported, T{}}; }
    std::optional<T> get() const { return ok() ? std::optional<T>(value) : std::nullopt; }
};

struct GpuProcess {
    uint32_t pid = 0;
    std::string name;
    Reading<uint64_t> memory_bytes;
};

struct MigInstance {
    uint32_t gpu_instance = 0;
    uint32_t compute_instance = 0;
    std::string uuid;
    Reading<uint64_t> memory_total_bytes;
    Reading<uint64_t> memory_used_bytes;
};

// An Xid error the driver reported (e.g. 79: the GPU fell off the bus).
struct XidEvent {
    uint64_t xid = 0;
    double time = 0;  // seconds, on the probe's clock
    std::string detail;
};

struct GpuReading {
    uint32_t index = 0;
    std::string uuid;
    std::string name;
    std::string pci_bus_id;
    Reading<uint64_t> memory_total_bytes;
    Reading<uint64_t> memory_used_bytes;
    Reading<uint64_t> memory_free_bytes;
    Reading<double> gpu_utilization_percent;     // SMs busy
    Reading<double> memory_busy_percent;         // memory bandwidth busy, NOT memory used
    Reading<double> temperature_celsius;
    Reading<double> power_draw_watts;
    Reading<double> power_limit_watts;
    Reading<uint32_t> sm_clock_mhz;
    Reading<uint32_t> memory_clock_mhz;
    Reading<double> fan_percent;
    Reading<uint64_t> ecc_corrected_errors;
    Reading<uint64_t> ecc_uncorrected_errors;
    Reading<bool> mig_enabled;
    FieldState processes_state = FieldState::not_available;
    std::vector<GpuProcess> processes;
    std::vector<MigInstance> mig_instances;
    std::vector<XidEvent> xid_events;  // since the previous sample

    // used / total in percent: what rules call `gpu_memory`.
    COHORT_API Reading<double> memory_used_percent() const;
};

enum class ProbeHealth : uint8_t {
    ok = 0,
    unresponsive = 1,  // the backend did not answer within the deadline
    failed = 2,        // the backend answered with an error
};
COHORT_API std::string_view to_string(ProbeHealth health) noexcept;
COHORT_API std::string_view to_string(FieldState state) noexcept;

struct GpuSample {
    double time = 0;      // seconds since the Unix epoch when it was taken
    std::string backend;  // "nvml", "nvidia-smi", "file:PATH", "none"
    ProbeHealth health = ProbeHealth::ok;
    bool stale = false;   // true: `gpus` is the last good sample, not a new one
    std::string error;    // why health is not ok
    double latency_seconds = 0;
    std::vector<GpuReading> gpus;

    // The sample as JSON (fields that are not ok come out as
    // {"state": "not_supported"} / {"state": "not_available"}).
    COHORT_API std::string to_json() const;
};

// A GPU's history (GpuMonitor::history) as [{"time", "gpu": {...}}], each
// reading in the form GpuSample::to_json uses.
COHORT_API std::string to_json(const std::vector<std::pair<double, GpuReading>>& history);

}  // namespace cohort
