// TransferScheduler: a queue of reads (byte ranges of real files) run by a
// pool of I/O threads into caller buffers or a staging directory, ordered by
// priority with aging, and steered by a policy: the GPU rule pack's actions
// (reduce_prefetch, delay_transfer, prioritize, stage_transfer) through a
// GpuMonitor, or any function. Every decision is recorded with the rule and
// values behind it. docs/data.md is the guide.
#pragma once

#include <cohort/error.hpp>
#include <cohort/export.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cohort {

class GpuMonitor;
class WorkloadRegistry;

struct TransferResult;

struct TransferRequest {
    std::string id{};        // unique among the transfers queued or running
    std::string workload{};  // the workload it serves (a WorkloadRegistry id when the scheduler has one)
    std::filesystem::path path{};
    uint64_t offset = 0;
    uint64_t length = 0;           // bytes to read (> 0): the transfer's size
    int priority = 0;              // higher first
    std::string kind = "dataset";  // what it carries, the rules' file_type: dataset, model, checkpoint, ...
    // A read ahead of need: counts against the prefetch depth (docs/data.md).
    bool prefetch = false;
    // Finishing after it counts as a miss; the transfer still runs.
    std::optional<std::chrono::steady_clock::time_point> deadline{};
    // Where the bytes go: `buffer` (at least `length` bytes, the caller's
    // until the transfer completes), or a file in the staging directory when
    // `stage` is set or a stage_transfer action says so.
    std::span<std::byte> buffer{};
    bool stage = false;
    // Called once on an I/O thread when the transfer ends, before its future
    // is ready; the transfer counts as running until it returns.
    std::function<void(const TransferResult&)> on_done{};
};

// One decision taken on a transfer, and why.
struct TransferDecision {
    double at_seconds = 0;  // since the transfer was submitted
    std::string rule{};     // the rule behind it; "scheduler" for the scheduler's own
    std::string action{};   // delay_transfer, prioritize, reduce_prefetch, stage_transfer, dispatch, deadline
    std::vector<std::pair<std::string, double>> values{};  // what it was decided from
    std::string effect{};                                  // what it did, in words
    double delay_seconds = 0;                              // the hold it caused (delay_transfer)
};

struct TransferResult {
    std::string id{};
    Errc code = Errc::ok;
    std::string error{};             // names the file and the offset when code is not ok
    uint64_t bytes = 0;              // read
    std::filesystem::path staged{};  // the staging file, when staged (the caller removes it)
    bool missed_deadline = false;
    double waited_seconds = 0;  // submitted -> started
    double seconds = 0;         // submitted -> done
    std::vector<TransferDecision> decisions{};
};

// One rule's say on a transfer, as a policy answers it.
struct PolicyAction {
    std::string rule{};          // who asks (a rule id)
    std::string type{};          // reduce_prefetch, delay_transfer, prioritize or stage_transfer; others are ignored
    std::string category{};      // "memory" or "thermal" count in the stats' events
    double factor = 1.0;         // reduce_prefetch: multiplies the prefetch depth
    double delay_seconds = 0;    // delay_transfer: how long to hold the transfer
    std::optional<int> boost{};  // prioritize: priority added (default: the options' prioritize_boost)
    std::vector<std::pair<std::string, double>> values{};  // what the rule saw
};

// What the scheduler tells a policy about a transfer it is about to queue or start.
struct TransferFacts {
    std::string_view id{};
    std::string_view workload{};
    std::string_view kind{};
    uint64_t bytes = 0;
    int priority = 0;  // the transfer's plus its workload's, before aging and boosts
    bool prefetch = false;
};

// The policy: the actions that apply to a transfer now. Called on the
// scheduler's dispatcher thread, never under its lock.
using TransferPolicy = std::function<std::vector<PolicyAction>(const TransferFacts&)>;

// The GPU rule pack through a monitor (GpuMonitor::io_advice). The monitor
// must outlive the scheduler.
COHORT_API TransferPolicy monitor_policy(GpuMonitor& monitor);

struct TransferOptions {
    std::size_t workers = 2;              // I/O threads (1 to 256)
    std::size_t prefetch_depth = 8;       // prefetch transfers running at once, before reduce_prefetch
    double aging_per_second = 1.0;        // priority a queued transfer gains per second waited (> 0)
    int prioritize_boost = 100;           // what a prioritize action adds, unless it says otherwise
    std::filesystem::path staging_dir{};  // where staged transfers go; empty: staging is off
    TransferPolicy policy{};              // empty: no rules
    // Optional: transfers must name a registered workload, whose priority
    // they inherit; the scheduler prunes it and drops the transfers of
    // workloads that ended. It must outlive the scheduler.
    WorkloadRegistry* registry = nullptr;
    std::size_t explain_history = 1024;  // finished transfers explain() still knows
};

struct TransferStats {
    std::size_t queued = 0;  // waiting now (held ones included): the queue depth
    std::size_t held = 0;    // of which held by delay_transfer now
    std::size_t running = 0;
    uint64_t submitted = 0, completed = 0, failed = 0, dropped = 0;
    uint64_t delayed = 0;            // transfers held at least once
    double total_delay_seconds = 0;  // the holds decided, added up
    uint64_t prioritized = 0;        // transfers a prioritize action boosted
    uint64_t staged = 0;
    uint64_t prefetch_waits = 0;          // prefetch transfers held back by the depth (once per transfer and depth)
    uint64_t misses = 0;                  // finished after their deadline
    uint64_t bytes = 0;                   // read so far
    double bytes_per_second = 0;          // bytes / seconds since the scheduler started
    uint64_t memory_pressure_events = 0;  // decisions taken on a rule of category "memory"
    uint64_t temperature_events = 0;      // ... of category "thermal"
    double prefetch_factor = 1.0;         // the last reduce_prefetch factor (1: none)
    std::size_t prefetch_depth = 0;       // prefetch transfers allowed to run now
};

class COHORT_API TransferScheduler {
public:
    // Error(invalid_argument) naming the option that is out of range.
    explicit TransferScheduler(TransferOptions options = {});
    // Stops taking transfers, runs the ones started, and completes the
    // queued ones with Errc::closed.
    ~TransferScheduler();
    TransferScheduler(const TransferScheduler&) = delete;
    TransferScheduler& operator=(const TransferScheduler&) = delete;

    // Queues a transfer. Error(invalid_argument) naming the field for an
    // empty id or path, a length of 0, a buffer shorter than the length, no
    // destination, an id already queued or running; Error(not_found) for a
    // workload the registry does not know. The future is always fulfilled
    // with a result (a failed read is a result with an error, not an
    // exception).
    std::future<TransferResult> submit(TransferRequest request);

    // The decisions taken on a transfer so far, queued, running or among
    // the last finished ones; Error(not_found) otherwise.
    std::vector<TransferDecision> explain(std::string_view id) const;
    TransferStats stats() const;

    // The prefetch depth before any reduce_prefetch factor
    // (TransferOptions::prefetch_depth), changed from now on: transfers
    // already running keep running; a deeper limit lets waiting prefetches
    // start at once. Any thread. Error(invalid_argument) for 0. The
    // Autotuner tunes it through a TunableParameter (docs/collectives.md#autotuning).
    void set_prefetch_depth(std::size_t depth);
    std::size_t prefetch_depth() const;

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace cohort
