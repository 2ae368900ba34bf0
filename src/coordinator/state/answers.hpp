// The first answers to requests that carried an Idempotency-Key, kept for a
// bounded time, count and size, so that a retry of a change whose answer was
// lost gets that answer again instead of the change being made twice
// (docs/coordinator.md, "Retries"). The table is part of the state: each
// answer is journaled as an event in the same commit as the change it
// answers, so a coordinator killed before its reply reached the client
// still knows the key when the retry arrives after the restart.
#pragma once

#include <boost/json/value.hpp>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>

namespace cohort::coord {

// An HTTP answer as kept: what the server sends again on a retry.
struct KeptAnswer {
    unsigned status = 200;
    std::string body;
    std::string content_type;
    std::string allow;  // the Allow header of a 405
    bool operator==(const KeptAnswer&) const = default;
};

struct AnswerLimits {
    double window = 600;          // seconds a key is kept; 0: none is
    std::size_t entries = 10000;  // 0: none is kept
    std::size_t bytes = 64u << 20;  // keys, fingerprints and bodies together
};

class AnswerTable {
public:
    AnswerTable() = default;
    explicit AnswerTable(AnswerLimits limits) : limits_(limits) {}

    struct Lookup {
        enum Kind { miss, replay, reused } kind = miss;
        const KeptAnswer* answer = nullptr;        // replay: the first answer
        const std::string* fingerprint = nullptr;  // reused: what the key was first used for
    };
    // What `key` answered within the window, as of `now` (seconds). Changes
    // nothing: an expired key is a miss, and goes at the next remember().
    Lookup find(const std::string& key, std::string_view fingerprint, double now) const;
    // Whether remember() would keep an answer of this size at all.
    bool keeps(const std::string& key, const std::string& fingerprint, const KeptAnswer& answer) const;
    // Keeps `answer` for `key` until now + window; the oldest keys go first
    // when the count or the bytes are over their limits.
    void remember(std::string key, std::string fingerprint, KeptAnswer answer, double now);
    // New limits; the oldest keys go at once if the new ones are lower.
    void set_limits(AnswerLimits limits);
    const AnswerLimits& limits() const { return limits_; }
    // Forgets every key (the journal failed: the answers kept may be of
    // changes that never became durable).
    void clear();

    std::size_t size() const { return entries_.size(); }
    std::size_t bytes() const { return bytes_; }

    // [{"key","fingerprint","status","body","content_type","allow","kept_at"}, ...]
    // oldest first; from_json() remembers them again in that order, under
    // the current limits. Error(parse) naming `where` and the field.
    boost::json::value to_json() const;
    void from_json(const boost::json::value& value, const std::string& where);

private:
    struct Entry {
        std::string fingerprint;
        KeptAnswer answer;
        double kept_at = 0;
        uint64_t serial = 0;  // which of order_'s records is this entry's
    };
    void expire(double now);
    void trim();
    void erase_oldest();
    static std::size_t cost(std::string_view key, std::string_view fingerprint, const KeptAnswer& answer);

    AnswerLimits limits_;
    std::unordered_map<std::string, Entry> entries_;
    // Keys in the order they were remembered, which is also the order they
    // expire in (one window for all). A key remembered again leaves a stale
    // record behind, told apart by its serial.
    std::deque<std::pair<uint64_t, std::string>> order_;
    uint64_t next_serial_ = 0;
    std::size_t bytes_ = 0;
};

}  // namespace cohort::coord
