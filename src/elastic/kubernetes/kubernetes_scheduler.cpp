// KubernetesScheduler: workers as pods. The launcher's thread calls it;
// creates and deletes run on the request pool, and the pod watch on its own
// thread. poll() is where their results meet: create results first (so a
// pod's uid is known), then the watch's changes, deduplicated by uid and
// resourceVersion, each worker's end reported once.
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
#include <set>
#include <thread>

namespace cohort {

namespace json = boost::json;
using Clock = std::chrono::steady_clock;

namespace {

std::string str(const json::object& o, const char* section, const char* key) {
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

}  // namespace

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
    std::vector<CreateResult> results;
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

    void delete_pod(const std::string& pod, std::chrono::milliseconds grace) {
        const std::string body = fmt::format(
            R"({{"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":{},"propagationPolicy":"Background"}})",
            std::chrono::duration_cast<std::chrono::seconds>(grace).count());
        pool->submit([this, pod, body] {
            // 404: already gone. Anything else is retried once; a pod left
            // behind still carries the job's label for kubectl delete -l.
            for (int attempt = 0; attempt < 2; ++attempt) {
                const k8s::ApiReply r = api.request("DELETE", pods_path + "/" + pod, body);
                if (r.status == 200 || r.status == 202 || r.status == 404) return;
            }
        });
    }

    void patch_labels(const std::string& pod, const json::object& labels) {
        const std::string body = json::serialize(json::object{{"metadata", json::object{{"labels", labels}}}});
        pool->submit(
            [this, pod, body] { api.request("PATCH", pods_path + "/" + pod, body, "application/merge-patch+json"); });
    }

    void report(const std::string& id, WorkerExit exit) {
        exit.id = id;
        exits.push_back(std::move(exit));
    }

    // Stops a running worker: its pod is deleted, its end reported now.
    void stop(const std::string& id, std::chrono::milliseconds grace, const std::string& why) {
        const auto it = workers.find(id);
        if (it == workers.end()) return;
        Worker& w = it->second;
        if (w.uid.empty()) {
            std::lock_guard lock(results_mu);
            abandoned.insert(w.pod);  // deleted as soon as its create answers
        } else {
            done.insert(w.uid);
            delete_pod(w.pod, grace);
        }
        WorkerExit exit;
        exit.kind = ExitKind::signaled;
        exit.signal = SIGTERM;
        exit.stopped = true;
        exit.host = w.node;
        exit.message = fmt::format("stopped by the scheduler: pod {} deleted ({})", w.pod, why);
        pod_to_id.erase(w.pod);
        workers.erase(it);
        report(id, std::move(exit));
    }

    void launch(const WorkerSpec& spec) {
        if (spec.id.empty()) throw Error(Errc::invalid_argument, "KubernetesScheduler::launch: the worker has no id");
        if (workers.contains(spec.id))
            throw Error(Errc::invalid_argument,
                        fmt::format("KubernetesScheduler::launch: worker '{}' is already running (pod {}); stop it "
                                    "first or give the new worker another id",
                                    spec.id, workers.at(spec.id).pod));
        const int n = launches[spec.id]++;
        // <job>-<id>-<n> within the 63 characters a label-safe name may have.
        const std::string suffix = "-" + std::to_string(n);
        std::string name = k8s::dns_name(options.job, 20) + "-" + k8s::dns_name(spec.id, 63 - 21 - suffix.size());
        name += suffix;
        json::object pod = pod_template.make(name, options.cluster.ns, options.job, spec, owner);
        workers[spec.id] = Worker{name, {}, Clock::now(), {}, false, {}};
        pod_to_id[name] = spec.id;
        ++creates_in_flight;
        pool->submit(
            [this, id = spec.id, name, body = json::serialize(pod)] {
                const k8s::ApiReply r = api.request("POST", pods_path, body);
                CreateResult result{id, name, Clock::now(), r.status, {}, {}, false};
                json::error_code ec;
                const json::value v = r.status == 201 || r.status == 200 ? json::parse(r.body, ec) : json::value();
                if (!ec && v.is_object()) result.uid = str(v.as_object(), "metadata", "uid");
                if (result.uid.empty()) {
                    result.message = r.status == 409 ? fmt::format(
                                                           "pod {} already exists (a pod of an earlier run? "
                                                           "kubectl delete pod {})",
                                                           name, name)
                                                     : k8s::describe(r);
                }
                std::lock_guard lock(results_mu);
                // Stopped while this create was out: delete it now, without
                // waiting for the launcher's next poll().
                if (!result.uid.empty() && abandoned.contains(name)) {
                    delete_pod(name, options.grace);
                    result.deleted = true;
                }
                results.push_back(std::move(result));
            },
            /*urgent=*/true);
    }

