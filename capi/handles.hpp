// What each opaque C handle holds, and the one place C++ exceptions become
// status codes. Nothing but the C ABI's mapping lives in capi/.
#pragma once

#include "cohort.h"

#include <cohort/cohort.hpp>

#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

struct cohort_topology {
    cohort::Topology impl;
};
struct cohort_rank_order {
    cohort::RankOrder impl;
};
struct cohort_dataset {
    cohort::Dataset impl;
};
struct cohort_shards {
    cohort::ShardSet impl;
};
struct cohort_plan_options {
    cohort::PlanOptions impl;
};
struct cohort_shard_plan {
    cohort::ShardPlan impl;
};
struct cohort_symbols {
    std::shared_ptr<cohort::Symbols> impl;
};
struct cohort_expr {
    cohort::Expression impl;
    std::vector<std::string> variables;  // for borrowed names
};
struct cohort_context {
    cohort::Context impl;
};
struct cohort_rules {
    cohort::RuleEngine impl;
};
struct cohort_gpu_probe {
    std::optional<cohort::GpuProbe> impl;  // empty once moved into a monitor
    std::string backend;                   // kept for borrowed reads
    std::string selection_json;
};
struct cohort_gpu_monitor {
    cohort::GpuMonitor impl;  // synchronises its own calls
};
struct cohort_comm_options {
    cohort::CommOptions impl;  // rank and size come from cohort_comm_create
};
struct cohort_comm {
    cohort::Communicator impl;
};
struct cohort_work {
    cohort::Work impl;  // shares the operation's state with the progress thread
};
struct cohort_coordinator {
    cohort::Coordinator impl;
    std::string url;  // for borrowed reads
};
struct cohort_coordinator_client {
    cohort::CoordinatorClient impl;  // synchronises its own calls
};
struct cohort_workload_registry {
    explicit cohort_workload_registry(cohort::WorkloadRegistryOptions options) : impl(std::move(options)) {}
    cohort::WorkloadRegistry impl;  // synchronises its own calls
};
struct cohort_transfer_scheduler {
    explicit cohort_transfer_scheduler(cohort::TransferOptions options) : impl(std::move(options)) {}
    cohort::TransferScheduler impl;  // synchronises its own calls
};
struct cohort_transfer {
    std::string id;                                      // for borrowed reads
    std::shared_future<cohort::TransferResult> future;  // outlives the scheduler
};
struct cohort_transfer_actions {  // a policy callback's answer, on the dispatcher thread
    std::vector<cohort::PolicyAction> actions;
    std::string error;
};

namespace cohort::capi {

void set_last_error(const char* message) noexcept;
const char* last_error_message() noexcept;

// The status a code becomes at the boundary (status.cpp checks that each
// cohort::Errc equals its COHORT_ERR_* constant).
int to_status(Errc code) noexcept;

// Runs `body(function)`, turning any exception into a status and the
// thread's last error. No exception leaves this function. `function` is the
// C function's name, for messages (__func__ inside a lambda names the lambda).
template <typename Body>
int guard(const char* function, Body&& body) noexcept {
    try {
        body(function);
        return COHORT_OK;
    } catch (const cohort::Error& e) {
        set_last_error(e.what());
        return to_status(e.code());
    } catch (const std::bad_alloc&) {
        set_last_error("out of memory");
        return COHORT_ERR_NO_MEMORY;
    } catch (const std::exception& e) {
        set_last_error((std::string("internal error: ") + e.what()).c_str());
        return COHORT_ERR_INTERNAL;
    } catch (...) {
        set_last_error("internal error: unknown exception");
        return COHORT_ERR_INTERNAL;
    }
}

// Throws Error(invalid_argument) "FUNCTION: WHAT must not be NULL".
inline void require(const void* pointer, const char* function, const char* what) {
    if (pointer == nullptr)
        throw Error(Errc::invalid_argument, std::string(function) + ": " + what + " must not be NULL");
}

// A duration argument in seconds (contract 6) as whole milliseconds, rounded
// up so that a positive value never becomes 0, which often means "the
// default". Fails with invalid_argument naming `what` unless it is finite, at
// least 0 (more than 0 unless zero_ok) and at most a year: a deadline of now
// plus a year cannot overflow a nanosecond clock.
std::chrono::milliseconds milliseconds_arg(double seconds, const char* function, const char* what, bool zero_ok);

// A copy of `text` in memory the caller frees with cohort_free.
char* copy_out(const std::string& text);

// copy_out into *out, and its length (without the NUL) into *length when
// that is not NULL.
inline void give_text(const std::string& text, char** out, size_t* length) {
    *out = copy_out(text);
    if (length != nullptr) *length = text.size();
}

}  // namespace cohort::capi
