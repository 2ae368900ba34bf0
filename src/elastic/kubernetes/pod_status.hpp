// What a pod's status says about its worker, read the way the kubelet, the
// scheduler and the controllers write it: phase, conditions (PodScheduled,
// DisruptionTarget), status.reason (Evicted, NodeLost) and the first
// container's state (terminated exit code and reason, waiting reason).
#pragma once

#include <cohort/scheduler.hpp>

#include <boost/json/object.hpp>

#include <string>

namespace cohort::k8s {

struct PodState {
    bool ended = false;          // the worker is gone (or going: a disruption with deletion under way)
    bool scheduled = false;      // on a node
    bool unschedulable = false;  // PodScheduled False: Unschedulable
    bool image_pull_error = false;
    std::string node;
    std::string pending_reason;  // for people: the scheduler's or the kubelet's message
    // When ended:
    ExitKind kind = ExitKind::exited;
    ExitCause cause = ExitCause::none;
    int exit_code = 0;
    int signal = 0;
    std::string message;
};

// `deleted`: the pod came in a DELETED event (or is gone from a new list).
PodState classify(const boost::json::object& pod, bool deleted);

}  // namespace cohort::k8s
