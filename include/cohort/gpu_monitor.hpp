// A background sampler over a GpuProbe: a bounded history per GPU, window
// statistics, rule-engine variables, and, through the shipped GPU rule pack,
// the answers the I/O path asks for (how hard to prefetch, how long to hold
// a transfer).
#pragma once

#include <cohort/expression.hpp>
#include <cohort/gpu_probe.hpp>

#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cohort {

struct MonitorOptions {
    double interval_seconds = 1.0;
    std::size_t history = 600;  // samples kept per GPU
    // The rule pack behind prefetch_factor() and transfer_delay(); empty
    // means the shipped rules/gpu_io.yaml (found next to the library or via
    // COHORT_RULES_DIR).
    std::filesystem::path rules;
};

// Metrics a window can summarise.
enum class GpuMetric : uint8_t { memory_used_percent, memory_busy_percent, utilization_percent, temperature_celsius, power_watts };

struct WindowStats {
    std::size_t count = 0;  // samples in the window that had the metric
    double min = 0, mean = 0, max = 0;
};

// One action of a rule of the pack that is firing now: what the I/O path is
// asked to do, and which rule asks (for a scheduler's explanations).
struct IoAction {
    std::string rule;          // the rule's id
    std::string type;          // reduce_prefetch, delay_transfer, prioritize, stage_transfer, ...
    std::string category;      // the rule's `category` label ("memory", "thermal", "io"), or empty
    double factor = 1.0;       // reduce_prefetch: its factor
    double delay_seconds = 0;  // delay_transfer: its delay
};

// The firing actions for one transfer, and the values the rules saw.
struct IoAdvice {
    std::vector<IoAction> actions;  // rules by priority, then each rule's actions in order
    std::vector<std::pair<std::string, double>> values;  // numbers and booleans (0/1) that were set
};

// One transfer, as the pack's per-transfer variables see it: file_type
// (kind), transfer_size (bytes), transfer_priority (priority) and prefetch.
struct IoTransfer {
    uint64_t bytes = 0;
    std::string_view kind{};  // "model", "dataset", ...
    // The transfer's priority plus its workload's (TransferScheduler's
    // base priority, before aging and boosts); 0 when nobody said.
    int priority = 0;
    bool prefetch = false;  // read ahead of need (a loader's prefetch), not awaited now
};

class COHORT_API GpuMonitor {
public:
    GpuMonitor(GpuProbe probe, MonitorOptions options = {});
    ~GpuMonitor();  // stops the sampler
    GpuMonitor(const GpuMonitor&) = delete;
    GpuMonitor& operator=(const GpuMonitor&) = delete;

    void start();  // samples every interval on a thread of its own
    void stop();
    bool running() const;
    // Takes one sample now, on the calling thread (tests and manual loops).
    GpuSample sample_now();

    std::optional<GpuSample> latest() const;
    // The kept samples of one GPU, oldest first: (time, reading).
    std::vector<std::pair<double, GpuReading>> history(uint32_t gpu) const;
    // Over the samples of the last `window_seconds` (by sample time).
    WindowStats stats(uint32_t gpu, GpuMetric metric, double window_seconds) const;

    // Sets gpu_memory (used / total %), gpu_memory_busy, gpu_util,
    // gpu_temperature and gpu_power to the maximum across GPUs, and
    // gpuN.memory ... per GPU, from the latest sample. Variables a context's
    // symbols do not know are skipped.
    void publish(Context& context) const;
    // From the rule pack: the reduce_prefetch factor of the rules firing now
    // (the smallest), or 1.0 when none fires.
    double prefetch_factor();
    // Seconds to hold a transfer of `bytes` of `kind` ("model", "dataset",
    // ...): the largest delay_transfer delay firing now, else 0.
    // A transfer of priority 0 that is not a prefetch, as IoTransfer says.
    double transfer_delay(uint64_t bytes, std::string_view kind);
    double transfer_delay(const IoTransfer& transfer);
    // Every action firing now for a transfer of `bytes` of `kind`, with its
    // rule: prefetch_factor() and transfer_delay() are the smallest factor
    // and the longest delay in it. prioritize and stage_transfer are the
    // caller's to act on (TransferScheduler does, <cohort/transfers.hpp>).
    // The two-argument form asks for a transfer of priority 0 that is not a
    // prefetch; the shipped pack holds those while a GPU is hot.
    IoAdvice io_advice(uint64_t bytes, std::string_view kind);
    IoAdvice io_advice(const IoTransfer& transfer);

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace cohort
