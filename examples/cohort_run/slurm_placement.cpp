// cohort-run --scheduler slurm: the launcher runs once, on the first node
// of an allocation, and its worker places are --nproc-per-node on each of
// the allocation's nodes, started as job steps by a SlurmScheduler. The
// rest of the launcher (rounds, policy, relaunches) is the same as with
// local workers; only where a place's worker runs differs.
#include "launcher.hpp"

#include <cohort/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

namespace cohort_run {

void Launcher::make_slurm_slots() {
    slurm_options_ = cohort::SlurmOptions::from_env();
    slurm_options_->workers_per_node = o_.nproc_per_node;
    slurm_options_->srun_args = o_.srun_args;
    slurm_options_->grace = std::chrono::milliseconds(static_cast<int64_t>(o_.grace * 1000));
    const int nodes = static_cast<int>(slurm_options_->nodes.size());
    // One launcher spans the whole allocation.
    o_.nnodes_min = o_.nnodes_max = nodes;
    for (const std::string& node : slurm_options_->nodes) {
        for (int r = 0; r < o_.nproc_per_node; ++r) {
            Slot slot;
            slot.local_rank = r;
            slot.node = node;
            slot.place = place_name(node, o_.role, r);
            slot.worker = slot.place;
            slots_.push_back(std::move(slot));
        }
    }
}

void Launcher::make_slurm_scheduler() {
    auto slurm = std::make_unique<cohort::SlurmScheduler>(
        [this](const cohort::PlanStep& step) { return make_worker(step); }, *slurm_options_);
    slurm_ = slurm.get();
    scheduler_ = std::move(slurm);
}

// The first IPv4 address of an interface that is up and not loopback: the
// address other nodes reach this one at, without a name service.
std::string Launcher::slurm_url_host() const {
    if (!o_.master_addr.empty()) return o_.master_addr;
    ifaddrs* all = nullptr;
    if (::getifaddrs(&all) != 0) return "127.0.0.1";
    std::string out;
    for (const ifaddrs* a = all; a != nullptr && out.empty(); a = a->ifa_next) {
        if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
        if ((a->ifa_flags & IFF_UP) == 0 || (a->ifa_flags & IFF_LOOPBACK) != 0) continue;
        char text[INET_ADDRSTRLEN] = {};
        const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
        if (::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) != nullptr) out = text;
    }
    ::freeifaddrs(all);
    return out.empty() ? "127.0.0.1" : out;
}

// The allocation's nodes that are not lost, each with the places its
// running workers leave free: the policy places relaunches among them.
cohort::ClusterView Launcher::slurm_cluster() const {
    cohort::ClusterView view;
    std::map<std::string, int> used;
    for (const Slot& s : slots_) {
        if (!s.running) continue;
        const std::string node = slurm_->node_of(s.worker).empty() ? s.node : slurm_->node_of(s.worker);
        view.nodes.push_back({s.worker, node, {}});
        ++used[node];
    }
    const std::vector<std::string> lost = slurm_->lost_nodes();
    for (const std::string& node : slurm_options_->nodes) {
        if (std::find(lost.begin(), lost.end(), node) != lost.end()) continue;
        view.hosts.push_back({node, std::max(0, o_.nproc_per_node - used[node])});
    }
    return view;
}

// A place whose node was lost (a group restart after it) starts on a node
// with room, so that its worker's COHORT_HOST is where it runs.
void Launcher::move_off_lost_node(Slot& slot) const {
    const std::vector<std::string> lost = slurm_->lost_nodes();
    if (std::find(lost.begin(), lost.end(), slot.node) == lost.end()) return;
    for (const cohort::HostInfo& host : slurm_cluster().hosts) {
        if (host.free_slots > 0) {
            slot.node = host.name;
            return;
        }
    }
}

}  // namespace cohort_run
