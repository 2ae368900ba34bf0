// KubernetesScheduler's state, shared by its three files:
// kubernetes_scheduler.cpp (the Scheduler interface), requests.cpp (creates,
// deletes and patches on the request pool) and pod_events.cpp (the watch's
// changes: classification, ends, pending timeouts, placeholders). The
// launcher's thread owns everything here except `results` and
// `abandoned`, which the pool's threads share under `results_mu`.
#pragma once

#include "elastic/kubernetes/api_client.hpp"
#include "elastic/kubernetes/pod_status.hpp"
#include "elastic/kubernetes/pod_template.hpp"
#include "elastic/kubernetes/pod_watch.hpp"
#include "elastic/kubernetes/request_pool.hpp"

#include <cohort/error.hpp>
#include <cohort/kubernetes.hpp>

#include <fmt/format.h>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <csignal>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

namespace cohort {

namespace json = boost::json;
using Clock = std::chrono::steady_clock;

namespace k8s {

inline std::string str(const json::object& o, const char* section, const char* key) {
    const json::value* s = o.if_contains(section);
    const json::value* v = s && s->is_object() ? s->as_object().if_contains(key) : nullptr;
    return v && v->is_string() ? std::string(v->as_string()) : std::string();
}

struct CreateResult {
    std::string id;
    std::string pod;
    Clock::time_point answered;
    long status = 0;
    std::string uid;
    std::string message;
    bool deleted = false;  // stopped meanwhile, and deleted already
};

}  // namespace k8s

struct KubernetesScheduler::Impl {
    KubernetesOptions options;
    WorkerFactory factory;
    k8s::ApiClient api;
    k8s::PodTemplate pod_template;
    k8s::Owner owner;
    std::string pods_path;

    struct Worker {
        std::string pod;
        std::string uid;  // empty while its create is in flight
        Clock::time_point created;
        Clock::time_point answered;  // when its create was answered
        bool scheduled = false;
        std::string node;
    };
    std::map<std::string, Worker, std::less<>> workers;  // running: not yet reported ended
    std::map<std::string, std::string> pod_to_id;        // the current pods of `workers`
    std::map<std::string, int> launches;                 // per worker id, for pod names
    std::map<std::string, std::string> seen_rv;          // uid -> the last resourceVersion handled
    std::map<std::string, json::object> live;            // uid -> last object, pods not yet gone
    std::set<std::string> done;                          // uids whose worker's end was handled
    std::set<std::string> abandoned;                     // pods stopped before their create answered (results_mu)
    std::vector<k8s::PodChange> held;                    // changes for pods whose create has not answered
    std::vector<WorkerExit> exits;
    std::vector<ScalingEvent> capacity_events;
    std::map<std::string, json::object> label_patches;  // pod -> labels to set once its create answers
    std::set<std::string> placeholders;                 // pods standing in for workers given up
    int next_placeholder = 0;

    std::mutex results_mu;
    std::vector<k8s::CreateResult> results;
    int creates_in_flight = 0;

    // Declared last: destroyed first, so their threads end before the state above.
    std::unique_ptr<k8s::RequestPool> pool;
    std::unique_ptr<k8s::PodWatch> watch;

    Impl(KubernetesOptions o, WorkerFactory f)
        : options(std::move(o)),
          factory(std::move(f)),
          api(options.cluster, options.request_timeout),
          pod_template(options.pod_template, options.image),
          pods_path("/api/v1/namespaces/" + k8s::query_escape(options.cluster.ns) + "/pods") {}

    std::string selector() const { return std::string(k8s::job_label) + "=" + k8s::dns_name(options.job); }

    void delete_pod(const std::string& pod, std::chrono::milliseconds grace);
    void patch_labels(const std::string& pod, const json::object& labels);
    void report(const std::string& id, WorkerExit exit);

    // Stops a running worker: its pod is deleted, its end reported now.
    void stop(const std::string& id, std::chrono::milliseconds grace, const std::string& why);
    void launch(const WorkerSpec& spec);
    WorkerSpec make(const PlanStep& step);
    void take_results();

    // One change of one pod; returns false when it must wait for its create's answer.
    bool handle(const json::object& pod, bool deleted);

    // The worker's end, reported once; its pod is deleted if still there.
    void end(const std::string& id, WorkerExit exit, bool delete_it);

    // A pod of the given-up worker's shape (its resources, affinity,
    // tolerations) that runs nothing: it waits in the scheduler's queue,
    // and when the cluster places it there is room for a worker again.
    void add_placeholder(const std::string& id);
    void on_placeholder(const std::string& name, const json::object& pod, bool deleted);
    void give_up(const std::string& id, ExitCause cause, const std::string& why);
    void take_changes();
    void check_pending();
};

}  // namespace cohort
