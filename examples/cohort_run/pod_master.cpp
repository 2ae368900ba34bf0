// MASTER_ADDR for workers in pods. Rank 0's address is its pod's IP, which
// exists only once the pod does (the cluster picks it when it makes the
// pod's sandbox). So rank 0's launcher starts that pod first, with
// MASTER_ADDR=$(COHORT_POD_IP) (the kubelet expands it from the downward
// API: rank 0 listens on its own IP), reads the IP from the API, and
// publishes it in the coordinator's store like any rank 0's address; the
// other pods, of this launcher and of the others, start with it.
// MASTER_PORT is --k8s-master-port: each pod has its own network
// namespace, so a fixed port is free there.
#include "launcher.hpp"
#include "signals.hpp"

#include <cohort/error.hpp>
#include <cohort/kubernetes.hpp>

#include <algorithm>
#include <chrono>
#include <thread>

#include <fmt/format.h>

namespace cohort_run {

using cohort::Errc;
using cohort::Error;

cohort::KubernetesScheduler* Launcher::pods() const {
    return dynamic_cast<cohort::KubernetesScheduler*>(scheduler_.get());
}

std::optional<MasterAddress> Launcher::start_rank0_pod(Slot& rank0, uint64_t generation, double deadline) {
    cohort::KubernetesScheduler* k = pods();
    if (!rank0.running) {
        // Its own address, expanded by the kubelet.
        master_ = MasterAddress{"$(COHORT_POD_IP)", o_.k8s_master_port};
        launch_slot(rank0);
        master_.reset();
    }
    // Scheduling may take up to --pending-timeout, the world's wait notwithstanding.
    const double started = log_.now();
    const double until = std::max(deadline, started + o_.pending_timeout);
    double next_beat = 0;
    while (log_.now() < until) {
        if (const int sig = signals::take()) throw signals::Stop{sig};
        if (log_.now() >= next_beat) {
            for (Slot& s : slots_) {
                cohort::HeartbeatReply r;
                const Beat b = beat(s, generation, &r);
                if (b == Beat::unanswered) continue;  // the coordinator away for a moment: ask again
                if (b == Beat::gone || r.rendezvous || r.generation != generation) return std::nullopt;
            }
            next_beat = log_.now() + std::min(0.25, o_.heartbeat_interval / 2);
        }
        if (std::string ip = k->pod_ip(rank0.worker); !ip.empty()) return MasterAddress{ip, o_.k8s_master_port};
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    throw Error(Errc::timeout,
                fmt::format("job '{}': rank 0's pod {} has no IP after {:g} s (still Pending? kubectl describe pod "
                            "{}); the other workers need it as MASTER_ADDR",
                            o_.job, k->pod_name(rank0.worker), until - started, k->pod_name(rank0.worker)));
}

}  // namespace cohort_run
