// Workers as pods of a Kubernetes cluster. KubernetesScheduler creates one
// pod per worker from a pod template, learns how pods end from a list and
// watch of the job's pods, classifies the endings (OOMKilled, evicted,
// preempted, node lost, stuck Pending, image pull errors) and deletes pods
// to stop workers. docs/schedulers.md describes the configuration, the
// template merge, the events and the manifests.
#pragma once

#include <cohort/scheduler.hpp>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace cohort {

// Where the API server is and how to authenticate to it.
struct KubernetesCluster {
    std::string server;    // https://HOST:PORT (or http:// for a test server)
    std::string ns;        // the namespace the pods live in
    std::string token;     // bearer token; empty: none (client certificate, or none at all)
    // Where the token came from (a service account's, a kubeconfig's
    // tokenFile): read again once a minute, as client-go does, since the
    // kubelet rotates service-account tokens. Empty: `token` as it is.
    std::filesystem::path token_file;
    std::string ca_pem;    // the cluster's CA certificates (PEM); empty: the system's
    std::string cert_pem;  // client certificate and key (PEM), when the kubeconfig gives them
    std::string key_pem;   // (kept in memory and handed to libcurl as blobs, never written out)
    bool insecure_skip_tls_verify = false;
    std::string origin;  // where this came from ("kubeconfig '/f', context 'c'"), for messages
};

// The service account's files: token, ca.crt and namespace under `dir`,
// and the server from KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT.
// Throws Error(not_found) naming what is missing, Error(invalid_argument)
// for a ca.crt that holds no certificate.
COHORT_API KubernetesCluster
in_cluster_config(const std::filesystem::path& dir = "/var/run/secrets/kubernetes.io/serviceaccount");
// A kubeconfig file: the named context, or its current-context. Reads
// server, certificate-authority(-data), insecure-skip-tls-verify, token or
// tokenFile, client-certificate(-data) and client-key(-data), and the
// context's namespace ("default" when it has none). Certificates and keys
// are checked as they are read (a key that is not the certificate's, a
// -data field that is not base64 of a PEM). Throws Error(invalid_argument)
// or Error(not_found) naming the file, the cluster or user, and the field.
COHORT_API KubernetesCluster kubeconfig_config(const std::filesystem::path& file, const std::string& context = {});

struct KubernetesOptions {
    KubernetesCluster cluster;
    // A Pod manifest or a bare pod spec, YAML or JSON; the first container
    // runs the worker. Empty: a pod with one container named "worker" and
    // `image` below.
    std::filesystem::path pod_template;
    std::string image;           // used when the template has none
    std::string job = "cohort";  // pods carry the label cohort.dev/job=<job>
    // The pods' ownerReference (usually the launcher's own pod, so that
    // deleting it deletes the workers). With only owner_pod set, the
    // scheduler reads the pod's uid from the API.
    std::string owner_pod;
    std::string owner_uid;
    // A pod Pending longer than this (Unschedulable, or waiting for an image
    // past it) is deleted and reported as not started (pending_timeout).
    std::chrono::milliseconds pending_timeout{std::chrono::minutes(5)};
    // A worker given up for pending_timeout leaves a placeholder pod of its
    // shape running this image (nothing); when the cluster schedules the
    // placeholder, capacity() reports room for a worker and the placeholder
    // is deleted. Empty: no placeholders, and no capacity events.
    std::string placeholder_image = "registry.k8s.io/pause:3.9";
    std::chrono::milliseconds grace{10000};  // deleteOptions' gracePeriodSeconds
    int max_concurrent_requests = 16;        // creates and deletes in flight at once
    double requests_per_second = 50;         // token bucket: sustained rate ...
    int burst = 32;                          // ... and burst
    std::chrono::milliseconds request_timeout{10000};
};

// Pod names are <job>-<worker id>-<n>, lowered and with characters a name
// cannot hold replaced by '-'; n counts the worker's launches. The cluster
// places pods: steps' hosts and plans' avoid_hosts are not applied. Not
// thread-safe (one thread calls it), but its requests and its watch run on
// threads of its own, so execute() returns before the pods exist.
class COHORT_API KubernetesScheduler final : public Scheduler {
public:
    KubernetesScheduler(KubernetesOptions options, WorkerFactory factory);
    ~KubernetesScheduler() override;  // deletes every pod it still has
    KubernetesScheduler(const KubernetesScheduler&) = delete;
    KubernetesScheduler& operator=(const KubernetesScheduler&) = delete;

    std::string name() const override;
    void execute(const ScalingPlan& plan) override;
    std::vector<WorkerExit> poll() override;
    std::vector<std::string> running() const override;
    // Kubernetes cannot signal a pod: SIGTERM, SIGINT and SIGKILL delete
    // every pod (SIGKILL with no grace); other signals are ignored.
    void signal_all(int signal) override;
    void stop_all(std::chrono::milliseconds grace) override;
    std::vector<ScalingEvent> capacity() override;

    // Starts one worker's pod (the job's first ones); its creation is
    // reported by poll() only if it fails.
    void launch(const WorkerSpec& spec);
    // The pod that runs the worker now, or empty.
    std::string pod_name(std::string_view id) const;
    // The IP address of the worker's pod (status.podIP, read from the API
    // now), or empty while the pod has none yet (not scheduled, sandbox not
    // made) or the API does not answer. Each pod's first container also has
    // its IP as $COHORT_POD_IP (downward API), listed before the worker's
    // variables, so that a variable's value may say $(COHORT_POD_IP).
    std::string pod_ip(std::string_view id) const;
    // Sets labels on the worker's pod (a merge patch; an empty value removes
    // the label), e.g. its rank for kubectl get -l. Sent in the background;
    // a pod whose create has not been answered yet is patched once it is.
    // Throws Error(not_found) for a worker that is not running and
    // Error(invalid_argument) for a cohort.dev/ label (the scheduler's own).
    void set_labels(std::string_view id, const std::map<std::string, std::string>& labels);

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace cohort
