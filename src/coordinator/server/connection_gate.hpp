// Which connections the coordinator takes, and which idle ones it lets go
// to make room: the cap on open connections, the cap per client address,
// and, once more than four fifths of the cap are open, a shorter wait for a
// request. The server asks; the gate counts. Idle means waiting for a
// request (a keep-alive between requests, or one still arriving byte by
// byte); a request being answered, or parked, is never idle.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::coord::server {

// tls_handshake: taken, but its TLS handshake failed or timed out.
enum class Refusal { max_connections, per_client, descriptors, tls_handshake };
inline constexpr int kRefusalCount = 4;
std::string_view to_string(Refusal why);

struct ConnectionLimits {
    std::size_t max_connections = 1024;
    std::size_t per_client = 256;
    std::chrono::milliseconds crowded_idle_timeout{2000};
    // Above this many open connections, idle ones go after crowded_idle_timeout.
    std::size_t crowded_at() const { return max_connections - max_connections / 5; }
};

class ConnectionGate {
public:
    using Clock = std::chrono::steady_clock;
    using Ticket = std::list<std::pair<uint64_t, Clock::time_point>>::iterator;

    explicit ConnectionGate(ConnectionLimits limits) : limits_(limits) {}

    const ConnectionLimits& limits() const { return limits_; }
    std::size_t open() const { return open_; }
    bool crowded() const { return open_ > limits_.crowded_at(); }

    // Takes a connection from `client` (its address) and counts it open, or
    // says why not (max_connections: see displace()). Refusals are not
    // counted here: the caller decides, then calls refused().
    std::optional<Refusal> admit(const std::string& client);
    void release(const std::string& client);
    void refused(Refusal why) { ++refusals_[static_cast<int>(why)]; }

    // Connection `id` waits for a request from `since`; stop_waiting() when
    // one arrives or the connection closes.
    Ticket start_waiting(uint64_t id, Clock::time_point since);
    void stop_waiting(Ticket ticket) { idle_.erase(ticket); }
    // While crowded: the idle connections that have waited longer than
    // crowded_idle_timeout, oldest first, for the caller to close (closing
    // one ends its wait).
    std::vector<uint64_t> shed(Clock::time_point now);
    // At the cap: the connection that has waited longest for a request,
    // for the caller to close so that a newcomer takes its place; none when
    // nothing is idle.
    std::optional<uint64_t> displace();
    // Out of descriptors: up to `n` of the longest idle connections, for
    // the caller to close; counted as displaced.
    std::vector<uint64_t> make_room(std::size_t n);
    // When the oldest idle connection will have waited crowded_idle_timeout.
    std::optional<Clock::time_point> next_shed() const;

    uint64_t refusals(Refusal why) const { return refusals_[static_cast<int>(why)]; }
    uint64_t shed_total() const { return shed_; }
    uint64_t displaced_total() const { return displaced_; }
    std::size_t idle() const { return idle_.size(); }

private:
    ConnectionLimits limits_;
    std::size_t open_ = 0;
    std::map<std::string, std::size_t, std::less<>> per_client_;
    std::list<std::pair<uint64_t, Clock::time_point>> idle_;  // oldest first
    std::array<uint64_t, kRefusalCount> refusals_{};
    uint64_t shed_ = 0, displaced_ = 0;
};

}  // namespace cohort::coord::server
