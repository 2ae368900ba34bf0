// The elastic coordinator's server, hosted in this process: jobs, their
// rendezvous, heartbeats, key-value store and dataset shards behind an
// HTTP/1.1 + JSON API (docs/coordinator.md). A launcher or a test embeds it;
// cohort-coordinator (examples/) runs it on its own.
#pragma once

#include <cohort/export.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

namespace cohort {

struct COHORT_API CoordinatorOptions {
    CoordinatorOptions();

    // "127.0.0.1" by default: other machines reach it only when asked to.
    std::string host = "127.0.0.1";
    uint16_t port = 0;  // 0: any free port (see Coordinator::port())
    // Every request but GET / must carry "Authorization: Bearer <token>";
    // empty: none needed. Defaults to $COHORT_COORDINATOR_TOKEN.
    std::string token;
    std::size_t body_limit = 1024 * 1024;  // larger request bodies get 413
    // Where the journal and snapshots go; empty: state lives in memory only.
    std::filesystem::path data_dir;
    // How often silent members, due rounds, join timeouts and lease expiry
    // are looked for.
    std::chrono::milliseconds tick{100};
    // Connections. A connection waiting longer than idle_timeout for a
    // request (between keep-alive requests, or one arriving byte by byte)
    // is closed. At most max_connections are open (0: the open-file limit
    // less 128 for the journal and the embedding program, at most 65,536),
    // at most max_connections_per_client from one address (0: a quarter of
    // max_connections, at least 1). Above four fifths of max_connections,
    // idle connections are closed after crowded_idle_timeout instead, and
    // at the cap a newcomer takes the place of the longest idle one; what
    // still does not fit is refused, logged and counted in /metrics
    // (docs/coordinator.md, "Connections").
    std::size_t max_connections = 0;
    std::size_t max_connections_per_client = 0;
    std::chrono::milliseconds idle_timeout{60000};
    std::chrono::milliseconds crowded_idle_timeout{2000};
    // Raise the process's soft open-file limit (RLIMIT_NOFILE) to its hard
    // limit when the server starts, before max_connections is derived.
    bool raise_fd_limit = true;
    // Members held across all jobs, departed and failed ones included (each
    // is kept until its job is deleted); a join that would add one more is
    // refused with 503 (Error(unavailable)) naming the cap. A member joining
    // again is not counted twice. 0: no cap.
    std::size_t max_members = 100000;
    // Retries (docs/coordinator.md, "Retries"): the first answer to a
    // request that carries an Idempotency-Key is kept for idempotency_window
    // (at most idempotency_keys keys, the oldest forgotten first), and a
    // retry with the same key gets that answer instead of applying the
    // change again. With a data_dir the answers are journaled with their
    // changes, so this holds across a restart (kill -9 included). 0 for
    // either: nothing is kept.
    std::chrono::milliseconds idempotency_window{std::chrono::minutes(10)};
    std::size_t idempotency_keys = 10000;
    // High availability (docs/coordinator.md, "High availability"): with
    // etcd endpoints ("h1:2379,https://h2:2379"), the state lives in etcd
    // under etcd_prefix instead of in data_dir (which must then be empty),
    // and this server is one of several replicas: the elected leader
    // answers, the followers answer 503 naming the leader
    // (X-Cohort-Leader).
    std::string etcd;
    std::string etcd_prefix = "/cohort/coordinator";
    // TLS to etcd (PEM files) and etcd's own users.
    std::string etcd_ca_file, etcd_cert_file, etcd_key_file;
    std::string etcd_user, etcd_password;
    // The leader's etcd lease: a dead leader is replaced about this long
    // after its last refresh (etcd's minimum is about 1.5 s).
    std::chrono::seconds leader_ttl{2};
    // What followers tell clients to use for this replica; empty: url().
    std::string advertise_url;
    // This replica's name in the leader key; empty: HOSTNAME:PID.
    std::string replica_id;
    // A change not yet in etcd after this long is answered 503 (etcd is
    // unreachable); the client retries with the same Idempotency-Key.
    std::chrono::milliseconds etcd_write_timeout{2000};
    // HTTPS (docs/coordinator.md, "HTTPS"): with a certificate and its key
    // (PEM files, both or neither) the port speaks only HTTPS and url() is
    // https://. With tls_client_ca_file as well, every client must present
    // a certificate signed by that CA (mutual TLS). A bad file is an
    // Error(invalid_argument) from the constructor naming it.
    std::string tls_cert_file, tls_key_file, tls_client_ca_file;
    // Seconds on a clock that survives restarts; Unix time by default. Tests
    // inject their own to make time pass.
    std::function<double()> clock;
};

// Serves from construction until stop() or destruction, on one thread of
// its own. Error(unavailable) when the address cannot be bound.
class COHORT_API Coordinator {
public:
    explicit Coordinator(CoordinatorOptions options = {});
    Coordinator(const Coordinator&) = delete;
    Coordinator& operator=(const Coordinator&) = delete;
    ~Coordinator();  // stops and joins

    uint16_t port() const;
    std::string url() const;  // "http://127.0.0.1:PORT" (https:// with TLS)
    // Closes every connection and the listening socket; waits for the
    // server's thread. Idempotent.
    void stop();

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace cohort
