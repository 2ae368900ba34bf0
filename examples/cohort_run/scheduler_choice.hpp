// Which scheduler starts cohort-run's workers (--scheduler): processes on
// this machine, or pods of a Kubernetes cluster, with the cluster found
// from the flags, $KUBECONFIG, the pod's service account or ~/.kube/config.
#pragma once

#include "options.hpp"

#include <cohort/kubernetes.hpp>
#include <cohort/scheduler.hpp>

#include <memory>
#include <string>

namespace cohort_run {

// Throws cohort::Error naming the flag or file that is wrong.
std::unique_ptr<cohort::Scheduler> make_scheduler(const Options& options, cohort::WorkerFactory factory);

// The cluster for --scheduler kubernetes: --k8s-kubeconfig, else
// $KUBECONFIG, else the service account when inside a pod, else
// ~/.kube/config; --k8s-namespace overrides the namespace found.
cohort::KubernetesCluster kubernetes_cluster(const Options& options);

}  // namespace cohort_run
