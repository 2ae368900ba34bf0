// KubernetesScheduler's requests: creating, deleting and labelling pods on
// the request pool, and taking the creates' answers back on poll().
#include "elastic/kubernetes/scheduler_impl.hpp"

#include <cohort/error.hpp>

#include <fmt/format.h>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <csignal>

namespace cohort {

using k8s::CreateResult;
using k8s::str;

void KubernetesScheduler::Impl::delete_pod(const std::string& pod, std::chrono::milliseconds grace) {
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

void KubernetesScheduler::Impl::patch_labels(const std::string& pod, const json::object& labels) {
    const std::string body = json::serialize(json::object{{"metadata", json::object{{"labels", labels}}}});
    pool->submit(
        [this, pod, body] { api.request("PATCH", pods_path + "/" + pod, body, "application/merge-patch+json"); });
}

void KubernetesScheduler::Impl::report(const std::string& id, WorkerExit exit) {
    exit.id = id;
    exits.push_back(std::move(exit));
}

void KubernetesScheduler::Impl::stop(const std::string& id, std::chrono::milliseconds grace, const std::string& why) {
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

void KubernetesScheduler::Impl::launch(const WorkerSpec& spec) {
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

WorkerSpec KubernetesScheduler::Impl::make(const PlanStep& step) {
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

void KubernetesScheduler::Impl::take_results() {
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

}  // namespace cohort
