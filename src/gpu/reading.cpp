// The GPU sample types shared by every backend: state names, the derived
// memory percentage and the JSON form that cohort-smi --json and the
// bindings print.
#include "core/json_text.hpp"
#include <cohort/gpu.hpp>

#include <cmath>
#include <type_traits>

#include <boost/json.hpp>

namespace cohort {

std::string_view to_string(ProbeHealth health) noexcept {
    switch (health) {
        case ProbeHealth::ok: return "ok";
        case ProbeHealth::unresponsive: return "unresponsive";
        case ProbeHealth::failed: return "failed";
    }
    return "unknown";
}

std::string_view to_string(FieldState state) noexcept {
    switch (state) {
        case FieldState::ok: return "ok";
        case FieldState::not_supported: return "not_supported";
        case FieldState::not_available: return "not_available";
    }
    return "unknown";
}

// COHORT_API on the definition as well: the declaration in gpu.hpp lacks it,
// and without it the shared library would hide this member.
COHORT_API Reading<double> GpuReading::memory_used_percent() const {
    if (memory_total_bytes.ok() && memory_used_bytes.ok() && memory_total_bytes.value > 0) {
        return Reading<double>::of(100.0 * static_cast<double>(memory_used_bytes.value) /
                                   static_cast<double>(memory_total_bytes.value));
    }
    // A GPU that cannot report either half cannot report the percentage;
    // anything else (a missing value, a zero total) is only unavailable now.
    if (memory_total_bytes.state == FieldState::not_supported || memory_used_bytes.state == FieldState::not_supported)
        return Reading<double>::unsupported();
    return {};
}

namespace {

boost::json::value state_object(FieldState state) {
    return boost::json::object{{"state", std::string(to_string(state))}};
}

template <typename T>
boost::json::value reading_json(const Reading<T>& reading) {
    if (!reading.ok()) return state_object(reading.state);
    if constexpr (std::is_floating_point_v<T>) {
        // JSON has no NaN or infinity: a backend that produced one has no value.
        if (!std::isfinite(reading.value)) return state_object(FieldState::not_available);
    }
    return boost::json::value(reading.value);
}

boost::json::object gpu_json(const GpuReading& gpu) {
    boost::json::object o;
    o["index"] = gpu.index;
    o["uuid"] = gpu.uuid;
    o["name"] = gpu.name;
    o["pci_bus_id"] = gpu.pci_bus_id;
    o["memory_total_bytes"] = reading_json(gpu.memory_total_bytes);
    o["memory_used_bytes"] = reading_json(gpu.memory_used_bytes);
    o["memory_free_bytes"] = reading_json(gpu.memory_free_bytes);
    o["memory_used_percent"] = reading_json(gpu.memory_used_percent());
    o["gpu_utilization_percent"] = reading_json(gpu.gpu_utilization_percent);
    o["memory_busy_percent"] = reading_json(gpu.memory_busy_percent);
    o["temperature_celsius"] = reading_json(gpu.temperature_celsius);
    o["power_draw_watts"] = reading_json(gpu.power_draw_watts);
    o["power_limit_watts"] = reading_json(gpu.power_limit_watts);
    o["sm_clock_mhz"] = reading_json(gpu.sm_clock_mhz);
    o["memory_clock_mhz"] = reading_json(gpu.memory_clock_mhz);
    o["fan_percent"] = reading_json(gpu.fan_percent);
    o["ecc_corrected_errors"] = reading_json(gpu.ecc_corrected_errors);
    o["ecc_uncorrected_errors"] = reading_json(gpu.ecc_uncorrected_errors);
    o["mig_enabled"] = reading_json(gpu.mig_enabled);
    if (gpu.processes_state == FieldState::ok) {
        boost::json::array processes;
        for (const GpuProcess& p : gpu.processes) {
            processes.push_back(boost::json::object{
                {"pid", p.pid}, {"name", p.name}, {"memory_bytes", reading_json(p.memory_bytes)}});
        }
        o["processes"] = std::move(processes);
    } else {
        o["processes"] = state_object(gpu.processes_state);
    }
    boost::json::array mig;
    for (const MigInstance& m : gpu.mig_instances) {
        mig.push_back(boost::json::object{{"gpu_instance", m.gpu_instance},
                                          {"compute_instance", m.compute_instance},
                                          {"uuid", m.uuid},
                                          {"memory_total_bytes", reading_json(m.memory_total_bytes)},
                                          {"memory_used_bytes", reading_json(m.memory_used_bytes)}});
    }
    o["mig_instances"] = std::move(mig);
    boost::json::array xids;
    for (const XidEvent& x : gpu.xid_events)
        xids.push_back(boost::json::object{{"xid", x.xid}, {"time", x.time}, {"detail", x.detail}});
    o["xid_events"] = std::move(xids);
    return o;
}

}  // namespace

std::string to_json(const std::vector<std::pair<double, GpuReading>>& history) {
    boost::json::array out;
    for (const auto& [time, gpu] : history) out.push_back(boost::json::object{{"time", time}, {"gpu", gpu_json(gpu)}});
    return detail::to_text(out);
}

std::string GpuSample::to_json() const {
    boost::json::object root;
    root["time"] = time;
    root["backend"] = backend;
    root["health"] = std::string(to_string(health));
    root["stale"] = stale;
    root["error"] = error;
    root["latency_seconds"] = latency_seconds;
    boost::json::array list;
    for (const GpuReading& gpu : gpus) list.push_back(gpu_json(gpu));
    root["gpus"] = std::move(list);
    return detail::to_text(root);
}

}  // namespace cohort
