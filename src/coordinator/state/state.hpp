// The coordinator's state machine: every job, pure and deterministic. No
// I/O, no threads, no clock: every call takes `now`, seconds on a clock that
// survives restarts (the server passes Unix time). Time never runs
// backwards inside the state: an earlier `now` counts as the latest seen.
//
// Event sourcing: commands (join, heartbeat, store_set, next_shard, ...)
// validate, throw cohort::Error before changing anything, then produce
// events and apply() them; apply() is the only mutator. take_events() hands
// the server what to journal. Replaying a journal onto from_snapshot() of
// the snapshot taken before it (or onto an empty state) gives the same
// state, snapshot for snapshot.
//
// Errors map onto HTTP: not_found (unknown job, member or lease) 404,
// invalid_argument 400, mismatch (wrong generation, not a member any more,
// job exists with other settings) 409, unavailable (job full, member not in
// a world yet) 503, timeout (join_timeout passed) 408.
#pragma once

#include "coordinator/state/dataset_plan.hpp"
#include "coordinator/state/events.hpp"
#include "coordinator/state/job.hpp"
#include "coordinator/state/shard_queue.hpp"

#include <cohort/coordinator_protocol.hpp>
#include "coordinator/state/settings.hpp"

#include <cohort/node.hpp>

#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/value.hpp>

namespace cohort::coord {

// What GET /metrics reports for a job.
struct JobMetrics {
    std::string job;
    std::array<uint64_t, kMemberStateCount> members{};  // by MemberState
    uint64_t generation = 0;                            // rounds closed so far
    std::array<uint64_t, kStoreOpCount> store_ops{};    // by StoreOp, since this process started
    uint64_t store_keys = 0;
    uint64_t shards_todo = 0, shards_leased = 0, shards_done = 0;  // summed over epochs
    ShardCounters leases;
    bool hung = false;
    // Active members with a straggler score: id, score, straggler, hung.
    struct NodeScore {
        std::string member;
        double score = 1;
        bool straggler = false;
        bool hung = false;
    };
    std::vector<NodeScore> nodes;
    // Active members whose heartbeats carry a step: the latest they sent.
    struct MemberSteps {
        std::string member;
        uint64_t step = 0;
        std::optional<double> step_time, samples_per_sec;
    };
    std::vector<MemberSteps> steps;
    JobActivity activity;  // rounds, steps and removals seen by this process
};

class CoordinatorState {
public:
    // ---- jobs
    // The same settings again: nothing happens; other settings: Error(mismatch).
    void create_job(std::string_view name, const JobSettings& settings, double now);
    void delete_job(std::string_view name, double now);
    const Job& job(std::string_view name) const;  // Error(not_found)
    const Job* find_job(std::string_view name) const;
    const std::map<std::string, Job, std::less<>>& jobs() const { return jobs_; }
    // Every job's straggler scores and hangs, from the heartbeats so far
    // (Job::evaluate_health); the server runs it a few times a second.
    void evaluate_health(double now);

    // ---- rendezvous (rendezvous.cpp)
    // A node joins, or joins again: it waits for the next round. Joining
    // again while waiting with the same descriptor changes nothing (a retry);
    // while in a running world it opens a new round (a restarted process).
    // Error(unavailable) when largest_world() newcomers already wait, or
    // when a new member would exceed set_max_members().
    JoinReply join(std::string_view job, Node node, double now);
    // Members across all jobs that join() admits (0: any number). Checked
    // on new joins only: a journal replayed under a lower cap keeps them.
    void set_max_members(std::size_t cap) { max_members_ = cap; }
    std::size_t member_count() const;
    // `generation`: the member's world, or 0 while it has none. An active
    // member must send its world's generation, a waiting one 0 or its last
    // world's; anything else is Error(mismatch). A failed, departed or stale
    // member gets Error(mismatch) too, a timed-out one Error(timeout): each
    // must join again.
    HeartbeatReply heartbeat(std::string_view job, std::string_view member, uint64_t generation,
                             std::optional<HeartbeatMetrics> metrics, double now);
    // A member of the running world that leaves opens a new round at once.
    // Leaving twice is not an error.
    // `failure` not empty: someone who knows (the member's launcher) says
    // it failed and why; it is marked failed at once instead of after
    // failure_timeout.
    void leave(std::string_view job, std::string_view member, double now, std::string_view failure = {});
    // `reporter`, an active member of world `generation` (or a survivor of
    // it already back in the round replacing it), saw `dead`, a
    // member of the same world, die (its connection closed without a
    // goodbye): `dead` is marked failed now ("reported dead by node
    // 'REPORTER' ...: WHY"), as leave() with a failure, so the round closes
    // once the live members are back instead of waiting last_call or
    // failure_timeout for it. Outcome "failed"; "already_gone" when it had
    // failed or left (another survivor reported first); "rejoined" when it
    // joined again since (a restarted process: left alone); "ignored" for a
    // world the job has already replaced (generation older than the job's).
    // Error(mismatch) naming who and why when the reporter is not an active
    // member of that generation (stale, failed, waiting, or in another
    // world), when `dead` was not in it, or for a generation the job never
    // had; Error(invalid_argument) for a member reporting itself;
    // Error(not_found) for an unknown member.
    ReportReply report_dead(std::string_view job, std::string_view reporter, uint64_t generation, std::string_view dead,
                            std::string_view why, double now);
    // Opens a new round (rejoin policy on_request, or any time a member
    // wants the waiting nodes in).
    void request_round(std::string_view job, std::string_view member, double now);
    // Empty while the member waits for a round. with_peers == false leaves
    // the peer list out (O(1) rather than O(world)).
    std::optional<MemberWorld> world(std::string_view job, std::string_view member, bool with_peers = true) const;
    // Failures (silent for failure_timeout), rounds due to close, join
    // timeouts, expired leases.
    void tick(double now);
    // Call once after loading saved state: the outage is nobody's silence.
    void resume(double now);
    // The earliest time tick() would change something; empty if nothing waits.
    std::optional<double> next_deadline() const;

