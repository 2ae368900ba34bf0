// Pod status as the kubelet and the scheduler write it for each PodFate,
// in the shapes of the v1 API reference (PodStatus, PodCondition,
// ContainerStatus, ContainerStateTerminated/Waiting/Running).
#include "pod_fate.hpp"

#include <boost/json/array.hpp>

namespace cohort::k8s_double {

namespace json = boost::json;

namespace {

std::string str(const json::object& o, const char* key) {
    if (const auto* v = o.if_contains(key); v != nullptr && v->is_string()) return std::string(v->as_string());
    return {};
}

json::object& child(json::object& o, const char* key) {
    json::value& v = o[key];
    if (!v.is_object()) v = json::object();
    return v.as_object();
}

json::object condition(const char* type, const char* status, const std::string& reason = {},
                       const std::string& message = {}) {
    json::object c;
    c["type"] = type;
    c["status"] = status;
    c["lastProbeTime"] = nullptr;
    c["lastTransitionTime"] = now_rfc3339();
    if (!reason.empty()) c["reason"] = reason;
    if (!message.empty()) c["message"] = message;
    return c;
}

void set_condition(json::object& status, json::object c) {
    json::value& v = status["conditions"];
    if (!v.is_array()) v = json::array();
    json::array& conditions = v.as_array();
    for (json::value& existing : conditions) {
        if (existing.is_object() && str(existing.as_object(), "type") == str(c, "type")) {
            existing = std::move(c);
            return;
        }
    }
    conditions.push_back(std::move(c));
}

// One container status per container of the spec, each in `state`.
json::array container_statuses(const json::object& pod, const json::object& state, bool ready) {
    json::array out;
    const json::object* spec = pod.if_contains("spec") ? pod.at("spec").if_object() : nullptr;
    const json::array* containers =
        spec != nullptr && spec->if_contains("containers") ? spec->at("containers").if_array() : nullptr;
    if (containers == nullptr) return out;
    for (const json::value& c : *containers) {
        if (!c.is_object()) continue;
        json::object s;
        s["name"] = str(c.as_object(), "name");
        s["image"] = str(c.as_object(), "image");
        s["imageID"] = "";
        s["ready"] = ready;
        s["restartCount"] = 0;
        s["started"] = ready;
        s["state"] = state;
        s["lastState"] = json::object();
        if (!state.contains("waiting")) s["containerID"] = "containerd://" + str(c.as_object(), "name");
        out.push_back(std::move(s));
    }
    return out;
}

json::object terminated(int exit_code, const std::string& reason) {
    json::object t;
    t["exitCode"] = exit_code;
    t["reason"] = reason;
    t["startedAt"] = now_rfc3339();
    t["finishedAt"] = now_rfc3339();
    json::object state;
    state["terminated"] = std::move(t);
    return state;
}

void schedule(json::object& pod, json::object& status, const std::string& node) {
    child(pod, "spec")["nodeName"] = node;
    status["hostIP"] = "10.0.0.1";
    status["startTime"] = now_rfc3339();
    set_condition(status, condition("PodScheduled", "True"));
    set_condition(status, condition("Initialized", "True"));
}

void finish(json::object& pod, json::object& status, int exit_code, const std::string& reason) {
    const bool ok = exit_code == 0;
    status["phase"] = ok ? "Succeeded" : "Failed";
    set_condition(status, condition("Ready", "False", ok ? "PodCompleted" : "PodFailed"));
    set_condition(status, condition("ContainersReady", "False", ok ? "PodCompleted" : "PodFailed"));
    status["containerStatuses"] = container_statuses(pod, terminated(exit_code, reason), false);
}

}  // namespace

void apply_fate(json::object& pod, PodFate fate, int exit_code, const std::string& reason) {
    json::object& status = child(pod, "status");
    const std::string node = [&] {
        const json::object& spec = child(pod, "spec");
        const std::string n = str(spec, "nodeName");
        return n.empty() ? std::string("node-1") : n;
    }();
    switch (fate) {
        case PodFate::running: {
            schedule(pod, status, node);
            status["phase"] = "Running";
            if (!status.contains("podIP")) status["podIP"] = "10.1.0.7";  // the kubelet's (PodRunner's) stays
            set_condition(status, condition("Ready", "True"));
            set_condition(status, condition("ContainersReady", "True"));
            json::object running;
            running["startedAt"] = now_rfc3339();
            json::object state;
            state["running"] = std::move(running);
            status["containerStatuses"] = container_statuses(pod, state, true);
            break;
        }
        case PodFate::succeeded:
            schedule(pod, status, node);
            finish(pod, status, 0, "Completed");
            break;
        case PodFate::failed:
            schedule(pod, status, node);
            finish(pod, status, exit_code, reason.empty() ? "Error" : reason);
            break;
        case PodFate::oom_killed:
            schedule(pod, status, node);
            finish(pod, status, 137, "OOMKilled");
            break;
        case PodFate::evicted:
            schedule(pod, status, node);
            finish(pod, status, 137, "Error");
            status["reason"] = "Evicted";
            status["message"] = reason.empty() ? "The node was low on resource: memory. Threshold quantity: 100Mi, "
                                                 "available: 51200Ki. "
                                               : reason;
            set_condition(status, condition("DisruptionTarget", "True", "TerminationByKubelet",
                                            "The node was low on resource: memory."));
            break;
        case PodFate::preempted:
            schedule(pod, status, node);
            set_condition(status, condition("DisruptionTarget", "True", "PreemptionByScheduler",
                                            "default-scheduler: preempting to accommodate a higher priority pod"));
            finish(pod, status, 143, "Error");
            child(pod, "metadata")["deletionTimestamp"] = now_rfc3339();
            child(pod, "metadata")["deletionGracePeriodSeconds"] = 30;
            break;
        case PodFate::node_lost:
            schedule(pod, status, node);
            set_condition(status,
                          condition("Ready", "False", "NodeStatusUnknown", "Kubelet stopped posting node status."));
            set_condition(status, condition("DisruptionTarget", "True", "DeletionByTaintManager",
                                            "Taint manager: deleting due to NoExecute taint"));
            child(pod, "metadata")["deletionTimestamp"] = now_rfc3339();
            child(pod, "metadata")["deletionGracePeriodSeconds"] = 30;
            break;
        case PodFate::unschedulable:
            status["phase"] = "Pending";
            set_condition(status, condition("PodScheduled", "False", "Unschedulable",
                                            reason.empty() ? "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. "
                                                             "preemption: 0/3 nodes are available: 3 No preemption "
                                                             "victims found for incoming pod."
                                                           : reason));
            break;
        case PodFate::image_pull_error: {
            schedule(pod, status, node);
            status["phase"] = "Pending";
            json::object waiting;
            waiting["reason"] = reason.empty() ? "ImagePullBackOff" : reason;
            waiting["message"] = "Back-off pulling image \"registry.invalid/trainer:1\"";
            json::object state;
            state["waiting"] = std::move(waiting);
            status["containerStatuses"] = container_statuses(pod, state, false);
            set_condition(
                status, condition("Ready", "False", "ContainersNotReady", "containers with unready status: [worker]"));
            break;
        }
    }
}

}  // namespace cohort::k8s_double
