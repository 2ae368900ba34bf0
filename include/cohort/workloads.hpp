// WorkloadRegistry: the GPU workloads of a node (a training or evaluation
// process each), what they need and how they are doing, so that the data
// path (TransferScheduler, <cohort/transfers.hpp>) can weigh their transfers.
// Workloads whose process has ended are dropped. docs/data.md is the guide.
#pragma once

#include <cohort/export.hpp>
#include <cohort/gpu.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cohort {

enum class AccessPattern : uint8_t { sequential = 0, random = 1 };
COHORT_API std::string_view to_string(AccessPattern pattern) noexcept;

// What a workload declares when it registers.
struct Workload {
    std::string id{};              // unique in the registry
    int64_t pid = 0;               // its process (> 0)
    std::vector<uint32_t> gpus{};  // the GPU indices it runs on (no repeats)
    uint64_t memory_bytes = 0;     // expected GPU memory footprint (> 0)
    int priority = 0;              // higher first; TransferScheduler adds it to its transfers'
    std::vector<std::filesystem::path> dataset_files{};
    std::vector<std::filesystem::path> model_files{};
    AccessPattern access = AccessPattern::sequential;
};

// Live figures the workload (or whoever watches it) reports; 0 is unknown.
struct WorkloadFigures {
    double io_bytes_per_second = 0;  // >= 0
    uint64_t batch_size = 0;
    double epoch_seconds = 0;  // >= 0
};

// A registered workload as the registry knows it now.
struct WorkloadState {
    Workload workload{};
    WorkloadFigures figures{};
    // GPU memory its process holds, per GPU index, from the last GPU sample
    // (or map) given to observe_gpu_memory(); empty when none named it.
    std::map<uint32_t, uint64_t> gpu_memory_bytes{};
    COHORT_API uint64_t gpu_memory_total() const;
};

struct WorkloadRegistryOptions {
    // Whether process `pid` still runs. Default: kill(pid, 0) and /proc
    // (a zombie counts as ended; so does a pid reused by a new process).
    std::function<bool(int64_t pid)> alive{};
};

class COHORT_API WorkloadRegistry {
public:
    explicit WorkloadRegistry(WorkloadRegistryOptions options = {});
    ~WorkloadRegistry();
    WorkloadRegistry(const WorkloadRegistry&) = delete;
    WorkloadRegistry& operator=(const WorkloadRegistry&) = delete;

    // Error(invalid_argument) naming the field for an empty id, a pid <= 0,
    // a memory footprint of 0, a GPU listed twice or an empty file path;
    // for an id already registered; Error(not_found) when the process is
    // not running.
    void add(Workload workload);
    // Error(not_found) for an id that is not registered.
    void remove(std::string_view id);
    // Error(not_found) for an unknown id; Error(invalid_argument) for a
    // negative or non-finite figure.
    void update(std::string_view id, const WorkloadFigures& figures);

    // Per-process GPU memory: from a probe's sample (each GPU's process
    // list, where the backend gives one) or from a map pid -> bytes the
    // caller measured (one entry per pid, counted on the workload's first
    // GPU, or GPU 0 when it lists none).
    void observe_gpu_memory(const GpuSample& sample);
    void observe_gpu_memory(const std::map<int64_t, uint64_t>& bytes_by_pid);

    // The workload, or nothing when it is not registered or its process
    // ended (then it is dropped here).
    std::optional<WorkloadState> find(std::string_view id);
    // Every live workload, by id (the dead ones are dropped first).
    std::vector<WorkloadState> list();
    // Drops the workloads whose process ended; returns their ids.
    std::vector<std::string> prune();
    std::size_t size() const;

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace cohort
