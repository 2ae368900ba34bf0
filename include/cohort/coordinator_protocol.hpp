// The messages of the coordinator's HTTP protocol (docs/coordinator.md) as
// C++ types: what a member sends (a join's descriptor, a heartbeat's
// metrics) and what the coordinator answers (join and heartbeat replies,
// the member's world, shard leases). The client, the server, the journal,
// the health windows and the C layer all use these types; each has one
// JSON reader and writer, in src/coordinator/protocol/, and the JSON text
// forms below are those.
#pragma once

#include <cohort/export.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cohort {

// Job settings (docs/coordinator.md, "Job settings"); unset fields take
// the server's defaults. Durations in seconds.
// The job's training-health settings (docs/coordinator.md, "Training
// health"); unset fields keep the coordinator's defaults.
struct HealthSettings {
    std::optional<uint32_t> window;               // step samples kept per member (120)
    std::optional<double> window_seconds;         // and none older than this (120)
    std::optional<uint32_t> recent;               // the latest samples that make a member's current speed (10)
    std::optional<uint32_t> min_samples;          // fewer and a member gets no score (3)
    std::optional<double> straggler_threshold;    // a score below this is slow (0.7)...
    std::optional<double> straggler_for;          // ...and a straggler once slow this long (30 s)
    std::optional<std::string> reference;         // "median" or "best"
    std::optional<double> hang_timeout;           // no step for this long: hung (300 s)
    std::optional<double> gpu_temperature_limit;  // celsius (90)
};

struct JobSettings {
    std::optional<uint32_t> min_nodes;
    std::optional<uint32_t> max_nodes;
    std::optional<double> last_call;
    std::optional<uint32_t> node_unit;
    std::optional<double> join_timeout;
    std::optional<double> heartbeat_interval;
    std::optional<double> failure_timeout;
    std::optional<std::string> rejoin;  // "auto" or "on_request"
    HealthSettings health;
};

// What a node tells the coordinator when it joins; only `id` is required.
struct MemberDescriptor {
    std::string id;
    std::string host;
    std::string address;  // data plane, "HOST:PORT"
    std::string role;     // "worker" (the server's default) when empty
    std::string switch_label, rack, zone, region;
    std::optional<uint32_t> gpus;
    std::optional<uint64_t> gpu_memory;
};

struct JoinReply {
    std::string state;  // "waiting" or "active"
    uint64_t generation = 0;
    std::optional<uint32_t> rank;  // when active
};

// One step a member took, sent in a heartbeat's batch. Seconds.
struct StepSample {
    double age = 0;  // how long before the heartbeat was sent the step ended
    uint64_t step = 0;
    std::optional<double> step_time;
    std::optional<double> samples_per_sec;
    std::optional<double> data_wait;        // waiting for input
    std::optional<double> collective_wait;  // inside collectives

    bool operator==(const StepSample&) const = default;
};

// What a heartbeat reports about the training (docs/coordinator.md,
// "Heartbeats"); every field optional. The top-level fields describe the
// latest step; `samples` the steps since the previous heartbeat, oldest first.
struct HeartbeatMetrics {
    std::optional<uint64_t> step;
    std::optional<double> step_time;
    std::optional<double> samples_per_sec;
    std::optional<double> data_wait;
    std::optional<double> collective_wait;
    // The collective the member is in or last left, and whether it is inside.
    std::optional<uint64_t> collective_seq;
    std::optional<bool> in_collective;
    std::string gpu_json;  // any JSON value (cohort::GpuSample::to_json()), or empty
    std::vector<StepSample> samples;

    bool operator==(const HeartbeatMetrics&) const = default;
};

struct HeartbeatReply {
    uint64_t generation = 0;  // the job's
    std::string state;        // "waiting" or "active"
    // A new round is open: leave the communicator, join again, read the new world.
    bool rendezvous = false;
    // When active: the member's rank and world size in `generation`.
    std::optional<uint32_t> rank;
    std::optional<uint32_t> world_size;
};

struct RoundReply {
    bool round_open = false;
    uint64_t generation = 0;
};

// The answer to a report that a member of a world died (POST .../report).
struct ReportReply {
    std::string member;  // the member reported
    // "failed": this report marked it failed; "already_gone": it had
    // failed, left or been reported before; "rejoined": it has joined again
    // since (a restarted process), so it is left alone; "ignored": the
    // report was about a world the job has already replaced.
    std::string outcome;
};

struct WorldPeer {
    uint32_t rank = 0;
    std::string id;
    std::string host;
    std::string address;
};

struct MemberWorld {
    bool active = false;  // false: the member still waits for a round
    uint64_t generation = 0;
    uint32_t rank = 0;
    uint32_t world_size = 0;
    uint32_t local_rank = 0;
    uint32_t local_world_size = 0;
    uint32_t node_rank = 0;
    std::vector<WorldPeer> peers;  // by rank, the member itself included
};

struct ShardLease {
    // Nothing leased: `finished` says whether every epoch is done, or only
    // that every shard left is leased now (ask again after a while).
    bool granted = false;
    bool finished = false;
    uint64_t lease = 0;
    std::string shard_id;
    uint64_t shard = 0;
    uint32_t epoch = 0;
    uint64_t bytes = 0;
    double expiry = 0;
};

struct ShardDone {
    std::string outcome;  // "counted", "counted_late" or "already_done"
    bool counted = false;
};

// A lease given back unread (shards/release).
struct ShardRelease {
    // "released": the shard is handed out again now; "requeued": it was
    // already (the lease expired, its member was removed, or it was given
    // back before); "reported": the lease was reported done. Only
    // "released" changes anything.
    std::string outcome;
    bool released = false;
};

struct StoreCasResult {
    std::optional<std::string> value;  // after the call
    bool stored = false;
};

// The JSON text of a message, as the coordinator sends it.
// with_peers == false leaves the peer list out.
COHORT_API std::string to_json_text(const MemberWorld& world, bool with_peers = true);
COHORT_API std::string to_json_text(const HeartbeatReply& reply);
COHORT_API std::string to_json_text(const ShardLease& lease);
COHORT_API std::string to_json_text(const ShardDone& done);
COHORT_API std::string to_json_text(const ShardRelease& release);
COHORT_API std::string to_json_text(const HeartbeatMetrics& metrics);
// A heartbeat's metrics object from JSON text (an API caller's argument).
// Error(invalid_argument) "<where>: <field>: ..." naming what is wrong.
COHORT_API HeartbeatMetrics heartbeat_metrics_from_json_text(std::string_view text, std::string_view where);

}  // namespace cohort
