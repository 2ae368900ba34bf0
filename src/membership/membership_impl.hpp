// What a Membership holds: its clients, where the member stands in the job,
// the metrics for the next heartbeat and the thread that sends them. One
// mutex guards the state the heartbeat thread shares with the caller.
#pragma once

#include "membership/metrics_batch.hpp"

#include <cohort/communicator.hpp>
#include <cohort/coordinator_client.hpp>
#include <cohort/error.hpp>
#include <cohort/membership.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace cohort {

namespace membership {

enum class Phase {
    idle,     // not joined (or left); no heartbeats
    waiting,  // joined; waits for a round to give it a world (heartbeats carry generation 0)
    active,   // has a world (heartbeats carry its generation)
};

// Defaults of MembershipOptions::node (env.cpp).
std::string machine_name();
std::string default_member_id(const std::string& host);

}  // namespace membership

struct Membership::Impl {
    explicit Impl(MembershipOptions options);
    ~Impl();  // stops the heartbeat thread, waiting at most for the heartbeat under way

    // The job's heartbeat interval, read from its settings unless the
    // options give one, and its failure timeout (fence_after). Contacts the
    // coordinator the first time.
    std::chrono::milliseconds heartbeat_interval();
    // Joins (again), entering the waiting phase first so that answers to
    // heartbeats sent for the previous phase are ignored.
    void join();
    void enter(membership::Phase next, MemberWorld next_world);  // mutex held

    void start_heartbeats();  // mutex held
    void stop_heartbeats();   // mutex not held; never from the heartbeat thread
    void heartbeat_loop();
    // One heartbeat; true when it should be sent again at once.
    bool beat(std::unique_lock<std::mutex>& lock);
    // Sets round_pending; mutex held.
    void mark_round_pending();
    // Aborts the old world's communicator when the program is stuck in it
    // (MembershipOptions::abort_stale_collectives); mutex held.
    void abort_stale_collective();
    // No heartbeat got through for fence_after: the coordinator has failed
    // this member and its world goes on without it, so this side must not
    // train on in it (a partition). Marks the round pending and aborts the
    // world's communicator at once; mutex held.
    void fence(const std::string& error);

    MembershipOptions options;
    // Joins, worlds, shards and the store: retried through outages.
    std::shared_ptr<CoordinatorClient> client;
    // One attempt per heartbeat: a failed one is retried at the next
    // interval anyway, and stopping never waits through a retry loop.
    CoordinatorClient heartbeats;

    mutable std::mutex mutex;
    std::condition_variable wake;  // the heartbeat thread waits on it between beats
    // Guarded by `mutex`:
    membership::Phase phase = membership::Phase::idle;
    uint64_t epoch = 0;  // counts phase changes: an answer for an older phase is stale
    MemberWorld world;
    bool round_pending = false;
    membership::Clock::time_point round_pending_at;  // when round_pending was first seen
    // The communicator built for world.generation, for abort_stale_collective().
    Communicator::AbortHandle comm_abort;
    uint64_t comm_generation = 0;
    membership::Clock::time_point collective_since;  // the program entered its current collective
    uint64_t last_sequence = 0;
    bool left = false;
    bool stopping = false;
    bool first_step_pending = false;  // no step recorded in this world yet
    bool report_now = false;          // heartbeat without waiting for the interval
    // The coordinator refused the newer metrics fields: send only the basic ones.
    bool basic_metrics = false;
    std::chrono::milliseconds interval{0};
    // The job's failure_timeout: silent this long, a member is failed.
    std::chrono::milliseconds fence_after{0};
    // The last heartbeat answered in the current world, or when it began.
    membership::Clock::time_point last_answered;
    std::string last_heartbeat_error;
    membership::MetricsBatch metrics;
    // Data wait others measured since the last record_step (add_data_wait).
    double pending_data_wait = 0;
    std::thread thread;
};

}  // namespace cohort