    WorkerSpec make(const PlanStep& step) {
        WorkerSpec spec = factory(step);
        if (spec.id.empty()) {
            if (step.node.empty())
                throw Error(Errc::invalid_argument,
                            "KubernetesScheduler: the worker factory returned a WorkerSpec with no id for a launch "
                            "step; a new worker's id is the factory's to choose");
            spec.id = step.node;
        }
        return spec;
    }

    void take_results() {
        std::vector<CreateResult> got;
        {
            std::lock_guard lock(results_mu);
            got.swap(results);
        }
        for (CreateResult& r : got) {
            --creates_in_flight;
            bool was_abandoned = false;
            {
                std::lock_guard lock(results_mu);
                was_abandoned = abandoned.erase(r.pod) > 0;
            }
            if (was_abandoned) {
                if (!r.uid.empty()) done.insert(r.uid);
                if (!r.uid.empty() && !r.deleted) delete_pod(r.pod, options.grace);
                continue;
            }
            const auto it = workers.find(r.id);
            if (it == workers.end() || it->second.pod != r.pod) continue;
            if (r.uid.empty()) {
                WorkerExit exit;
                exit.kind = ExitKind::not_started;
                exit.exit_code = -1;
                exit.cause = ExitCause::api_error;
                exit.message = fmt::format("cannot create pod {}: {}", r.pod, r.message);
                pod_to_id.erase(r.pod);
                workers.erase(it);
                report(r.id, std::move(exit));
                continue;
            }
            it->second.uid = r.uid;
            it->second.answered = r.answered;
            if (auto p = label_patches.find(r.pod); p != label_patches.end()) {
                patch_labels(r.pod, p->second);
                label_patches.erase(p);
            }
        }
    }

    // One change of one pod; returns false when it must wait for its create's answer.
    bool handle(const json::object& pod, bool deleted) {
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

    // The worker's end, reported once; its pod is deleted if still there.
    void end(const std::string& id, WorkerExit exit, bool delete_it) {
        Worker& w = workers.at(id);
        done.insert(w.uid);
        if (delete_it) delete_pod(w.pod, std::chrono::milliseconds(0));
        pod_to_id.erase(w.pod);
        workers.erase(id);
        report(id, std::move(exit));
    }

    // A pod of the given-up worker's shape (its resources, affinity,
    // tolerations) that runs nothing: it waits in the scheduler's queue,
    // and when the cluster places it there is room for a worker again.
    void add_placeholder(const std::string& id) {
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

    void on_placeholder(const std::string& name, const json::object& pod, bool deleted) {
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

    void give_up(const std::string& id, ExitCause cause, const std::string& why) {
        WorkerExit exit;
        exit.kind = ExitKind::not_started;
        exit.exit_code = -1;
        exit.cause = cause;
        exit.host = workers.at(id).node;
        exit.message = fmt::format("pod {} never started: {}", workers.at(id).pod, why);
        end(id, std::move(exit), true);
    }

    void take_changes() {
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
                    vanished.push_back(json::object{
                        {"metadata", json::object{{"name", w.pod}, {"uid", w.uid}, {"resourceVersion", ""}}}});
                }
                for (const json::object& pod : vanished) handle(pod, true);
                continue;
            }
            if (!handle(c.pod, c.type == k8s::PodChange::deleted)) held.push_back(std::move(c));
        }
        if (creates_in_flight == 0) held.clear();
    }

