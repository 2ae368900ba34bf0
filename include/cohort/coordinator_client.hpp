// A client of the elastic coordinator's HTTP API (docs/coordinator.md):
// jobs, rendezvous, heartbeats, each generation's key-value store and the
// dataset's shard leases. libcurl underneath, with keep-alive connections,
// a timeout per request and retries with backoff through outages.
#pragma once

#include <cohort/coordinator_protocol.hpp>
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
    // began; 4xx answers never are. Zero: one attempt only. Each change but
    // a heartbeat sends one Idempotency-Key on all its attempts, so a change
    // whose answer was lost is not made twice (docs/coordinator.md,
    // "Retries").
    std::chrono::milliseconds retry_deadline{std::chrono::seconds(30)};
    std::chrono::milliseconds initial_backoff{std::chrono::milliseconds(50)};
    std::chrono::milliseconds max_backoff{std::chrono::seconds(2)};
    // HTTPS (docs/coordinator.md, "HTTPS"), PEM files: the CA that signed
    // the coordinator's certificate (empty: the system's CAs), and for
    // mutual TLS this client's certificate and key (both or neither).
    // Default to $COHORT_COORDINATOR_CACERT, $COHORT_COORDINATOR_CERT and
    // $COHORT_COORDINATOR_KEY. The server is always verified.
    std::string tls_ca_file, tls_cert_file, tls_key_file;
};

// Thread-safe: calls may overlap (each takes a pooled connection). Errors
// are cohort::Error with the code by HTTP status: 400/413 invalid_argument,
// 401 permission_denied, 404 not_found, 408 timeout, 409 mismatch, 503
// unavailable, other 5xx internal; a server that cannot be reached before
// the retry deadline is Error(unavailable) naming every URL tried and the
// last error of each.
//
// Several replicas (docs/coordinator.md, "Clients and several replicas"):
// a replica that answers 503 naming the leader (X-Cohort-Leader) is left
// for that leader at once; one that does not answer, or says it is not the
// leader without naming one, for the next URL of the list (or the leader
// etcd names) with the usual backoff. The leader found is kept for later
// calls. A change's Idempotency-Key goes with it to every replica, so a
// change the old leader made before it died is not made again.
class COHORT_API CoordinatorClient {
public:
    // url: "http://HOST:PORT" (a trailing '/' is ignored); a list of the
    // replicas "http://HOST:PORT,http://HOST:PORT"; or
    // "etcd://HOST:PORT[,HOST:PORT]/PREFIX[?cacert=&cert=&key=&user=&password-file=]"
    // (the replicas' --etcd and --etcd-prefix; PREFIX defaults to
    // /cohort/coordinator), whose key PREFIX/leader names the leader.
    // Error(invalid_argument) saying which entry is wrong and how.
    explicit CoordinatorClient(std::string url, CoordinatorClientOptions options = {});
    CoordinatorClient(CoordinatorClient&&) noexcept;
    CoordinatorClient& operator=(CoordinatorClient&&) noexcept;
    ~CoordinatorClient();

    // The address as given, normalized, and fixed for the client's life:
    // "http://HOST:PORT", "http://a:1,http://b:2", or "etcd://HOSTS/PREFIX"
    // without the query (so without file names of keys and passwords).
    // For messages and for building other URLs from.
    const std::string& url() const;
    // The replica this client asks next: the one that answered last, or
    // the one a replica named as the leader; "" with etcd:// before the
    // first call found the leader. It changes on failover.
    std::string leader_url() const;

    // The job's state (JSON text). 409 if it exists with other settings.
    std::string create_job(std::string_view name, const JobSettings& settings = {});
    std::string create_job_json(std::string_view name, std::string_view settings_json);
    std::string job_state(std::string_view name);
    // The job's settings alone, every field set (the server's defaults
    // filled in): a few hundred bytes, where job_state grows with the members.
    JobSettings job_settings(std::string_view name);
    void delete_job(std::string_view name);

    JoinReply join(std::string_view job, const MemberDescriptor& node);
    HeartbeatReply heartbeat(std::string_view job, std::string_view member, uint64_t generation,
                             const std::optional<HeartbeatMetrics>& metrics = std::nullopt);
    // failure not empty: the member failed (its launcher saw its process
    // die) and why: it is marked failed now, not after failure_timeout.
    void leave(std::string_view job, std::string_view member, std::string_view failure = {});
    // `member`, active in world `generation`, saw member `dead` of that
    // world die (Communicator::dead_ranks): the coordinator marks it failed
    // now (CoordinatorState rules in docs/coordinator.md, POST .../report).
    // 409 (Error(mismatch)) when `member` is not an active member of that
    // generation or `dead` was not in it.
    ReportReply report_dead(std::string_view job, std::string_view member, uint64_t generation, std::string_view dead,
                            std::string_view why = {});
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
    // Gives an outstanding lease back unread: its shard goes to the next
    // member that asks, without waiting for the lease to expire.
    ShardRelease shard_release(std::string_view job, std::string_view member, uint64_t lease);

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

// `text` checked as CoordinatorClient takes it, with "http://" put before
// each list entry that has no scheme ("h1:29400,h2:29400" ->
// "http://h1:29400,http://h2:29400"; etcd:// URLs stay as they are): what
// launchers and COHORT_COORDINATOR accept. Error(invalid_argument) saying
// what is wrong and where.
COHORT_API std::string normalize_coordinator_url(std::string_view text);

// A Store over one job's generation on a coordinator: what
// open_store("coordinator://HOST:PORT[,HOST:PORT]/JOB/GENERATION") and
// open_store("coordinator+etcd://ETCD:PORT[,ETCD:PORT]/PREFIX/JOB/GENERATION[?OPTIONS]")
// return.
COHORT_API std::shared_ptr<Store> coordinator_store(std::shared_ptr<CoordinatorClient> client, std::string job,
                                                    uint64_t generation);

}  // namespace cohort
