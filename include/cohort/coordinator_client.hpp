// A client of the elastic coordinator's HTTP API (docs/coordinator.md):
// jobs, rendezvous, heartbeats, each generation's key-value store and the
// dataset's shard leases. libcurl underneath, with keep-alive connections,
// a timeout per request and retries with backoff through outages.
#pragma once

#include <cohort/export.hpp>
#include <cohort/store.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cohort {

struct COHORT_API CoordinatorClientOptions {
    CoordinatorClientOptions();

    // Sent as "Authorization: Bearer <token>" when not empty. Defaults to
    // $COHORT_COORDINATOR_TOKEN.
    std::string token;
    // Bounds one HTTP exchange (connecting included). A store get or wait
    // gets its own wait on top.
    std::chrono::milliseconds request_timeout{std::chrono::seconds(10)};
    // Connection failures and 5xx answers are retried with exponential
    // backoff (and jitter) until this much time has passed since the call
    // began; 4xx answers never are. Zero: one attempt only.
    std::chrono::milliseconds retry_deadline{std::chrono::seconds(30)};
    std::chrono::milliseconds initial_backoff{std::chrono::milliseconds(50)};
    std::chrono::milliseconds max_backoff{std::chrono::seconds(2)};
};

// Job settings (docs/coordinator.md, "Job settings"); unset fields take
// the server's defaults. Durations in seconds.
// The job's training-health settings (docs/coordinator.md, "Training
// health"); unset fields keep the coordinator's defaults.
struct HealthSettings {
    std::optional<uint32_t> window;          // step samples kept per member (120)
    std::optional<double> window_seconds;    // and none older than this (120)
    std::optional<uint32_t> recent;          // the latest samples that make a member's current speed (10)
    std::optional<uint32_t> min_samples;     // fewer and a member gets no score (3)
    std::optional<double> straggler_threshold;  // a score below this is slow (0.7)...
    std::optional<double> straggler_for;        // ...and a straggler once slow this long (30 s)
    std::optional<std::string> reference;       // "median" or "best"
    std::optional<double> hang_timeout;         // no step for this long: hung (300 s)
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

struct StoreCasResult {
    std::optional<std::string> value;  // after the call
    bool stored = false;
};

// Thread-safe: calls may overlap (each takes a pooled connection). Errors
// are cohort::Error with the code by HTTP status: 400/413 invalid_argument,
// 401 permission_denied, 404 not_found, 408 timeout, 409 mismatch, 503
// unavailable, other 5xx internal; a server that cannot be reached before
// the retry deadline is Error(unavailable) naming the URL and the last
// connection error.
class COHORT_API CoordinatorClient {
public:
    // url: "http://HOST:PORT" (a trailing '/' is ignored).
    explicit CoordinatorClient(std::string url, CoordinatorClientOptions options = {});
    CoordinatorClient(CoordinatorClient&&) noexcept;
    CoordinatorClient& operator=(CoordinatorClient&&) noexcept;
    ~CoordinatorClient();

    const std::string& url() const;

    // The job's state (JSON text). 409 if it exists with other settings.
    std::string create_job(std::string_view name, const JobSettings& settings = {});
    std::string create_job_json(std::string_view name, std::string_view settings_json);
    std::string job_state(std::string_view name);
    void delete_job(std::string_view name);

    JoinReply join(std::string_view job, const MemberDescriptor& node);
    HeartbeatReply heartbeat(std::string_view job, std::string_view member, uint64_t generation,
                             const std::optional<HeartbeatMetrics>& metrics = std::nullopt);
    // failure not empty: the member failed (its launcher saw its process
    // die) and why: it is marked failed now, not after failure_timeout.
    void leave(std::string_view job, std::string_view member, std::string_view failure = {});
    RoundReply request_round(std::string_view job, std::string_view member);
    // peers == false: the rank and sizes without the peer list (a few dozen
    // bytes instead of one entry per member; what a member that only needs
    // its rank should ask for in a large job).
    MemberWorld world(std::string_view job, std::string_view member, bool peers = true);
    // Heartbeats (generation 0) at the job's heartbeat interval and reads the
    // member's world until it has one; Error(timeout) after `timeout`.
    MemberWorld wait_for_world(std::string_view job, std::string_view member, std::chrono::milliseconds timeout);

    // The store of one job's generation (values are bytes).
    void store_set(std::string_view job, uint64_t generation, std::string_view key, std::string_view value);
    // Waits up to `timeout` (0: not at all) for the key; Error(timeout) or,
    // with no wait, Error(not_found).
    std::string store_get(std::string_view job, uint64_t generation, std::string_view key,
                          std::chrono::milliseconds timeout);
    std::optional<std::string> store_try_get(std::string_view job, uint64_t generation, std::string_view key);
    int64_t store_add(std::string_view job, uint64_t generation, std::string_view key, int64_t delta);
    StoreCasResult store_compare_and_set(std::string_view job, uint64_t generation, std::string_view key,
                                         const std::optional<std::string>& expected, std::string_view desired);
    void store_wait(std::string_view job, uint64_t generation, std::span<const std::string> keys,
                    std::chrono::milliseconds timeout);
    bool store_remove(std::string_view job, uint64_t generation, std::string_view key);

    // plan_json: {"shards": [{"id", "bytes"?, "hosts"?}], "epochs"?, ...};
    // returns the plan as the server keeps it.
    std::string register_dataset(std::string_view job, std::string_view plan_json);
    ShardLease next_shard(std::string_view job, std::string_view member);
    ShardDone shard_done(std::string_view job, std::string_view member, uint64_t lease);

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

// A Store over one job's generation on a coordinator: what
// open_store("coordinator://HOST:PORT/JOB/GENERATION") returns.
COHORT_API std::shared_ptr<Store> coordinator_store(std::shared_ptr<CoordinatorClient> client, std::string job,
                                                    uint64_t generation);

}  // namespace cohort
