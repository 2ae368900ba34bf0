// KubernetesScheduler's side of the watch: each change of a pod, deduplicated
// by uid and resourceVersion, classified, and turned into one WorkerExit per
// worker; pods Pending too long given up; placeholders turned into capacity.
#include "elastic/kubernetes/scheduler_impl.hpp"

#include <cohort/error.hpp>

#include <fmt/format.h>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <csignal>

namespace cohort {

using k8s::str;

bool KubernetesScheduler::Impl::handle(const json::object& pod, bool deleted) {
    const std::string name = str(pod, "metadata", "name");
    const std::string uid = str(pod, "metadata", "uid");
    const std::string rv = str(pod, "metadata", "resourceVersion");
    if (done.contains(uid)) {
        if (deleted) live.erase(uid);
        return true;
    }
    if (placeholders.contains(name)) {
        on_placeholder(name, pod, deleted);
        return true;
    }
    const auto owner_it = pod_to_id.find(name);
    if (owner_it == pod_to_id.end()) return true;  // not ours (an earlier run's, or stopped)
    Worker& w = workers.at(owner_it->second);
    if (w.uid.empty()) return false;
    if (w.uid != uid) return true;  // a namesake from before this create
    const auto seen = seen_rv.find(uid);
    if (!deleted && seen != seen_rv.end() && seen->second == rv) return true;  // said already
    seen_rv[uid] = rv;
    if (deleted) {
        live.erase(uid);
    } else {
        live[uid] = pod;
    }
    const k8s::PodState s = k8s::classify(pod, deleted);
    const std::string id = owner_it->second;
    w.node = s.node.empty() ? w.node : s.node;
    if (s.scheduled) w.scheduled = true;
    if (s.ended) {
        WorkerExit exit;
        exit.kind = s.kind;
        exit.exit_code = s.exit_code;
        exit.signal = s.signal;
        exit.cause = s.cause;
        exit.host = w.node;
        exit.message = s.message;
        end(id, std::move(exit), !deleted);
        return true;
    }
    if (s.image_pull_error && s.pending_reason.rfind("ErrImagePull", 0) != 0) {
        give_up(id, ExitCause::image_pull, s.pending_reason);
    }
    return true;
}

void KubernetesScheduler::Impl::end(const std::string& id, WorkerExit exit, bool delete_it) {
    Worker& w = workers.at(id);
    done.insert(w.uid);
    if (delete_it) delete_pod(w.pod, std::chrono::milliseconds(0));
    pod_to_id.erase(w.pod);
    workers.erase(id);
    report(id, std::move(exit));
}

void KubernetesScheduler::Impl::add_placeholder(const std::string& id) {
    const std::string name = fmt::format("{}-placeholder-{}", k8s::dns_name(options.job, 20), next_placeholder++);
    json::object pod = pod_template.make(name, options.cluster.ns, options.job, WorkerSpec{id, {}, {}, {}}, owner);
    json::object& labels = pod["metadata"].as_object()["labels"].as_object();
    labels.erase(k8s::worker_label);
    labels[k8s::role_label] = "placeholder";
    json::object& spec = pod["spec"].as_object();
    spec.erase("initContainers");
    json::object first = spec["containers"].as_array()[0].as_object();
    for (const char* key : {"command", "args", "env", "envFrom", "ports", "livenessProbe", "readinessProbe",
                            "startupProbe", "lifecycle", "volumeMounts", "workingDir"})
        first.erase(key);
    first["image"] = options.placeholder_image;
    spec["containers"] = json::array{std::move(first)};
    spec.erase("volumes");
    placeholders.insert(name);
    pool->submit([this, body = json::serialize(pod)] { api.request("POST", pods_path, body); }, /*urgent=*/false);
}

void KubernetesScheduler::Impl::on_placeholder(const std::string& name, const json::object& pod, bool deleted) {
    const k8s::PodState s = k8s::classify(pod, deleted);
    if (deleted || s.ended) {
        placeholders.erase(name);  // someone removed it: no more news from it
        return;
    }
    if (!s.scheduled) return;
    ScalingEvent e;
    e.kind = EventKind::capacity;
    e.host = s.node;
    e.free_slots = 1;
    e.detail = fmt::format("placeholder pod {} was scheduled on node {}: there is room for a worker", name, s.node);
    capacity_events.push_back(std::move(e));
    placeholders.erase(name);
    delete_pod(name, std::chrono::milliseconds(0));
}

void KubernetesScheduler::Impl::give_up(const std::string& id, ExitCause cause, const std::string& why) {
    WorkerExit exit;
    exit.kind = ExitKind::not_started;
    exit.exit_code = -1;
    exit.cause = cause;
    exit.host = workers.at(id).node;
    exit.message = fmt::format("pod {} never started: {}", workers.at(id).pod, why);
    end(id, std::move(exit), true);
}

void KubernetesScheduler::Impl::take_changes() {
    std::vector<k8s::PodChange> changes = std::exchange(held, {});
    for (k8s::PodChange& c : watch->take()) changes.push_back(std::move(c));
    for (k8s::PodChange& c : changes) {
        if (c.type == k8s::PodChange::synced) {
            // A new list: what it lacks is gone (deleted while no watch ran).
            std::set<std::string> listed;
            for (const json::object& pod : c.pods) {
                listed.insert(str(pod, "metadata", "uid"));
                if (!handle(pod, false)) held.push_back({k8s::PodChange::modified, pod, {}});
            }
            std::vector<json::object> vanished;
            for (const auto& [uid, pod] : live)
                if (!listed.contains(uid)) vanished.push_back(pod);
            // A pod created before the list was asked for, never seen,
            // and not in it: created and deleted between two lists.
            for (const auto& [id, w] : workers) {
                if (w.uid.empty() || live.contains(w.uid) || listed.contains(w.uid) || w.answered >= c.listed_at)
                    continue;
                vanished.push_back(
                    json::object{{"metadata", json::object{{"name", w.pod}, {"uid", w.uid}, {"resourceVersion", ""}}}});
            }
            for (const json::object& pod : vanished) handle(pod, true);
            continue;
        }
        if (!handle(c.pod, c.type == k8s::PodChange::deleted)) held.push_back(std::move(c));
    }
    if (creates_in_flight == 0) held.clear();
}

void KubernetesScheduler::Impl::check_pending() {
    const auto now = Clock::now();
    std::vector<std::string> late;
    for (const auto& [id, w] : workers)
        if (!w.uid.empty() && !w.scheduled && now - w.created > options.pending_timeout) late.push_back(id);
    for (const auto& [id, w] : workers)
        if (!w.uid.empty() && w.scheduled && now - w.created > options.pending_timeout) {
            // Scheduled but never running (an image that cannot be pulled).
            const auto it = live.find(w.uid);
            if (it != live.end() && k8s::classify(it->second, false).image_pull_error) late.push_back(id);
        }
    for (const std::string& id : late) {
        const Worker& w = workers.at(id);
        const auto it = live.find(w.uid);
        const k8s::PodState s = it != live.end() ? k8s::classify(it->second, false) : k8s::PodState{};
        give_up(id, s.image_pull_error ? ExitCause::image_pull : ExitCause::pending_timeout,
                fmt::format("Pending for more than {} s{}", options.pending_timeout.count() / 1000.0,
                            s.pending_reason.empty() ? std::string() : " (" + s.pending_reason + ")"));
        if (!s.image_pull_error && !options.placeholder_image.empty()) add_placeholder(id);
    }
}

}  // namespace cohort
