// Idempotency keys: the first answer to each request that carried an
// Idempotency-Key, kept for a bounded time, count and size, so that a retry
// of a change whose answer was lost gets that answer again instead of
// applying the change a second time (docs/coordinator.md, "Retries").
#pragma once

#include "coordinator/server/http_reply.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace cohort::coord::server {

// The header a client names its request with, and the longest key taken.
inline constexpr std::string_view kIdempotencyHeader = "Idempotency-Key";
inline constexpr std::size_t kMaxIdempotencyKey = 128;

// The key as sent, checked: 1 to 128 visible ASCII characters, else
// Error(invalid_argument) naming the rule.
std::string checked_idempotency_key(std::string_view value);

// What a key was first used for: the method, the target and a hash of the
// body. A key sent again with another request is the client's mistake.
std::string request_fingerprint(std::string_view method, std::string_view target, std::string_view body);

struct IdempotencyLimits {
    std::chrono::milliseconds window{std::chrono::minutes(10)};  // 0: nothing is kept
    std::size_t entries = 10000;                                 // 0: nothing is kept
    std::size_t bytes = 64u << 20;                               // answers' bodies, together
};

class IdempotencyTable {
public:
    using Clock = std::chrono::steady_clock;

    explicit IdempotencyTable(IdempotencyLimits limits) : limits_(limits) {}

    struct Lookup {
        enum Kind { miss, replay, reused } kind = miss;
        const Response* response = nullptr;        // replay: the first answer
        const std::string* fingerprint = nullptr;  // reused: what the key was first used for
    };
    // What `key` already answered within the window.
    Lookup find(const std::string& key, std::string_view fingerprint, Clock::time_point now);
    // Keeps `response` as the answer to `key` until now + window; the oldest
    // keys go first when the count or the bytes are over their limits.
    void remember(std::string key, std::string fingerprint, Response response, Clock::time_point now);
    // Forgets every key (the journal failed: the answers kept may not be
    // durable).
    void clear();

    std::size_t size() const { return entries_.size(); }
    std::size_t bytes() const { return bytes_; }

private:
    struct Entry {
        std::string fingerprint;
        Response response;
        Clock::time_point expires;
        uint64_t serial = 0;  // which of order_'s records is this entry's
    };
    void expire(Clock::time_point now);
    void erase_oldest();
    static std::size_t cost(const std::string& key, const Entry& entry);

    IdempotencyLimits limits_;
    std::unordered_map<std::string, Entry> entries_;
    // Keys in the order they were remembered, which is also the order they
    // expire in (one window for all). A key remembered again leaves a stale
    // record behind, told apart by its serial.
    std::deque<std::pair<uint64_t, std::string>> order_;
    uint64_t next_serial_ = 0;
    std::size_t bytes_ = 0;
};

}  // namespace cohort::coord::server
