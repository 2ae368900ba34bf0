// Where a process stands in its job, read from the variables its launcher
// set (cohort's own, torchrun's, Open MPI's mpirun or Slurm's srun), and a
// Communicator built from them. docs/launch-env.md lists the variables and
// the precedence.
#pragma once

#include <cohort/communicator.hpp>
#include <cohort/export.hpp>

#include <map>
#include <string>
#include <vector>

namespace cohort {

struct LaunchEnv {
    int rank = 0;
    int world_size = 1;
    // -1 where the launcher does not say (Open MPI never gives a node index;
    // COHORT_LOCAL_* and torchrun's LOCAL_* may be missing).
    int local_rank = -1;
    int local_world_size = -1;
    int node_rank = -1;
    // "tcp://HOST:PORT" or "file:///DIR" from COHORT_STORE, else from
    // MASTER_ADDR and MASTER_PORT; empty when neither is set.
    std::string store_url;
    // "cohort", "torchrun", "openmpi", "slurm", or "none" when no launcher
    // variables were found (then rank 0 of a world of 1).
    std::string source = "none";
    // What was read from which variable, and what was set but ignored, for
    // logs: "rank 2 from OMPI_COMM_WORLD_RANK".
    std::vector<std::string> notes;
};

// Reads the process environment, first source found wins:
//   1. COHORT_RANK, COHORT_WORLD_SIZE (+ COHORT_LOCAL_RANK,
//      COHORT_LOCAL_WORLD_SIZE, COHORT_NODE_RANK)
//   2. torchrun: RANK, WORLD_SIZE (+ LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK)
//   3. Open MPI: OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE
//      (+ OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE)
//   4. Slurm: SLURM_PROCID, SLURM_NTASKS (+ SLURM_LOCALID, SLURM_NODEID,
//      SLURM_NTASKS_PER_NODE or this node's entry of SLURM_TASKS_PER_NODE)
// The store is COHORT_STORE whatever the source, else
// tcp://MASTER_ADDR:MASTER_PORT. An empty variable counts as unset.
// Throws Error(invalid_argument) naming the variable and its value for a
// non-number, a negative or out-of-range value, or half a pair (RANK
// without WORLD_SIZE). Nothing found is not an error: source "none".
COHORT_API LaunchEnv read_launch_env();
// The same from `env` instead of the process environment (for tests and
// for launchers that build a child's environment).
COHORT_API LaunchEnv read_launch_env(const std::map<std::string, std::string>& env);

// A Communicator whose rank, size and store come from read_launch_env(),
// each unless `base` already sets it (rank >= 0, size > 0, store_url or
// store). Throws what read_launch_env throws; Error(not_found) listing the
// variables looked for when no launcher variables are set (and `base` does
// not give both rank and size); Error(invalid_argument) saying to set
// COHORT_STORE (or MASTER_ADDR and MASTER_PORT) when a world of more than
// one rank has no store; then whatever the Communicator constructor throws.
COHORT_API Communicator communicator_from_env(CommOptions base = {});
// The same from an environment already read (env.source says which
// launcher it came from).
COHORT_API Communicator communicator_from_env(CommOptions base, const LaunchEnv& env);

}  // namespace cohort