    // ---- key-value store of a job's generation (store.cpp); cohort::Store
    // semantics. `generation` must be the job's current one, else
    // Error(mismatch).
    void store_set(std::string_view job, uint64_t generation, std::string_view key, std::string_view value, double now);
    std::optional<std::string> store_get(std::string_view job, uint64_t generation, std::string_view key) const;
    int64_t store_add(std::string_view job, uint64_t generation, std::string_view key, int64_t delta, double now);
    // The value after the call (empty: the key is absent), so the caller
    // knows whether it won.
    std::optional<std::string> store_compare_and_set(std::string_view job, uint64_t generation, std::string_view key,
                                                     const std::optional<std::string>& expected,
                                                     std::string_view desired, double now);
    bool store_remove(std::string_view job, uint64_t generation, std::string_view key, double now);
    // For get and wait: the keys not set yet. Parked requests look again
    // when store_version() changes (or the generation does).
    std::vector<std::string> store_missing(std::string_view job, uint64_t generation,
                                           std::span<const std::string> keys) const;
    uint64_t store_version(std::string_view job, uint64_t generation) const;

    // ---- dataset shards (shards.cpp)
    // The same plan again: nothing happens; another plan: Error(mismatch).
    void register_dataset(std::string_view job, DatasetPlan plan, double now);
    // For a member of the running world; shards on its host first.
    ShardLease next_shard(std::string_view job, std::string_view member, double now);
    ShardDone shard_done(std::string_view job, std::string_view member, uint64_t lease, double now);
    // Gives an outstanding lease of `member` back; its shard is next out.
    ShardRelease shard_release(std::string_view job, std::string_view member, uint64_t lease, double now);

    // ---- first answers to Idempotency-Keys (answers.hpp)
    // What `key` answered, if it is still kept. Changes nothing.
    AnswerTable::Lookup find_answer(const std::string& key, std::string_view fingerprint, double now) const {
        return answers_.find(key, fingerprint, time_of(now));
    }
    // Journals `answer` as the first to `key` (an AnswerKept event), unless
    // the limits keep none of that size. The server calls it after the
    // change, before committing, so both go to the journal together.
    void keep_answer(std::string key, std::string fingerprint, KeptAnswer answer, double now);
    // Not journaled: the server sets them at start, before any request (a
    // restart under lower limits drops the oldest keys).
    void set_answer_limits(AnswerLimits limits) { answers_.set_limits(limits); }
    const AnswerTable& answers() const { return answers_; }
    // The journal failed: answers kept may be of changes that never became
    // durable, so a retry must not be told they were made.
    void forget_answers() { answers_.clear(); }

    // ---- events
    // Error(invalid_argument) for an event that does not fit the state.
    void apply(const Event& event);
    // The events applied by commands since the last call, oldest first.
    std::vector<Event> take_events();
    double clock() const { return clock_; }

    // ---- JSON
    boost::json::value snapshot() const;
    // snapshot() less its "jobs": an incremental snapshot keeps each job's
    // Job::snapshot() in a file of its own and rewrites only those changed.
    boost::json::object snapshot_without_jobs() const;
    // Error(parse) naming the field for anything malformed.
    static CoordinatorState from_snapshot(const boost::json::value& value);
    std::vector<JobMetrics> metrics() const;

private:
    double time_of(double now) const;
    boost::json::object snapshot_object(boost::json::array* jobs) const;
    Job& job_for(std::string_view name);
    void emit(Event event);
    // Feeds Job::activity from a live event, before it is applied.
    void observe(const Event& event);
    void settle(Job& job, double now);
    const Job& store_job(std::string_view name, uint64_t generation) const;
    std::string store_address(const Job& job) const;
    // store_job, with the key (and the value a write stores) checked, and
    // the call counted as `op`.
    const Job& store_call(std::string_view name, uint64_t generation, std::string_view key, StoreOp op,
                          std::optional<std::string_view> value = std::nullopt) const;

    std::map<std::string, Job, std::less<>> jobs_;
    std::vector<Event> pending_;
    double clock_ = 0;
    std::size_t max_members_ = 0;
    // Unbounded until the server sets its limits, so that loading a
    // snapshot and replaying the journal drops nothing the limits in force
    // kept (the journal since the last snapshot bounds it meanwhile).
    AnswerTable answers_{AnswerLimits{std::numeric_limits<double>::infinity(), SIZE_MAX, SIZE_MAX}};
};

}  // namespace cohort::coord
