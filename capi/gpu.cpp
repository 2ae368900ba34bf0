// C ABI: GPU probes and monitors (cohort/gpu_probe.hpp, cohort/gpu_monitor.hpp).
#include "handles.hpp"

#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <boost/json.hpp>

using cohort::Errc;
using cohort::Error;
using cohort::capi::give_text;
using cohort::capi::guard;
using cohort::capi::require;

namespace {

// A backend with no GPUs that never blocks: for trying monitor options.
class IdleBackend final : public cohort::GpuBackend {
public:
    std::string name() const override { return "none"; }
    std::vector<cohort::GpuReading> read(double) override { return {}; }
};

// A duration argument: finite and positive.
void check_seconds(double seconds, const char* fn, const char* what) {
    if (!(seconds > 0) || !std::isfinite(seconds)) {
        throw Error(Errc::invalid_argument,
                    fmt::format("{}: {} must be a positive number of seconds, got {}", fn, what, seconds));
    }
}

cohort::GpuProbe& live_probe(cohort_gpu_probe* probe, const char* fn) {
    require(probe, fn, "probe");
    if (!probe->impl) {
        throw Error(Errc::invalid_argument,
                    fmt::format("{}: the probe was moved into a monitor by cohort_gpu_monitor_create; "
                                "sample through the monitor",
                                fn));
    }
    return *probe->impl;
}

std::string selection_json(const std::vector<cohort::BackendChoice>& choices) {
    boost::json::array out;
    for (const cohort::BackendChoice& c : choices)
        out.push_back({{"backend", c.backend}, {"chosen", c.chosen}, {"reason", c.reason}});
    return boost::json::serialize(out);
}

// The maxima the monitor publishes to rules, NaN where no GPU has a value.
cohort_gpu_summary summarize(const cohort::GpuSample& sample) {
    const double none = std::numeric_limits<double>::quiet_NaN();
    cohort_gpu_summary s{};
    s.time = sample.time;
    s.latency_seconds = sample.latency_seconds;
    s.gpu_count = static_cast<uint32_t>(sample.gpus.size());
    s.health = static_cast<int32_t>(sample.health);
    s.stale = sample.stale ? 1 : 0;
    s.max_memory_used_percent = s.max_memory_busy_percent = s.max_utilization_percent = none;
    s.max_temperature_celsius = s.max_power_watts = none;
    auto take_max = [](double& max, const cohort::Reading<double>& r) {
        if (r.ok() && !(r.value <= max)) max = r.value;  // NaN compares false: the first value wins
    };
    for (const cohort::GpuReading& gpu : sample.gpus) {
        s.process_count += static_cast<uint32_t>(gpu.processes.size());
        if (gpu.memory_used_bytes.ok()) s.memory_used_bytes += gpu.memory_used_bytes.value;
        if (gpu.memory_total_bytes.ok()) s.memory_total_bytes += gpu.memory_total_bytes.value;
        take_max(s.max_memory_used_percent, gpu.memory_used_percent());
        take_max(s.max_memory_busy_percent, gpu.memory_busy_percent);
        take_max(s.max_utilization_percent, gpu.gpu_utilization_percent);
        take_max(s.max_temperature_celsius, gpu.temperature_celsius);
        take_max(s.max_power_watts, gpu.power_draw_watts);
    }
    return s;
}

// {"backend", "available", "reason"}: whether `open` succeeds, and why not.
template <typename Open>
boost::json::object availability(const char* name, Open open) {
    try {
        open();
        return {{"backend", name}, {"available", true}, {"reason", ""}};
    } catch (const cohort::Error& e) {
        return {{"backend", name}, {"available", false}, {"reason", e.what()}};
    }
}


cohort::GpuMetric metric_of(int32_t metric, const char* fn) {
    if (metric < COHORT_GPU_METRIC_MEMORY_USED || metric > COHORT_GPU_METRIC_POWER) {
        throw Error(Errc::invalid_argument,
                    fmt::format("{}: unknown metric {} (expected a COHORT_GPU_METRIC_* constant)", fn, metric));
    }
    return static_cast<cohort::GpuMetric>(metric);
}

// NOT_FOUND for a GPU index the latest sample does not have (indices need
// not be contiguous). Before the first sample every index is empty.
void check_gpu(const cohort_gpu_monitor& monitor, uint32_t gpu, const char* fn) {
    const auto latest = monitor.impl.latest();
    if (!latest) return;
    std::string known;
    for (const cohort::GpuReading& reading : latest->gpus) {
        if (reading.index == gpu) return;
        known += fmt::format("{}{}", known.empty() ? "" : ", ", reading.index);
    }
    throw Error(Errc::not_found, fmt::format("{}: no GPU with index {} in the latest sample ({})", fn, gpu,
                                             known.empty() ? "it has no GPUs" : "GPUs " + known));
}

}  // namespace

