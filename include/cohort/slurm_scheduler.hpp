// Workers as Slurm job steps. Inside an allocation (an sbatch or salloc
// job), SlurmScheduler starts each worker as a one-task step on one node of
// the allocation with srun, learns of its end the moment srun exits, and
// tells a lost node, an OOM kill and a preemption apart (WorkerExit::cause).
// docs/schedulers-slurm.md says how to run a job this way and why srun
// rather than slurmrestd.
#pragma once

#include <cohort/scheduler.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace cohort {

struct COHORT_API SlurmOptions {
    std::string job_id;              // the allocation: $SLURM_JOB_ID
    std::vector<std::string> nodes;  // its nodes, in order: $SLURM_JOB_NODELIST expanded
    int workers_per_node = 1;        // the most workers placed on one node at a time
    // More srun options for every step, before the program: "--cpus-per-task=4", "--gpus-per-task=1",
    // "--mem=16G" (each worker step is --nodes=1 --ntasks=1 --overlap already).
    std::vector<std::string> srun_args;
    std::string srun = "srun";                           // looked up on PATH unless it holds a '/'
    std::string scontrol = "scontrol";                   // asked about a node when a step ends without a task status
    std::string squeue = "squeue", scancel = "scancel";  // for a step whose srun will not stop
    std::chrono::milliseconds grace{10000};              // SIGTERM to SIGKILL when a plan stops a worker

    // job_id and nodes from $SLURM_JOB_ID and $SLURM_JOB_NODELIST (else
    // $SLURM_NODELIST). Error(invalid_argument) when they are missing (not
    // inside an allocation: run under sbatch or salloc), Error(parse) for a
    // node list that is not a Slurm host list.
    static SlurmOptions from_env();
};

// Slurm's compressed host list ("host[0-2,05],login") as node names, in
// order, each once; Error(parse) saying where it is malformed.
COHORT_API std::vector<std::string> expand_slurm_hostlist(std::string_view list);

// Each worker is `srun --jobid=J --nodelist=NODE --exclude=LOST,AVOIDED
// --nodes=1 --ntasks=1 --overlap --job-name=ID [srun_args] -- argv`, with
// the spec's environment (srun passes it to the task) and working
// directory; srun's stderr is passed through to the launcher's. A node is
// chosen for a launch (the least loaded with room), for a relaunch (the
// step's host when usable, else the least loaded) and for a restart (its
// own when usable); a node that was lost, or that a plan asks to avoid
// (ScalingPlan::avoid_hosts), is never chosen again. Stopping sends
// SIGTERM through srun to the task, after the grace period srun's
// step-abort (two SIGINTs), then scancel of the step. srun gets SIGTERM
// when the thread that started it ends (as LocalScheduler's workers get
// SIGKILL). Not thread-safe, as Scheduler. The destructor stops every
// worker.
class COHORT_API SlurmScheduler final : public Scheduler {
public:
    // Error(invalid_argument) for an empty factory, job id or node list,
    // workers_per_node < 1, or a negative grace.
    SlurmScheduler(WorkerFactory factory, SlurmOptions options);
    ~SlurmScheduler() override;
    SlurmScheduler(const SlurmScheduler&) = delete;
    SlurmScheduler& operator=(const SlurmScheduler&) = delete;

    std::string name() const override;  // "slurm"
    void execute(const ScalingPlan& plan) override;
    std::vector<WorkerExit> poll() override;
    std::vector<std::string> running() const override;
    // To each srun, which passes it to its task; SIGINT is sent as SIGTERM
    // (srun answers a lone SIGINT with a status report).
    void signal_all(int signal) override;
    void stop_all(std::chrono::milliseconds grace) override;

    // Starts one worker on `node` (empty: the least loaded usable node with
    // room). Throws Error(invalid_argument) for an empty id or argv, an id
    // already running, or a node not in the allocation; no usable node, or
    // srun that cannot start, come back from poll() as not_started.
    void launch(const WorkerSpec& spec, std::string_view node = {});
    void stop(std::string_view id, std::chrono::milliseconds grace);
    int64_t pid(std::string_view id) const;          // srun's pid, -1 when not running
    std::string node_of(std::string_view id) const;  // where it runs, empty when not running
    std::vector<std::string> lost_nodes() const;     // seen lost, by name
    const SlurmOptions& options() const;

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace cohort
