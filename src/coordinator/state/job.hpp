// One job's state: its members, the current world and the round that may
// replace it, the generation's key-value store and the dataset's shards.
// Job only answers questions and applies events; CoordinatorState decides
// which events happen (state.hpp).
#pragma once

#include "coordinator/state/events.hpp"
#include "coordinator/state/history.hpp"
#include "coordinator/state/job_activity.hpp"
#include "coordinator/state/kv_store.hpp"
#include "coordinator/state/member.hpp"
#include "coordinator/state/settings.hpp"
#include "coordinator/state/shard_queue.hpp"
#include "coordinator/state/world.hpp"
#include "health/job_health.hpp"
#include "health/tracker.hpp"
#include "health/window.hpp"

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

namespace cohort::coord {

struct RoundRecord {
    uint64_t generation = 0;
    double opened_at = 0;
    double closed_at = 0;
    uint32_t world_size = 0;
    std::string reason;  // why the round opened

    bool operator==(const RoundRecord&) const = default;
};

enum class StoreOp : int32_t { set = 0, get = 1, add = 2, compare_and_set = 3, wait = 4, remove = 5 };
inline constexpr int kStoreOpCount = 6;
std::string_view to_string(StoreOp op) noexcept;

class Job {
public:
    // How many closed rounds the job remembers for its state page.
    static constexpr std::size_t kRoundHistory = 32;

    Job(std::string name, JobSettings settings, double created_at);

    const std::string& name() const { return name_; }
    const JobSettings& settings() const { return settings_; }
    double created_at() const { return created_at_; }
    uint64_t generation() const { return world_.generation; }
    const World& world() const { return world_; }
    // Open from creation until the first world forms, and again from an
    // event that needs a new world (failure, leave, late joiner) until it forms.
    bool round_open() const { return round_open_; }
    const std::string& round_reason() const { return round_reason_; }
    double round_opened_at() const { return round_opened_at_; }
    // A round that is not full closes last_call after this: the latest join
    // or the moment the round opened.
    double last_arrival() const { return last_arrival_; }
    // "forming" (no world yet), "rendezvous" (a round is open) or "running".
    std::string_view phase() const;

    const std::map<std::string, Member, std::less<>>& members() const { return members_; }
    const Member* find_member(std::string_view id) const;
    uint32_t count(MemberState state) const { return counts_[static_cast<std::size_t>(state)]; }
    // Waiting nodes that are not survivors: they count against the waiting room.
    uint32_t newcomers_waiting() const { return count(MemberState::waiting) - survivors_waiting_; }
    // A waiting member that is in the current world: it joined again for
    // the next round and keeps its place in the rank order.
    bool is_survivor(const Member& member) const;

    const KeyValueStore& store() const { return store_; }
    const ShardQueue* shards() const { return shards_ ? &*shards_ : nullptr; }
    const std::deque<RoundRecord>& rounds() const { return rounds_; }

    // The ranks of the round that can close at `now`: at largest_world()
    // waiting nodes, or with min_nodes or more once last_call has passed
    // since last_arrival(). Survivors come first, by their old rank; then
    // newcomers by arrival; those past the world size keep waiting.
    std::optional<std::vector<std::string>> closing_round(double now) const;
    // When the open round will close if nobody else comes (or now, if full);
    // empty while fewer than min_nodes wait.
    std::optional<double> closes_at() const;
    // A running job whose waiting nodes would make a larger world.
    bool can_grow() const;

    // The only changes, each from its event; Error(invalid_argument) for an
    // event that does not fit (a corrupt journal).
    void apply(const event::MemberJoined& e);
    void apply(const event::MemberRemoved& e);
    void apply(const event::RoundOpened& e);
    void apply(const event::RoundClosed& e);
    void apply(const event::Heartbeat& e);
    void apply(const event::StoreSet& e);
    void apply(const event::StoreRemoved& e);
    void apply(const event::DatasetRegistered& e);
    void apply(const event::LeaseGranted& e);
    void apply(const event::LeaseCompleted& e);
    void apply(const event::LeaseExpired& e);
    void apply(const event::LeaseReleased& e);
    void apply(const event::Resumed& e);

    // Everything, exactly (the store-op counters aside).
    boost::json::object snapshot() const;
    static Job from_snapshot(const boost::json::value& value, std::string_view where);
    // GET /v1/jobs/{id}: the state as people read it, ages relative to `now`.
    boost::json::object view(double now) const;
    // Its entry in GET /v1/jobs: {"name", "phase", "generation", "world_size", "members"}.
    boost::json::object summary() const;

    // Straggler scores and hang detection over the active members'
    // heartbeat windows (src/health). Soft state: derived from heartbeats,
    // rebuilt by the ones after a restart, never saved.
    void evaluate_health(double now);
    const health::JobHealth& health() const { return health_; }
    const health::NodeWindow* window(std::string_view member) const;

    // The recent past the dashboard draws (history.hpp): soft state too.
    // evaluate_health() adds a point once a second.
    const JobHistory& history() const { return history_; }

    // Store calls served since this process started: monitoring only, not
    // state (reads count too, and they are not events).
    mutable std::array<uint64_t, kStoreOpCount> store_ops{};
    // Rounds and steps seen live by this process (CoordinatorState::emit):
    // monitoring only, like store_ops.
    JobActivity activity;

private:
    Member& member(std::string_view id, std::string_view event);
    // Keeps counts_ and survivors_waiting_ in step: -1 before a member
    // changes, +1 after.
    void tally(const Member& m, int sign);
    void tally_all();
    // history_sample.cpp: a point per active member and one for the job.
    void sample_history(double now);

    std::string name_;
    JobSettings settings_;
    double created_at_ = 0;
    std::map<std::string, Member, std::less<>> members_;
    World world_;
    bool round_open_ = true;
    std::string round_reason_ = "job created";
    double round_opened_at_ = 0;
    double last_arrival_ = 0;
    std::deque<RoundRecord> rounds_;
    KeyValueStore store_;
    std::optional<ShardQueue> shards_;
    // Derived from members_ (not saved): joins stay O(log n) with 10,000 members.
    std::array<uint32_t, kMemberStateCount> counts_{};
    uint32_t survivors_waiting_ = 0;
    std::map<std::string, health::NodeWindow, std::less<>> windows_;
    health::Tracker tracker_;
    health::JobHealth health_;
    JobHistory history_;
};

}  // namespace cohort::coord
