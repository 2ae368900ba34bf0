// Classifying pod endings. The order matters: the kubelet's eviction marks
// status.reason Evicted and also adds a DisruptionTarget condition, and an
// OOMKilled container is OOMKilled whatever else is said about the pod.
#include "elastic/kubernetes/pod_status.hpp"

#include <fmt/format.h>
#include <boost/json/array.hpp>

#include <csignal>

namespace cohort::k8s {

namespace json = boost::json;

namespace {

const json::object* obj(const json::object* o, const char* key) {
    if (o == nullptr) return nullptr;
    const json::value* v = o->if_contains(key);
    return v != nullptr && v->is_object() ? &v->as_object() : nullptr;
}

std::string str(const json::object* o, const char* key) {
    if (o == nullptr) return {};
    const json::value* v = o->if_contains(key);
    return v != nullptr && v->is_string() ? std::string(v->as_string()) : std::string();
}

const json::object* condition(const json::object* status, const char* type) {
    const json::value* cs = status != nullptr ? status->if_contains("conditions") : nullptr;
    if (cs == nullptr || !cs->is_array()) return nullptr;
    for (const json::value& c : cs->as_array())
        if (c.is_object() && str(&c.as_object(), "type") == type) return &c.as_object();
    return nullptr;
}

bool is_image_pull(const std::string& reason) {
    return reason == "ErrImagePull" || reason == "ImagePullBackOff" || reason == "InvalidImageName" ||
           reason == "ErrImageNeverPull";
}

}  // namespace

PodState classify(const json::object& pod, bool deleted) {
    PodState s;
    const json::object* meta = obj(&pod, "metadata");
    const json::object* spec = obj(&pod, "spec");
    const json::object* status = obj(&pod, "status");
    const std::string phase = str(status, "phase");
    const std::string reason = str(status, "reason");
    s.node = str(spec, "nodeName");
    s.scheduled = !s.node.empty();
    const json::object* scheduled = condition(status, "PodScheduled");
    if (scheduled && str(scheduled, "status") == "False" && str(scheduled, "reason") == "Unschedulable") {
        s.unschedulable = true;
        s.pending_reason = "Unschedulable: " + str(scheduled, "message");
    }
    // The first container runs the worker.
    const json::object* terminated = nullptr;
    std::string container;
    if (const json::value* cs = status ? status->if_contains("containerStatuses") : nullptr; cs && cs->is_array()) {
        for (const json::value& c : cs->as_array()) {
            if (!c.is_object()) continue;
            container = str(&c.as_object(), "name");
            const json::object* state = obj(&c.as_object(), "state");
            if (const json::object* waiting = obj(state, "waiting"); waiting && is_image_pull(str(waiting, "reason"))) {
                s.image_pull_error = true;
                s.pending_reason = str(waiting, "reason") + ": " + str(waiting, "message");
            }
            terminated = obj(state, "terminated");
            break;
        }
    }
    const json::object* disruption = condition(status, "DisruptionTarget");
    const bool disrupted = disruption && str(disruption, "status") == "True";
    const bool deleting = meta && meta->contains("deletionTimestamp");
    s.ended = deleted || phase == "Succeeded" || phase == "Failed" || (disrupted && deleting) || reason == "NodeLost";
    if (!s.ended) return s;

    const std::string where = s.node.empty() ? std::string() : fmt::format(" on node {}", s.node);
    if (terminated) {
        const json::value* code = terminated->if_contains("exitCode");
        s.exit_code = code && code->is_int64() ? static_cast<int>(code->as_int64()) : -1;
        s.kind = ExitKind::exited;
    } else if (phase == "Succeeded") {
        s.kind = ExitKind::exited;
    } else {
        // No exit code: it was taken away with its node or its pod.
        s.kind = ExitKind::signaled;
        s.signal = SIGKILL;
    }
    const std::string term_reason = str(terminated, "reason");
    const std::string disruption_reason = str(disruption, "reason");
    if (reason == "Evicted") {
        s.cause = ExitCause::evicted;
        s.message = fmt::format("evicted{}: {}", where, str(status, "message"));
    } else if (term_reason == "OOMKilled") {
        s.cause = ExitCause::out_of_memory;
        s.message =
            fmt::format("OOMKilled: container '{}' killed for memory{} (exit code {})", container, where, s.exit_code);
    } else if (disrupted &&
               (disruption_reason == "PreemptionByScheduler" || disruption_reason == "PreemptionByKubeScheduler")) {
        s.cause = ExitCause::preempted;
        s.message = fmt::format("preempted{}: {}", where, str(disruption, "message"));
    } else if ((disrupted &&
                (disruption_reason == "DeletionByTaintManager" || disruption_reason == "DeletionByPodGC")) ||
               reason == "NodeLost") {
        s.cause = ExitCause::node_lost;
        s.message =
            fmt::format("node lost{}: {}", where, disrupted ? str(disruption, "message") : str(status, "message"));
    } else if (disrupted) {  // TerminationByKubelet, EvictionByEvictionAPI
        s.cause = ExitCause::evicted;
        s.message = fmt::format("evicted{} ({}): {}", where, disruption_reason, str(disruption, "message"));
    } else if (terminated) {
        s.message = s.exit_code == 0 ? "exit code 0"
                                     : fmt::format("exit code {} ({}){}", s.exit_code,
                                                   term_reason.empty() ? "Error" : term_reason, where);
    } else if (deleted) {
        s.cause = ExitCause::deleted;
        s.message = fmt::format("pod deleted{} before its worker ended (by kubectl or a controller)", where);
    } else {
        s.message = fmt::format("pod {}{}: {}", phase, where, reason.empty() ? "no container status" : reason);
    }
    return s;
}

}  // namespace cohort::k8s
