// WorkloadRegistry: registered workloads under one mutex; a workload whose
// process ended is dropped whenever it is looked at (find, list, prune).
#include "data/liveness.hpp"

#include <cohort/error.hpp>
#include <cohort/workloads.hpp>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <set>

#include <fmt/format.h>

namespace cohort {

std::string_view to_string(AccessPattern pattern) noexcept {
    return pattern == AccessPattern::random ? "random" : "sequential";
}

uint64_t WorkloadState::gpu_memory_total() const {
    uint64_t total = 0;
    for (const auto& [gpu, bytes] : gpu_memory_bytes) total += bytes;
    return total;
}

namespace {

void check(const Workload& w) {
    const auto bad = [&](std::string_view what) {
        throw Error(Errc::invalid_argument, fmt::format("WorkloadRegistry::add: workload '{}': {}", w.id, what));
    };
    if (w.id.empty()) bad("id is empty; give each workload a unique id");
    if (w.pid <= 0 || w.pid > INT32_MAX) bad(fmt::format("pid must be a process id > 0, got {}", w.pid));
    if (w.memory_bytes == 0) bad("memory_bytes (the expected GPU memory footprint) must be more than 0");
    std::set<uint32_t> seen;
    for (uint32_t gpu : w.gpus)
        if (!seen.insert(gpu).second) bad(fmt::format("gpus lists GPU {} twice", gpu));
    for (const auto& file : w.dataset_files)
        if (file.empty()) bad("dataset_files holds an empty path");
    for (const auto& file : w.model_files)
        if (file.empty()) bad("model_files holds an empty path");
}

void check(std::string_view id, const WorkloadFigures& f) {
    const auto bad = [&](std::string_view field, double value) {
        throw Error(
            Errc::invalid_argument,
            fmt::format("WorkloadRegistry::update: workload '{}': {} must be a number >= 0, got {}", id, field, value));
    };
    if (!std::isfinite(f.io_bytes_per_second) || f.io_bytes_per_second < 0)
        bad("io_bytes_per_second", f.io_bytes_per_second);
    if (!std::isfinite(f.epoch_seconds) || f.epoch_seconds < 0) bad("epoch_seconds", f.epoch_seconds);
}

}  // namespace

struct WorkloadRegistry::Impl {
    struct Entry {
        WorkloadState state;
        std::optional<uint64_t> start_time;  // of its process, when /proc says
    };

    WorkloadRegistryOptions options;
    mutable std::mutex mutex;
    std::map<std::string, Entry, std::less<>> entries;

    bool alive(const Entry& entry) const {
        if (options.alive) return options.alive(entry.state.workload.pid);
        return data::process_alive(entry.state.workload.pid, entry.start_time);
    }

    // Under the lock.
    std::vector<std::string> prune_locked() {
        std::vector<std::string> dropped;
        for (auto it = entries.begin(); it != entries.end();) {
            if (alive(it->second)) {
                ++it;
                continue;
            }
            dropped.push_back(it->first);
            it = entries.erase(it);
        }
        return dropped;
    }
};

WorkloadRegistry::WorkloadRegistry(WorkloadRegistryOptions options) : impl_(std::make_unique<Impl>()) {
    impl_->options = std::move(options);
}

WorkloadRegistry::~WorkloadRegistry() = default;

void WorkloadRegistry::add(Workload workload) {
    check(workload);
    Impl::Entry entry;
    if (!impl_->options.alive) entry.start_time = data::process_start_time(workload.pid);
    entry.state.workload = std::move(workload);
    const std::string& id = entry.state.workload.id;
    if (!impl_->alive(entry))
        throw Error(Errc::not_found, fmt::format("WorkloadRegistry::add: workload '{}': process {} is not running; "
                                                 "register a workload from its running process",
                                                 id, entry.state.workload.pid));
    std::lock_guard lock(impl_->mutex);
    if (impl_->entries.contains(id))
        throw Error(Errc::invalid_argument,
                    fmt::format("WorkloadRegistry::add: workload '{}' is already registered; remove it first or "
                                "choose another id",
                                id));
    impl_->entries.emplace(id, std::move(entry));
}

void WorkloadRegistry::remove(std::string_view id) {
    std::lock_guard lock(impl_->mutex);
    auto it = impl_->entries.find(id);
    if (it == impl_->entries.end())
        throw Error(Errc::not_found, fmt::format("WorkloadRegistry::remove: no workload '{}' is registered", id));
    impl_->entries.erase(it);
}

void WorkloadRegistry::update(std::string_view id, const WorkloadFigures& figures) {
    check(id, figures);
    std::lock_guard lock(impl_->mutex);
    auto it = impl_->entries.find(id);
    if (it == impl_->entries.end())
        throw Error(Errc::not_found, fmt::format("WorkloadRegistry::update: no workload '{}' is registered", id));
    it->second.state.figures = figures;
}

void WorkloadRegistry::observe_gpu_memory(const GpuSample& sample) {
    std::lock_guard lock(impl_->mutex);
    for (auto& [id, entry] : impl_->entries) {
        std::map<uint32_t, uint64_t> bytes;
        for (const GpuReading& gpu : sample.gpus) {
            if (gpu.processes_state != FieldState::ok) continue;
            for (const GpuProcess& process : gpu.processes)
                if (process.pid == entry.state.workload.pid && process.memory_bytes.ok())
                    bytes[gpu.index] += process.memory_bytes.value;
        }
        entry.state.gpu_memory_bytes = std::move(bytes);
    }
}

void WorkloadRegistry::observe_gpu_memory(const std::map<int64_t, uint64_t>& bytes_by_pid) {
    std::lock_guard lock(impl_->mutex);
    for (auto& [id, entry] : impl_->entries) {
        entry.state.gpu_memory_bytes.clear();
        auto it = bytes_by_pid.find(entry.state.workload.pid);
        if (it == bytes_by_pid.end()) continue;
        const std::vector<uint32_t>& gpus = entry.state.workload.gpus;
        entry.state.gpu_memory_bytes[gpus.empty() ? 0 : gpus.front()] = it->second;
    }
}

std::optional<WorkloadState> WorkloadRegistry::find(std::string_view id) {
    std::lock_guard lock(impl_->mutex);
    auto it = impl_->entries.find(id);
    if (it == impl_->entries.end()) return std::nullopt;
    if (!impl_->alive(it->second)) {
        impl_->entries.erase(it);
        return std::nullopt;
    }
    return it->second.state;
}

std::vector<WorkloadState> WorkloadRegistry::list() {
    std::lock_guard lock(impl_->mutex);
    impl_->prune_locked();
    std::vector<WorkloadState> out;
    out.reserve(impl_->entries.size());
    for (const auto& [id, entry] : impl_->entries) out.push_back(entry.state);
    return out;
}

std::vector<std::string> WorkloadRegistry::prune() {
    std::lock_guard lock(impl_->mutex);
    return impl_->prune_locked();
}

std::size_t WorkloadRegistry::size() const {
    std::lock_guard lock(impl_->mutex);
    return impl_->entries.size();
}

}  // namespace cohort