extern "C" {

int cohort_gpu_backends(double deadline_seconds, char** json, size_t* length) {
    return guard(__func__, [&](const char* fn) {
        require(json, fn, "json");
        check_seconds(deadline_seconds, fn, "deadline_seconds");
        cohort::ProbeOptions options;
        options.deadline_seconds = deadline_seconds;
        boost::json::array out;
        // Through GpuProbe::open, which bounds even a call with no deadline
        // of its own (a wedged nvmlInit).
        out.push_back(availability("nvml", [&] { cohort::GpuProbe::open("nvml", options); }));
        out.push_back(availability("nvidia-smi", [&] { cohort::GpuProbe::open("smi", options); }));
        out.push_back({{"backend", "file"}, {"available", true}, {"reason", ""}});
        out.push_back({{"backend", "none"}, {"available", true}, {"reason", ""}});
        give_text(boost::json::serialize(out), json, length);
    });
}

int cohort_gpu_probe_open(const char* spec, double deadline_seconds, cohort_gpu_probe** out) {
    return guard(__func__, [&](const char* fn) {
        require(out, fn, "out");
        check_seconds(deadline_seconds, fn, "deadline_seconds");
        cohort::ProbeOptions options;
        options.deadline_seconds = deadline_seconds;
        cohort::GpuProbe probe = cohort::GpuProbe::open(spec ? spec : "auto", std::move(options));
        std::string backend = probe.backend();
        std::string selection = selection_json(probe.selection());
        *out = new cohort_gpu_probe{std::move(probe), std::move(backend), std::move(selection)};
    });
}

void cohort_gpu_probe_destroy(cohort_gpu_probe* probe) {
    delete probe;
}

int cohort_gpu_probe_backend(const cohort_gpu_probe* probe, const char** backend) {
    return guard(__func__, [&](const char* fn) {
        require(probe, fn, "probe");
        require(backend, fn, "backend");
        *backend = probe->backend.c_str();
    });
}

int cohort_gpu_probe_selection(const cohort_gpu_probe* probe, char** json, size_t* length) {
    return guard(__func__, [&](const char* fn) {
        require(probe, fn, "probe");
        require(json, fn, "json");
        give_text(probe->selection_json, json, length);
    });
}

int cohort_gpu_probe_sample(cohort_gpu_probe* probe, char** json, size_t* length) {
    return guard(__func__, [&](const char* fn) {
        cohort::GpuProbe& p = live_probe(probe, fn);
        require(json, fn, "json");
        give_text(p.sample().to_json(), json, length);
    });
}

int cohort_gpu_probe_sample_summary(cohort_gpu_probe* probe, cohort_gpu_summary* out) {
    return guard(__func__, [&](const char* fn) {
        cohort::GpuProbe& p = live_probe(probe, fn);
        require(out, fn, "out");
        *out = summarize(p.sample());
    });
}

int cohort_gpu_monitor_create(cohort_gpu_probe* probe, double interval_seconds, uint32_t history,
                              const char* rules_path, cohort_gpu_monitor** out) {
    return guard(__func__, [&](const char* fn) {
        live_probe(probe, fn);
        require(out, fn, "out");
        check_seconds(interval_seconds, fn, "interval_seconds");
        if (history == 0) throw Error(Errc::invalid_argument, fmt::format("{}: history must be at least 1", fn));
        cohort::MonitorOptions options;
        options.interval_seconds = interval_seconds;
        options.history = history;
        if (rules_path) options.rules = rules_path;
        // Options (and a named rule pack) that GpuMonitor refuses must leave
        // the caller's probe usable, but GpuMonitor consumes its probe even
        // when it throws: try them first on a monitor of its own.
        cohort::GpuMonitor trial(cohort::GpuProbe(std::make_unique<IdleBackend>(), {}), options);
        cohort_gpu_monitor* monitor = nullptr;
        try {
            monitor = new cohort_gpu_monitor{cohort::GpuMonitor(std::move(*probe->impl), std::move(options))};
        } catch (...) {
            probe->impl.reset();  // taken even so
            throw;
        }
        probe->impl.reset();
        *out = monitor;
    });
}

void cohort_gpu_monitor_destroy(cohort_gpu_monitor* monitor) {
    delete monitor;
}

int cohort_gpu_monitor_start(cohort_gpu_monitor* monitor) {
    return guard(__func__, [&](const char* fn) {
        require(monitor, fn, "monitor");
        monitor->impl.start();
    });
}

int cohort_gpu_monitor_stop(cohort_gpu_monitor* monitor) {
    return guard(__func__, [&](const char* fn) {
        require(monitor, fn, "monitor");
        monitor->impl.stop();
    });
}

int cohort_gpu_monitor_running(const cohort_gpu_monitor* monitor, int32_t* running) {
    return guard(__func__, [&](const char* fn) {
        require(monitor, fn, "monitor");
        require(running, fn, "running");
        *running = monitor->impl.running() ? 1 : 0;
    });
}

int cohort_gpu_monitor_sample_now(cohort_gpu_monitor* monitor, char** json, size_t* length) {
    return guard(__func__, [&](const char* fn) {
        require(monitor, fn, "monitor");
        const cohort::GpuSample sample = monitor->impl.sample_now();
        if (json) give_text(sample.to_json(), json, length);
    });
}

int cohort_gpu_monitor_latest(const cohort_gpu_monitor* monitor, char** json, size_t* length) {
    return guard(__func__, [&](const char* fn) {
        require(monitor, fn, "monitor");
        require(json, fn, "json");
        const auto latest = monitor->impl.latest();
        if (!latest) {
            throw Error(Errc::not_found, fmt::format("{}: no sample yet (start the monitor or call "
                                                     "cohort_gpu_monitor_sample_now)",
                                                     fn));
        }
        give_text(latest->to_json(), json, length);
    });
}

int cohort_gpu_monitor_latest_summary(const cohort_gpu_monitor* monitor, cohort_gpu_summary* out) {
    return guard(__func__, [&](const char* fn) {
        require(monitor, fn, "monitor");
        require(out, fn, "out");
        const auto latest = monitor->impl.latest();
        if (!latest) {
            throw Error(Errc::not_found, fmt::format("{}: no sample yet (start the monitor or call "
                                                     "cohort_gpu_monitor_sample_now)",
                                                     fn));
        }
        *out = summarize(*latest);
    });
}

int cohort_gpu_monitor_history(const cohort_gpu_monitor* monitor, uint32_t gpu, char** json, size_t* length) {
    return guard(__func__, [&](const char* fn) {
        require(monitor, fn, "monitor");
        require(json, fn, "json");
        check_gpu(*monitor, gpu, fn);
        give_text(cohort::to_json(monitor->impl.history(gpu)), json, length);
    });
}

int cohort_gpu_monitor_stats(const cohort_gpu_monitor* monitor, uint32_t gpu, int32_t metric, double window_seconds,
                             uint64_t* count, double* min, double* mean, double* max) {
    return guard(__func__, [&](const char* fn) {
        require(monitor, fn, "monitor");
        require(count, fn, "count");
        const cohort::GpuMetric m = metric_of(metric, fn);
        if (!(window_seconds >= 0)) {
            throw Error(Errc::invalid_argument,
                        fmt::format("{}: window_seconds must be 0 or more (INFINITY for every kept sample), got {}", fn,
                                    window_seconds));
        }
        check_gpu(*monitor, gpu, fn);
        const cohort::WindowStats stats = monitor->impl.stats(gpu, m, window_seconds);
        *count = stats.count;
        if (min) *min = stats.count ? stats.min : 0;
        if (mean) *mean = stats.count ? stats.mean : 0;
        if (max) *max = stats.count ? stats.max : 0;
    });
}

int cohort_gpu_monitor_publish(const cohort_gpu_monitor* monitor, cohort_context* context) {
    return guard(__func__, [&](const char* fn) {
        require(monitor, fn, "monitor");
        require(context, fn, "context");
        monitor->impl.publish(context->impl);
    });
}

int cohort_gpu_monitor_prefetch_factor(cohort_gpu_monitor* monitor, double* factor) {
    return guard(__func__, [&](const char* fn) {
        require(monitor, fn, "monitor");
        require(factor, fn, "factor");
        *factor = monitor->impl.prefetch_factor();
    });
}

int cohort_gpu_monitor_transfer_delay(cohort_gpu_monitor* monitor, uint64_t bytes, const char* kind, double* seconds) {
    return guard(__func__, [&](const char* fn) {
        require(monitor, fn, "monitor");
        require(kind, fn, "kind");
        require(seconds, fn, "seconds");
        *seconds = monitor->impl.transfer_delay(bytes, kind);
    });
}

int cohort_gpu_monitor_transfer_delay_for(cohort_gpu_monitor* monitor, uint64_t bytes, const char* kind,
                                          int32_t priority, int32_t prefetch, double* seconds) {
    return guard(__func__, [&](const char* fn) {
        require(monitor, fn, "monitor");
        require(kind, fn, "kind");
        require(seconds, fn, "seconds");
        if (prefetch != 0 && prefetch != 1) {
            throw Error(Errc::invalid_argument, fmt::format("{}: prefetch must be 0 or 1, not {}", fn, prefetch));
        }
        *seconds = monitor->impl.transfer_delay(
            cohort::IoTransfer{.bytes = bytes, .kind = kind, .priority = priority, .prefetch = prefetch == 1});
    });
}

}  // extern "C"
