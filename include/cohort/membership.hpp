// Keeps this process a member of an elastic job (docs/elastic.md): joins the
// coordinator, heartbeats in the background with the training metrics the
// program records, tells the program when a new round opens, and builds the
// communicator of each world on the coordinator's store. What a worker under
// cohort-run (or any launcher) uses; every call is thread-safe.
#pragma once

#include <cohort/communicator.hpp>
#include <cohort/coordinator_client.hpp>
#include <cohort/export.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cohort {

struct MembershipOptions {
    std::string coordinator;  // "http://HOST:PORT"; $COHORT_COORDINATOR
    std::string job;          // $COHORT_JOB
    // The member's role in a job of several (role_group.hpp; $COHORT_ROLE):
    // "" (the default), "default" or "worker" join `job`; another role, say
    // "evaluator", joins `job.evaluator`, a world of its own whose rounds
    // never touch the workers'. A role the coordinator knows (chief,
    // evaluator, parameter_server, ps) also becomes node.role unless that is set.
    std::string role;
    MemberDescriptor node;    // id: $COHORT_MEMBER, else HOST-PID; host: the host name
    // Set when a launcher has already joined this member for the program
    // ($COHORT_GENERATION): the member heartbeats instead of joining again.
    uint64_t joined_generation = 0;
    std::string token;  // $COHORT_COORDINATOR_TOKEN
    // 0: the job's heartbeat_interval, read from the job's settings.
    std::chrono::milliseconds heartbeat_interval{0};
    // Step samples kept between two heartbeats; older ones are dropped.
    std::size_t max_batch = 64;
    CoordinatorClientOptions client;
    // Used for every communicator (rank, size, store, job_id and generation
    // are filled in per world).
    CommOptions comm;
    // When a new round opens while the program still waits in a collective
    // of the old world, abort the communicator() of that world (its
    // operation fails with Error(closed), "aborted: ...") so the program
    // goes to the next world at once instead of at the collective's
    // timeout: a peer that stopped (SIGSTOP, a hung driver) never answers.
    // Aborted when the program has been in one collective (set_collective)
    // for a heartbeat interval, or, for a program that does not report its
    // collectives, one heartbeat interval after the round was seen.
    bool abort_stale_collectives = true;
};

// One training step, as the program measured it. Seconds; a negative value
// is one the program did not measure, and is not sent.
struct StepMetrics {
    uint64_t step = 0;
    double step_time = 0;  // the whole step
    double samples_per_sec = 0;
    double data_wait = 0;        // waiting for input (a shard, a batch)
    double collective_wait = 0;  // inside collectives
};

class COHORT_API Membership {
public:
    explicit Membership(MembershipOptions options);
    // Options from the COHORT_* variables above; Error(invalid_argument)
    // naming the variable when one is missing or malformed.
    static MembershipOptions options_from_env();
    Membership(Membership&&) noexcept;
    Membership& operator=(Membership&&) noexcept;
    // Stops heartbeating; does not leave (a process that exits without
    // leave() is found failed by the coordinator, or told by its launcher).
    ~Membership();

    const std::string& member() const;
    // The coordinator job this member is in: options.job, or options.job.ROLE
    // for a role other than the default (role_job in role_group.hpp).
    const std::string& job() const;
    // The role, as ROLE_NAME says it: options.role, "default" when empty.
    const std::string& role() const;
    CoordinatorClient& client();

    // Joins (or takes over a launcher's join), starts heartbeating, and
    // waits until the member has a world; Error(timeout) after `timeout`
    // (the member stays in the job's waiting room: call again). Called again
    // after round_pending() or leave(): joins the new round; with no round
    // pending: the current world at once. A member the coordinator declared
    // failed, stale or timed out, or forgot, joins again by itself.
    MemberWorld next_world(std::chrono::milliseconds timeout);
    // The last world next_world returned (active == false before). Its
    // `peers` is empty: the communicator meets its peers through the
    // store, and reading a world without them scales to large jobs
    // (client().world() has them).
    MemberWorld world() const;
    // A communicator for the last world, bootstrapped on the coordinator's
    // store for that generation (options.comm for the rest; its host_label
    // defaults to node.host). Error(invalid_argument) before next_world().
    Communicator communicator() const;

    // True once a heartbeat answer said a new round is open (or the member
    // is no longer active): finish or abandon the step, then next_world().
    // Also true once no heartbeat has got through for the job's
    // failure_timeout (a partition, or a coordinator down that long): the
    // coordinator fails a member that silent, so the member fences itself,
    // whatever abort_stale_collectives says: the communicator() of its world
    // is aborted at once (Error(closed), "... fenced ...") and next_world()
    // joins again once the coordinator answers. No step of a stale world
    // completes on the far side of a partition.
    bool round_pending() const;
    // Asks for a new round now (a collective failed: a peer died or hangs,
    // which the coordinator may not know yet). When the coordinator has a
    // round open afterwards, round_pending() is true at once, without
    // waiting for the next heartbeat. Returns round_pending().
    bool request_round();
    // request_round() after a collective failed on `comm` (the
    // communicator() of the last world), first telling the coordinator
    // which members of that world died: the ranks of comm.dead_ranks(),
    // mapped to member ids through the world's peer list. Each is marked
    // failed at once, so the round closes as soon as the live members are
    // back instead of waiting last_call for the dead (a whole host lost,
    // its launcher with it, has nobody else to say so). Returns the member
    // ids reported (empty when none died, or when the world is already
    // over); a refused report (this member is stale, the world moved on) is
    // not an error: the round is asked for all the same. Check
    // round_pending() afterwards as after request_round().
    std::vector<std::string> report_dead(const Communicator& comm);

    // Metrics for the next heartbeat (kept in a bounded batch).
    // Error(invalid_argument) for a NaN or infinite value.
    void record_step(const StepMetrics& metrics);
    // Time spent waiting for input, measured by someone else than the
    // program (a ShardReader over this membership calls it after each
    // next()). The sum since the last record_step becomes that step's
    // data_wait when the program leaves it 0 or negative; a data_wait the
    // program measured itself wins. Either way the sum starts again at 0.
    // Error(invalid_argument) for a negative or non-finite value.
    void add_data_wait(double seconds);
    // The collective the program is in (or last left): its sequence number,
    // and whether it is inside it now. Hang diagnosis names ranks that never
    // entered the collective others wait in.
    void set_collective(uint64_t sequence, bool inside);
    // GPU samples (cohort::GpuSample::to_json()) sent with the heartbeats
    // from now on (empty: none); Error(invalid_argument) when not JSON.
    void set_gpu_json(std::string json);

    // Shards of the job's dataset, leased to this member.
    ShardLease next_shard();
    ShardDone shard_done(uint64_t lease);
    // Gives an outstanding lease back unread (CoordinatorClient::shard_release).
    ShardRelease shard_release(uint64_t lease);

    // Stops heartbeating and says goodbye; the job starts a new round at
    // once. Idempotent; nothing to say for a member that never joined.
    void leave();

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace cohort
