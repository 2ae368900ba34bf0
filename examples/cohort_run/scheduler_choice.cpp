#include "scheduler_choice.hpp"

#include <cohort/error.hpp>

#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

namespace cohort_run {

cohort::KubernetesCluster kubernetes_cluster(const Options& o) {
    cohort::KubernetesCluster cluster;
    std::string kubeconfig = o.k8s_kubeconfig;
    if (kubeconfig.empty()) {
        if (const char* env = std::getenv("KUBECONFIG"); env != nullptr && *env != '\0') {
            kubeconfig = env;
            // kubectl merges a list; the first file is the one cohort reads.
            if (const auto colon = kubeconfig.find(':'); colon != std::string::npos) kubeconfig.resize(colon);
        }
    }
    const char* in_pod = std::getenv("KUBERNETES_SERVICE_HOST");
    if (kubeconfig.empty() && (in_pod == nullptr || *in_pod == '\0')) {
        const char* home = std::getenv("HOME");
        if (home != nullptr && std::filesystem::exists(std::filesystem::path(home) / ".kube" / "config"))
            kubeconfig = (std::filesystem::path(home) / ".kube" / "config").string();
    }
    if (!kubeconfig.empty()) {
        cluster = cohort::kubeconfig_config(kubeconfig, o.k8s_context);
    } else if (in_pod != nullptr && *in_pod != '\0') {
        cluster = cohort::in_cluster_config();
    } else {
        throw cohort::Error(cohort::Errc::not_found,
                            "--scheduler kubernetes: no cluster: give --k8s-kubeconfig FILE, set KUBECONFIG, or run "
                            "cohort-run in a pod with a service account");
    }
    if (!o.k8s_namespace.empty()) cluster.ns = o.k8s_namespace;
    return cluster;
}

std::unique_ptr<cohort::Scheduler> make_scheduler(const Options& o, cohort::WorkerFactory factory) {
    const auto grace = std::chrono::milliseconds(static_cast<int64_t>(o.grace * 1000));
    if (o.scheduler == SchedulerKind::local) return std::make_unique<cohort::LocalScheduler>(std::move(factory), grace);
    cohort::KubernetesOptions k;
    k.cluster = kubernetes_cluster(o);
    k.pod_template = o.k8s_pod_template;
    k.image = o.k8s_image;
    k.job = o.job;
    k.owner_pod = o.k8s_owner_pod;
    k.pending_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.pending_timeout * 1000));
    k.grace = grace;
    return std::make_unique<cohort::KubernetesScheduler>(std::move(k), std::move(factory));
}

}  // namespace cohort_run
