// Probing GPUs without ever hanging the caller. Backends: NVML loaded at run
// time (no link-time dependency, no NVIDIA header), `nvidia-smi` run under a
// hard deadline, and a simulated backend read from a file. GpuProbe runs the
// chosen backend on a thread of its own: a query that outlives its deadline
// is abandoned there and the caller gets the last good sample, marked stale.
#pragma once

#include <cohort/gpu.hpp>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace cohort {

struct ProbeOptions {
    double deadline_seconds = 2.0;                     // per query
    std::string nvml_library = "libnvidia-ml.so.1";    // dlopen'ed; a path or a name
    std::string smi_command = "nvidia-smi";            // found on PATH unless a path
    // The clock samples are stamped with (seconds); the simulated backend's
    // timeline runs on it too. Defaults to the system clock.
    std::function<double()> clock;
};

// One source of readings. read() may block; GpuProbe bounds it.
class COHORT_API GpuBackend {
public:
    virtual ~GpuBackend();
    virtual std::string name() const = 0;
    // Throws Error(unavailable) or Error(timeout) when it cannot read.
    virtual std::vector<GpuReading> read(double deadline_seconds) = 0;
};

// Each throws Error(unavailable) saying why the backend cannot be used:
// "libnvidia-ml.so.1 not found: ...", "nvidia-smi timed out after 2s", ...
COHORT_API std::unique_ptr<GpuBackend> open_nvml_backend(const ProbeOptions& options);
COHORT_API std::unique_ptr<GpuBackend> open_smi_backend(const ProbeOptions& options);
// A YAML/JSON file of GPUs and a timeline (docs/gpu.md); Error(parse) with
// file:line:column for bad files.
COHORT_API std::unique_ptr<GpuBackend> open_simulated_backend(const std::filesystem::path& path,
                                                              const ProbeOptions& options);

// Why each backend was or was not chosen.
struct BackendChoice {
    std::string backend;  // "nvml", "nvidia-smi", "file:PATH", "none"
    bool chosen = false;
    std::string reason;   // empty when chosen
};

class COHORT_API GpuProbe {
public:
    // spec: "auto" (NVML, then nvidia-smi, then none), "nvml", "smi",
    // "file:PATH" or "none". A named backend that cannot be opened throws
    // Error(unavailable) with the reason; "auto" never throws for that.
    static GpuProbe open(std::string_view spec = "auto", ProbeOptions options = {});
    // Wraps any backend (tests use this with a backend that hangs).
    GpuProbe(std::unique_ptr<GpuBackend> backend, ProbeOptions options);

    GpuProbe(GpuProbe&&) noexcept;
    GpuProbe& operator=(GpuProbe&&) noexcept;
    ~GpuProbe();  // never waits for a stuck query

    // Returns within the deadline (plus scheduling slack), whatever the
    // backend does. A failed or late query gives the last good readings with
    // stale = true and health failed or unresponsive.
    GpuSample sample();
    std::string backend() const;
    const std::vector<BackendChoice>& selection() const;

    struct Impl;

private:
    std::shared_ptr<Impl> impl_;
};

}  // namespace cohort
