// Why a worker ended, as far as its scheduler can tell beyond the exit
// status: a cluster manager knows when it lost the worker's machine, killed
// it for memory or took its resources back for another job. The launcher
// passes the cause on to the policy (ScalingEvent::cause, the rule
// variable `cause`), so that each can be handled on its own.
#pragma once

#include <cohort/export.hpp>

#include <cstdint>
#include <string_view>

namespace cohort {

enum class ExitCause : uint8_t {
    none,             // nothing beyond the exit status (an ordinary exit or kill)
    node_lost,        // the machine it ran on left the cluster (down, unreachable)
    out_of_memory,    // killed for using more memory than it was given (Kubernetes: OOMKilled)
    preempted,        // the cluster manager took its resources for other work (DisruptionTarget)
    evicted,          // evicted by its node (pressure) or through the eviction API
    pending_timeout,  // never started: unschedulable or pending past the scheduler's deadline
    image_pull,       // never started: its image could not be pulled
    deleted,          // removed by someone else (kubectl delete, a controller)
    api_error,        // the cluster refused to start it (the message says why)
};

// "none", "node_lost", "oom", "preempted", "evicted", "pending_timeout",
// "image_pull", "deleted", "api_error": the values of the rule variable.
COHORT_API std::string_view to_string(ExitCause cause) noexcept;

}  // namespace cohort
