// A job's recent past, bounded, for the dashboard and for tools that draw
// it (GET /v1/jobs/{job}/history): a point per member per second (step,
// step time, samples/s, straggler score, GPU), a point per job per second
// (percentiles, throughput, shard progress), the rounds with who joined,
// failed and left, and the members' joins and removals.
//
// Soft state, like the health windows: built from the events applied and
// the health evaluations since this process started, never saved. After a
// restart the rounds come back from the snapshot's round records (without
// names) and the rest starts empty.
//
// Bounds (HistoryLimits): memory stays under about 12 MB per job whatever
// the number of members, and every ring drops its oldest entry first.
#pragma once

#include "coordinator/state/member.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/object.hpp>

namespace cohort::coord {

struct HistoryLimits {
    // Seconds between two points of a member, and of the job.
    static constexpr double kInterval = 1.0;
    // Points per member: kMemberPoints while the job has up to
    // kPointBudget / kMemberPoints members with points (2,000), fewer
    // beyond so that all of them together stay within kPointBudget (24
    // each at 10,000), never fewer than kMinMemberPoints.
    static constexpr std::size_t kMemberPoints = 120;
    static constexpr std::size_t kMinMemberPoints = 8;
    static constexpr std::size_t kPointBudget = 240'000;  // about 11.5 MB of 48-byte points
    // Members with points at most; beyond, the one heard from longest ago
    // is dropped. A member silent for kJobPoints * kInterval is dropped too.
    static constexpr std::size_t kMaxMembers = 30'000;
    static constexpr std::size_t kJobPoints = 1'800;  // 30 minutes
    static constexpr std::size_t kRounds = 64;
    static constexpr std::size_t kEvents = 512;
    // Member ids a round names per list (joined, failed, left); the counts
    // are always whole.
    static constexpr std::size_t kNamed = 16;
    // GET .../history?members=slowest&limit=N: N at most.
    static constexpr std::size_t kMaxLimit = 10'000;
};

inline constexpr float kNoValue = std::numeric_limits<float>::quiet_NaN();

// One second of a member. Timings are means over the steps that ended since
// the previous point; NaN: nothing reported.
struct MemberPoint {
    double time = 0;
    uint64_t step = 0;  // the highest step so far
    float step_time = kNoValue;
    float samples_per_sec = kNoValue;
    float score = kNoValue;  // relative straggler score (1: as fast as the median)
    bool straggler = false;
    // Over the member's GPUs: memory summed (bytes), utilisation averaged
    // (percent), the hottest temperature (Celsius).
    float gpu_memory_used = kNoValue;
    float gpu_memory_total = kNoValue;
    float gpu_utilization = kNoValue;
    float gpu_temperature = kNoValue;
};

// One second of the job, over its active members.
struct JobPoint {
    double time = 0;
    uint32_t active = 0, waiting = 0;
    float step_time_p50 = kNoValue, step_time_p90 = kNoValue, step_time_max = kNoValue;
    float samples_per_sec = kNoValue;  // summed
    uint64_t shards_todo = 0, shards_leased = 0, shards_done = 0;
    uint32_t stragglers = 0;
    bool hung = false;
};

// Up to HistoryLimits::kNamed ids and how many there were.
struct NamedCount {
    std::vector<std::string> ids;
    uint32_t count = 0;
    void add(std::string_view id);
};

struct RoundEntry {
    uint64_t generation = 0;  // the world it formed; 0 while open
    double opened_at = 0;
    std::optional<double> closed_at;
    std::string reason;
    uint32_t world_size = 0;
    NamedCount joined;  // in the new world, not in the one before
    NamedCount failed;  // failed while this round was open or led up to it
    NamedCount left;    // left (or timed out) likewise
};

enum class MemberEventKind { joined, failed, left, timed_out, resumed };
std::string_view to_string(MemberEventKind kind) noexcept;

struct MemberEvent {
    double time = 0;
    MemberEventKind kind = MemberEventKind::joined;
    std::string member;  // empty for `resumed` (the coordinator restarted)
    std::string reason;
};

// What GET .../history asks for.
struct HistoryQuery {
    enum class Members { all, none, slowest };
    double since = 0;  // only what happened after it (rounds: all)
    Members members = Members::all;
    std::size_t limit = 10;  // for slowest
};

// Error(invalid_argument) naming the parameter and what it takes.
HistoryQuery history_query(const std::map<std::string, std::string, std::less<>>& query, std::string_view where);

class JobHistory {
public:
    explicit JobHistory(double created_at);

    // ---- from the job's events
    void joined(std::string_view member, double time);
    void removed(std::string_view member, MemberState state, std::string_view reason, double time);
    void round_opened(std::string_view reason, double time);
    // `previous`: the ids of the world it replaces.
    void round_closed(uint64_t generation, std::span<const std::string> ranks, std::span<const std::string> previous,
                      double time);
    void resumed(double time);
    // A round record of a snapshot: what is known of a round from before a restart.
    void restore_round(uint64_t generation, double opened_at, double closed_at, uint32_t world_size,
                       std::string_view reason);

    // ---- sampling
    // A point is due kInterval after the last one.
    bool due(double now) const { return now >= last_sample_ + HistoryLimits::kInterval; }
    void add(std::string_view member, const MemberPoint& point);
    // The job's point; ends the sample (drops members gone too long, trims
    // rings to the budget).
    void add(const JobPoint& point);

    // ---- reading
    const std::deque<JobPoint>& series() const { return series_; }
    const std::deque<RoundEntry>& rounds() const { return rounds_; }
    const RoundEntry& open_round() const { return open_; }
    bool round_is_open() const { return round_open_; }
    const std::deque<MemberEvent>& events() const { return events_; }
    const std::map<std::string, std::deque<MemberPoint>, std::less<>>& members() const { return members_; }
    std::size_t member_capacity() const { return capacity_; }

    // The JSON GET .../history serves (history_json.cpp).
    boost::json::object to_json(const HistoryQuery& query, double now) const;

private:
    void event(MemberEventKind kind, std::string_view member, std::string_view reason, double time);

    double last_sample_ = -std::numeric_limits<double>::infinity();
    std::deque<JobPoint> series_;
    std::deque<RoundEntry> rounds_;  // closed, oldest first
    RoundEntry open_;                // the round open now, or the next one's removals so far
    bool round_open_ = true;
    std::deque<MemberEvent> events_;
    std::map<std::string, std::deque<MemberPoint>, std::less<>> members_;
    std::size_t capacity_ = HistoryLimits::kMemberPoints;
};

}  // namespace cohort::coord
