// Where a SlurmScheduler runs: the allocation Slurm gave the batch script.
#include "elastic/slurm/hostlist.hpp"

#include <cohort/error.hpp>
#include <cohort/slurm_scheduler.hpp>

#include <cstdlib>

namespace cohort {

std::vector<std::string> expand_slurm_hostlist(std::string_view list) {
    return detail::expand_hostlist(list);
}

SlurmOptions SlurmOptions::from_env() {
    SlurmOptions o;
    const char* job = std::getenv("SLURM_JOB_ID");
    const char* nodes = std::getenv("SLURM_JOB_NODELIST");
    if (nodes == nullptr || *nodes == '\0') nodes = std::getenv("SLURM_NODELIST");
    if (job == nullptr || *job == '\0' || nodes == nullptr || *nodes == '\0')
        throw Error(Errc::invalid_argument,
                    "the Slurm scheduler runs inside an allocation, but SLURM_JOB_ID or SLURM_JOB_NODELIST is not "
                    "set: start the launcher from an sbatch script or within salloc (examples/slurm/cohort.sbatch)");
    o.job_id = job;
    try {
        o.nodes = detail::expand_hostlist(nodes);
    } catch (const Error& e) {
        throw Error(Errc::parse, std::string("SLURM_JOB_NODELIST: ") + e.what());
    }
    return o;
}

}  // namespace cohort
