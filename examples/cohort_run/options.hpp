// cohort-run's command line: how many workers, where the coordinator is,
// the job's settings and the policy, and the program to run.
#pragma once

#include "role_spec.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cohort_run {

// What a worker's failure does to the others (--restart).
enum class RestartMode {
    survivors,  // cohort's default: the survivors go on, the failed worker is relaunched into a new round
    all,        // torchrun's: every worker of the job stops and the group starts again in a new world
};

// Where the workers run (--scheduler).
enum class SchedulerKind {
    local,       // processes on this machine
    slurm,       // job steps on the nodes of this Slurm allocation, --nproc-per-node on each
    kubernetes,  // pods of a Kubernetes cluster
};

struct Options {
    int nproc_per_node = 1;
    int nnodes_min = 1, nnodes_max = 1;
    int min_workers = 1;
    bool standalone = false;
    uint16_t port = 0;
    std::string host = "127.0.0.1";  // the standalone coordinator's address
    std::string data_dir;
    // --tls-cert, --tls-key, --tls-client-ca: the standalone coordinator
    // serves HTTPS (clients find its CA in COHORT_COORDINATOR_CACERT).
    std::string tls_cert, tls_key, tls_client_ca;
    std::string coordinator;  // "HOST:PORT" or "http://HOST:PORT"
    std::string job = "cohort";
    std::string node_id;  // default: the host name
    int max_restarts = 3;
    RestartMode restart = RestartMode::survivors;
    std::string master_addr;  // --master-addr; empty: the address on the route to the coordinator
    std::string rules;  // empty: the shipped pack
    double last_call = 3, heartbeat_interval = 1, failure_timeout = 5;
    std::optional<double> straggler_threshold, straggler_for, hang_timeout;
    std::string checkpoint_dir;  // empty: a temporary one
    double grace = 10;
    double relaunch_delay = 1;
    std::optional<int> kill_rank;  // --kill-worker LOCAL_RANK@SECONDS
    double kill_after = 0;
    double progress = 2;
    std::string events_file;
    bool quiet = false;
    SchedulerKind scheduler = SchedulerKind::local;
    bool host_given = false;             // --host was on the command line
    std::vector<std::string> srun_args;  // --srun-arg, for --scheduler slurm
    std::string k8s_kubeconfig, k8s_context, k8s_namespace, k8s_pod_template, k8s_image, k8s_owner_pod;
    double pending_timeout = 300;
    uint16_t k8s_master_port = 29500;  // MASTER_PORT in pods (torch's default; each pod has its own ports)
    std::string worker_coordinator;  // the coordinator's URL as workers see it; empty: the launcher's
    std::vector<std::string> program;
    // --role (role_spec.hpp): this launcher's workers' role ("": the
    // default), or, with two or more, the roles of a group, each run by a
    // launcher of its own (role_group.hpp).
    std::string role;
    std::vector<RoleSpec> roles;
    std::string kill_role;  // --kill-worker ROLE:R@S: the role whose worker R is killed
    // Set by a group's launcher for each role's: append to --events, no
    // status row, the role on every line.
    bool role_group_child = false;
    // The flags each role's launcher of a group gets as they were given:
    // all but those the group decides per role or for itself.
    std::vector<std::string> forward;
};

// Throws cohort::Error(invalid_argument) naming the flag. Returns nullopt
// when --help or --version was printed.
std::optional<Options> parse(int argc, char** argv);

}  // namespace cohort_run
