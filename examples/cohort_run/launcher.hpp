// The launcher's loop: hosts or finds the coordinator, creates the job,
// joins and starts the workers, then watches them (their exits, the job's
// rounds, steps and health) and carries out the policy's plans until every
// worker has finished, the job has failed, or a signal stops it.
#pragma once

#include "events.hpp"
#include "group_restart.hpp"
#include "job_view.hpp"
#include "master_address.hpp"
#include "options.hpp"
#include "status_bar.hpp"
#include "scheduler_choice.hpp"

#include <cohort/coordinator.hpp>
#include <cohort/coordinator_client.hpp>
#include <cohort/kubernetes.hpp>
#include <cohort/scaling.hpp>
#include <cohort/scheduler.hpp>
#include <cohort/slurm_scheduler.hpp>

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace cohort_run {

class Launcher {
public:
    explicit Launcher(Options options);
    ~Launcher();
    // The process's exit status.
    int run();

private:
    // One local worker place: LOCAL_RANK, and whoever runs in it now.
    struct Slot {
        int local_rank = 0;
        std::string node;    // --scheduler slurm: the allocation's node it runs on; else empty (this node)
        std::string place;   // NODE-LOCAL_RANK: the first worker's id, and the stem of its successors'
        std::string worker;  // the member id of the current process
        int restarts = 0;    // COHORT_RESTART_COUNT of the current process (--restart all: the group's)
        int starts = 0;
        bool running = false;
        bool finished = false;  // exited 0
        bool removed = false;   // failed or removed and not relaunched
        std::string ended;      // how its last process ended
        // The launcher heartbeats for a worker it joined until the worker's
        // own heartbeats show up: a program may take seconds to start.
        bool beat_for = false;
        uint64_t beats_sent = 0;
        uint64_t generation = 0;
        std::optional<uint32_t> rank, world_size, node_rank;
    };

    void connect();
    void make_checkpoint_dir();
    void make_node_checkpoint_dirs();
    void create_job();
    cohort::WorkerSpec spec_for(Slot& slot, bool joined);

    // world_start.cpp: a world of this launcher's workers.
    enum class Round { formed, not_formed, moved_on };
    double world_wait() const;
    bool master_from_store() const;
    // One heartbeat for a place the launcher speaks for: answered; refused
    // because the coordinator no longer counts the id as live (failed,
    // left, stale, timed out or unknown: it must join again; `refusal`
    // gets the coordinator's words); or refused otherwise or unanswered
    // (the coordinator away for a moment: the next beat may do).
    enum class Beat { answered, gone, unanswered };
    Beat beat(Slot& slot, uint64_t generation, cohort::HeartbeatReply* reply, std::string* refusal = nullptr);
    void join_slots();
    Round await_round(uint64_t after, double deadline);
    std::optional<MasterAddress> agree_master(double deadline);
    // pod_master.cpp: --scheduler kubernetes. The scheduler, or null.
    cohort::KubernetesScheduler* pods() const;
    // Starts rank 0's pod (unless it runs) and waits for its IP, beating
    // for the places meanwhile; nullopt when the generation moved on.
    // Throws Error(timeout) when the pod has no IP past --pending-timeout.
    std::optional<MasterAddress> start_rank0_pod(Slot& rank0, uint64_t generation, double deadline);
    void republish_master(const JobView& job);
    // Joins, waits for the round and rank 0's address, and starts every
    // place's worker, not before `not_before`; the `retired` ids of the old
    // world's processes are reported failed once the new ones wait. Throws
    // Error(timeout) past world_wait() under --restart all.
    void start_world(double not_before, const std::vector<std::string>& retired = {});
    void launch_slot(Slot& slot);
    // --restart all: stop every local worker and start_world again.
    void restart_world(const std::string& why, double delay);
    // --restart all: a change elsewhere in the job that breaks this world.
    void check_world(const JobView& job);
    void give_up(const std::string& why);

    cohort::WorkerSpec make_worker(const cohort::PlanStep& step);
    // The host a place's worker runs on: its Slurm node, or this node.
    const std::string& host_of(const Slot& slot) const;
    int64_t worker_pid(const std::string& worker) const;
    // slurm_placement.cpp: the allocation's nodes, --nproc-per-node places on each.
    void make_slurm_slots();
    void make_slurm_scheduler();
    std::string slurm_url_host() const;
    cohort::ClusterView slurm_cluster() const;
    void move_off_lost_node(Slot& slot) const;
    Slot* slot_of(std::string_view worker);

    int supervise();
    void on_exits();
    void on_capacity();
    void on_job(const JobView& job);
    void heartbeat_for_workers();
    // delay > 0: the plan runs that much later (a failed worker's relaunch).
    void act(const cohort::ScalingEvent& event, double delay = 0);
    void run_due_plans();
    void report_failed(const std::string& worker, const std::string& why);
    void progress(const JobView& job);
    // The terminal's status row, from the job's latest state.
    void show_status(const JobView& job);
    bool finished() const;
    int stop(int signal);
    int finish(int status, const std::string& reason);
    void summary();
    cohort::ClusterView cluster() const;

    Options o_;  // o_.job: the coordinator job of this launcher's role
    std::string base_job_;  // --job, which the workers get in COHORT_JOB with their COHORT_ROLE
    EventLog log_;
    StatusBar status_;
    StepRate step_rate_;
    double next_status_ = 0;
    std::unique_ptr<cohort::Coordinator> server_;
    std::unique_ptr<cohort::CoordinatorClient> client_;
    // Heartbeats only: one attempt each, so that a beat refused during a
    // coordinator's restart is sent again at the next beat, not after the
    // retry back-off (up to 2 s, the soak's whole failure timeout).
    std::unique_ptr<cohort::CoordinatorClient> beats_;
    std::unique_ptr<cohort::AutoScaler> scaler_;
    std::unique_ptr<cohort::Scheduler> scheduler_;
    cohort::LocalScheduler* local_ = nullptr;  // scheduler_, when it is one of these
    cohort::SlurmScheduler* slurm_ = nullptr;
    std::optional<cohort::SlurmOptions> slurm_options_;
    std::string url_;
    uint16_t master_port_ = 0;             // MASTER_PORT for a one-launcher job without --restart all
    std::string advertised_;               // MASTER_ADDR when rank 0 is here, in a job of several launchers
    std::optional<MasterAddress> master_;  // this world's, from the store
    RunningWorld world_;                   // the world the workers were started in
    uint32_t group_world_size_ = 0;        // the hosts of that world (GROUP_WORLD_SIZE)
    int group_restarts_ = 0;
    std::string gave_up_;
    std::string checkpoint_dir_;
    bool own_checkpoint_dir_ = false;  // made here: removed at exit
    std::vector<Slot> slots_;
    std::optional<JobView> last_job_;
    uint64_t generation_ = 0;
    bool awaiting_training_ = false;
    uint64_t step_at_round_ = 0;
    bool job_hung_reported_ = false;
    std::set<std::string> acted_;  // processes whose straggling, workers and rounds whose hang was acted on
    int rounds_ = 0, failures_ = 0, relaunches_ = 0, stragglers_ = 0, hangs_ = 0;
    bool failed_for_good_ = false;
    std::vector<std::pair<double, cohort::ScalingPlan>> deferred_;  // (when, plan)
};

}  // namespace cohort_run
