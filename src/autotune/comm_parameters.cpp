// The CommTuning fields as tunable parameters, with grids around today's
// defaults (each a factor 2 or 4 apart: the search moves in log steps).
#include <cohort/autotune.hpp>
#include <cohort/communicator.hpp>

#include <algorithm>
#include <set>

namespace cohort {
namespace {

constexpr double K = 1024, M = 1024 * 1024;

TunableParameter field(Communicator& comm, std::string name, std::vector<double> grid, std::size_t CommTuning::*member) {
    const double now = double(comm.tuning().*member);
    if (std::find(grid.begin(), grid.end(), now) == grid.end()) {
        grid.push_back(now);  // the value in force is always a candidate
        std::sort(grid.begin(), grid.end());
    }
    TunableParameter p;
    p.name = std::move(name);
    p.candidates = std::move(grid);
    p.initial = now;
    p.apply = [&comm, member](double v) {
        CommTuning t = comm.tuning();
        t.*member = static_cast<std::size_t>(v);
        comm.set_tuning(t);
    };
    return p;
}

}  // namespace

std::vector<TunableParameter> comm_parameters(Communicator& comm) {
    std::vector<TunableParameter> out;
    out.push_back(field(comm, "fusion_threshold", {256 * K, 1 * M, 4 * M, 16 * M, 64 * M}, &CommTuning::fusion_threshold));
    if (comm.size() == 1) return out;
    bool some_shm = false, all_shm = true;
    for (int r = 0; r < comm.size(); ++r) {
        if (r == comm.rank()) continue;
        const bool shm = comm.transports()[r] == Transport::shared_memory;
        some_shm = some_shm || shm;
        all_shm = all_shm && shm;
    }
    if (!all_shm)
        out.push_back(field(comm, "doubling_max", {4 * K, 16 * K, 64 * K, 256 * K, 1 * M}, &CommTuning::doubling_max));
    const std::set<std::string> hosts(comm.hosts().begin(), comm.hosts().end());
    if (hosts.size() > 1 && hosts.size() < comm.hosts().size())
        out.push_back(field(comm, "hierarchical_min", {0, 256 * K, 4 * M, 64 * M}, &CommTuning::hierarchical_min));
    out.push_back(field(comm, "pipeline_chunk", {32 * K, 64 * K, 128 * K, 256 * K, 512 * K, 1 * M},
                        &CommTuning::pipeline_chunk));
    if (some_shm)
        out.push_back(field(comm, "shm_single_round_max", {8 * K, 16 * K, 32 * K, 64 * K, 128 * K, 256 * K},
                            &CommTuning::shm_single_round_max));
    return out;
}

}  // namespace cohort