    void check_pending() {
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
};

KubernetesScheduler::KubernetesScheduler(KubernetesOptions options, WorkerFactory factory) {
    if (!factory) throw Error(Errc::invalid_argument, "KubernetesScheduler: the worker factory is empty");
    if (options.cluster.ns.empty()) options.cluster.ns = "default";
    if (options.pending_timeout.count() <= 0)
        throw Error(Errc::invalid_argument, "KubernetesScheduler: pending_timeout must be positive");
    impl_ = std::make_unique<Impl>(std::move(options), std::move(factory));
    Impl& impl = *impl_;
    impl.owner.name = impl.options.owner_pod;
    impl.owner.uid = impl.options.owner_uid;
    if (!impl.owner.name.empty() && impl.owner.uid.empty()) {
        const k8s::ApiReply r = impl.api.request("GET", impl.pods_path + "/" + impl.owner.name);
        json::error_code ec;
        const json::value v = r.status == 200 ? json::parse(r.body, ec) : json::value();
        if (!ec && v.is_object()) impl.owner.uid = str(v.as_object(), "metadata", "uid");
        if (impl.owner.uid.empty())
            throw Error(Errc::not_found, fmt::format("KubernetesScheduler: cannot read the owner pod {} in namespace "
                                                     "{}: {} (its uid becomes the workers' ownerReference)",
                                                     impl.owner.name, impl.options.cluster.ns, k8s::describe(r)));
    }
    impl.pool = std::make_unique<k8s::RequestPool>(impl.options.max_concurrent_requests,
                                                   impl.options.requests_per_second, impl.options.burst);
    impl.watch = std::make_unique<k8s::PodWatch>(impl.api, impl.selector());
    // Pods created from now on are covered by the watch that follows the
    // first list. A server that does not answer yet is not fatal: the
    // watch goes on trying and the creates report their own failures.
    impl.watch->wait_synced(Clock::now() + impl.options.request_timeout);
}

KubernetesScheduler::~KubernetesScheduler() {
    try {
        stop_all(impl_->options.grace);
    } catch (...) {
        // Nothing to report to; the pods keep the job's label for kubectl delete -l.
    }
}

std::string KubernetesScheduler::name() const {
    return "kubernetes";
}

void KubernetesScheduler::launch(const WorkerSpec& spec) {
    impl_->launch(spec);
}

std::string KubernetesScheduler::pod_name(std::string_view id) const {
    const auto it = impl_->workers.find(id);
    return it == impl_->workers.end() ? std::string() : it->second.pod;
}

void KubernetesScheduler::set_labels(std::string_view id, const std::map<std::string, std::string>& labels) {
    Impl& impl = *impl_;
    const auto it = impl.workers.find(id);
    if (it == impl.workers.end())
        throw Error(Errc::not_found, fmt::format("KubernetesScheduler::set_labels: worker '{}' is not running", id));
    json::object patch;
    for (const auto& [key, value] : labels) {
        if (key.rfind("cohort.dev/", 0) == 0)
            throw Error(Errc::invalid_argument,
                        fmt::format("KubernetesScheduler::set_labels: label '{}' is the scheduler's own; use a key "
                                    "outside cohort.dev/",
                                    key));
        if (value.empty()) {
            patch[key] = nullptr;
        } else {
            patch[key] = value;
        }
    }
    if (it->second.uid.empty()) {
        json::object& pending = impl.label_patches[it->second.pod];
        for (auto& [key, value] : patch) pending[key] = value;
        return;
    }
    impl.patch_labels(it->second.pod, patch);
}

void KubernetesScheduler::execute(const ScalingPlan& plan) {
    Impl& impl = *impl_;
    for (const PlanStep& step : plan.steps) {
        switch (step.kind) {
            case StepKind::launch:
                impl.launch(impl.make(step));
                break;
            case StepKind::remove:
                impl.stop(step.node, impl.options.grace, step.reason);
                break;
            case StepKind::relaunch:
                // The new pod has a name of its own: no wait for the old one to go.
                impl.stop(step.node, impl.options.grace, step.reason);
                impl.launch(impl.make(step));
                break;
            case StepKind::restart_all: {
                const std::vector<std::string> ids = running();
                for (const std::string& id : ids) impl.stop(id, impl.options.grace, step.reason);
                for (const std::string& id : ids) {
                    PlanStep one = step;
                    one.kind = StepKind::relaunch;
                    one.node = id;
                    impl.launch(impl.make(one));
                }
                break;
            }
        }
    }
}

std::vector<WorkerExit> KubernetesScheduler::poll() {
    Impl& impl = *impl_;
    impl.take_results();
    impl.take_changes();
    impl.check_pending();
    return std::exchange(impl.exits, {});
}

std::vector<std::string> KubernetesScheduler::running() const {
    std::vector<std::string> out;
    for (const auto& [id, w] : impl_->workers) out.push_back(id);
    return out;
}

void KubernetesScheduler::signal_all(int signal) {
    if (signal != SIGTERM && signal != SIGINT && signal != SIGKILL) return;
    const auto grace = signal == SIGKILL ? std::chrono::milliseconds(0) : impl_->options.grace;
    for (const std::string& id : running()) impl_->stop(id, grace, fmt::format("signal {}", signal));
}

void KubernetesScheduler::stop_all(std::chrono::milliseconds grace) {
    Impl& impl = *impl_;
    for (const std::string& id : running()) impl.stop(id, grace, "stop_all");
    for (const std::string& pod : std::exchange(impl.placeholders, {}))
        impl.delete_pod(pod, std::chrono::milliseconds(0));
    // Creates still in flight are deleted as they answer.
    const auto until = Clock::now() + impl.options.request_timeout * 2;
    while (impl.creates_in_flight > 0 && Clock::now() < until) {
        impl.take_results();
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    impl.pool->wait_idle(Clock::now() + impl.options.request_timeout * 2);
}

std::vector<ScalingEvent> KubernetesScheduler::capacity() {
    return std::exchange(impl_->capacity_events, {});
}

}  // namespace cohort
