// KubernetesScheduler: workers as pods. The launcher's thread calls it;
// creates and deletes run on the request pool, and the pod watch on its own
// thread. poll() is where their results meet: create results first (so a
// pod's uid is known), then the watch's changes, deduplicated by uid and
// resourceVersion, each worker's end reported once.
#include "elastic/kubernetes/scheduler_impl.hpp"

#include <cohort/error.hpp>

#include <fmt/format.h>
#include <boost/json/parse.hpp>

#include <csignal>
#include <thread>

namespace cohort {

using k8s::str;

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
    // watch goes on trying and the creates report their own failures. A
    // server that TLS refuses (a wrong CA, a client certificate missing or
    // refused) is a configuration error that no retry mends: fail now.
    if (!impl.watch->wait_synced(Clock::now() + impl.options.request_timeout)) {
        if (const std::string why = impl.watch->tls_refused(); !why.empty())
            throw Error(Errc::permission_denied,
                        fmt::format("KubernetesScheduler: cannot reach the API server over TLS: {}", why));
    }
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

std::string KubernetesScheduler::pod_ip(std::string_view id) const {
    const std::string pod = pod_name(id);
    if (pod.empty()) return {};
    const k8s::ApiReply r = impl_->api.request("GET", impl_->pods_path + "/" + pod);
    json::error_code ec;
    const json::value v = r.status == 200 ? json::parse(r.body, ec) : json::value();
    return !ec && v.is_object() ? str(v.as_object(), "status", "podIP") : std::string();
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
