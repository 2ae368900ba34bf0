#include "table.hpp"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <string_view>

#include <fmt/format.h>
#include <unistd.h>

namespace cohort_smi {

namespace {

const char* missing(cohort::FieldState state) {
    return state == cohort::FieldState::not_supported ? "n/s" : "-";
}

template <typename T>
std::string mib(const cohort::Reading<T>& bytes) {
    if (!bytes.ok()) return missing(bytes.state);
    return fmt::format("{}", std::llround(static_cast<double>(bytes.value) / (1024.0 * 1024.0)));
}

std::string local_time(double seconds, const char* format) {
    const std::time_t t = static_cast<std::time_t>(seconds);
    std::tm tm{};
    localtime_r(&t, &tm);
    char text[64];
    return std::strftime(text, sizeof text, format, &tm) ? text : "?";
}

std::string host_name() {
    char name[256] = {};
    if (gethostname(name, sizeof name - 1) != 0) return "localhost";
    return name;
}

std::string memory_cell(const cohort::GpuReading& gpu) {
    std::string out = fmt::format("{} / {} MiB", mib(gpu.memory_used_bytes), mib(gpu.memory_total_bytes));
    const cohort::Reading<double> percent = gpu.memory_used_percent();
    return out + (percent.ok() ? fmt::format(" ({:3.0f} %)", percent.value) : std::string(" (  - %)"));
}

std::string power_cell(const cohort::GpuReading& gpu) {
    return fmt::format("{} / {} W", cell(gpu.power_draw_watts, "{:.0f}"), cell(gpu.power_limit_watts, "{:.0f}"));
}

// "python/1234(30000MiB) ..." as gpustat shows them.
std::string processes_cell(const cohort::GpuReading& gpu) {
    if (gpu.processes_state != cohort::FieldState::ok) return missing(gpu.processes_state);
    std::string out;
    for (const cohort::GpuProcess& p : gpu.processes) {
        if (!out.empty()) out += ' ';
        // nvidia-smi gives the whole path; gpustat shows the command name.
        const std::string_view name = std::string_view(p.name).substr(p.name.rfind('/') + 1);
        out += fmt::format("{}/{}({}{})", name.empty() ? "?" : name, p.pid, mib(p.memory_bytes),
                           p.memory_bytes.ok() ? "MiB" : "");
    }
    return out;
}

}  // namespace

std::string cell(const cohort::Reading<double>& reading, const char* format) {
    if (!reading.ok()) return missing(reading.state);
    return fmt::format(fmt::runtime(format), reading.value);
}

std::string table(const cohort::GpuSample& sample, const std::vector<cohort::BackendChoice>& selection) {
    std::string out =
        fmt::format("{}  {}  backend {} ({:.2f} ms)\n", host_name(), local_time(sample.time, "%Y-%m-%d %H:%M:%S"),
                    sample.backend, sample.latency_seconds * 1e3);
    for (const cohort::BackendChoice& choice : selection) {
        if (!choice.chosen) out += fmt::format("  auto passed over {}: {}\n", choice.backend, choice.reason);
    }
    if (sample.health != cohort::ProbeHealth::ok) {
        out += fmt::format("  warning: {}{}{}\n", cohort::to_string(sample.health), sample.error.empty() ? "" : ": ",
                           sample.error);
    }
    if (sample.stale) out += "  warning: stale: these are the last good readings, not new ones\n";
    if (sample.gpus.empty()) return out + "  no GPUs\n";

    size_t name_width = 0;
    for (const cohort::GpuReading& gpu : sample.gpus) name_width = std::max(name_width, gpu.name.size());
    for (const cohort::GpuReading& gpu : sample.gpus) {
        const std::string processes = processes_cell(gpu);
        out += fmt::format("[{}] {:<{}} | {:>4}, {:>5} | {:>26} | {:>11} |{}{}\n", gpu.index, gpu.name, name_width,
                           cell(gpu.temperature_celsius, "{:.0f}°C"), cell(gpu.gpu_utilization_percent, "{:.0f} %"),
                           memory_cell(gpu), power_cell(gpu), processes.empty() ? "" : " ", processes);
        for (const cohort::MigInstance& mig : gpu.mig_instances) {
            out += fmt::format("    MIG {}/{} {}: {} / {} MiB\n", mig.gpu_instance, mig.compute_instance, mig.uuid,
                               mib(mig.memory_used_bytes), mib(mig.memory_total_bytes));
        }
        for (const cohort::XidEvent& xid : gpu.xid_events) {
            out += fmt::format("    Xid {} at {}{}{}\n", xid.xid, local_time(xid.time, "%H:%M:%S"),
                               xid.detail.empty() ? "" : ": ", xid.detail);
        }
    }
    return out;
}

}  // namespace cohort_smi
