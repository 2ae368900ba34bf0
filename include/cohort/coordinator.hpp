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
    std::string url() const;  // "http://127.0.0.1:PORT"
    // Closes every connection and the listening socket; waits for the
    // server's thread. Idempotent.
    void stop();

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace cohort
