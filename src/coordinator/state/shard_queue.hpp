// Dynamic data shards: members lease the shards of a dataset plan one at a
// time, epoch after epoch. A lease that expires, whose member is gone or
// that its member gives back goes back to the queue; a shard is counted done exactly once, whoever reports
// first, so a slow worker reporting after its lease was handed on is never a
// double count.
#pragma once

#include "coordinator/state/dataset_plan.hpp"

#include <cohort/error.hpp>

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

namespace cohort::coord {

struct Lease {
    uint64_t id = 0;
    std::string member;
    uint32_t epoch = 0;
    uint64_t shard = 0;  // index into the plan's shards
    double granted_at = 0;
    double expiry = 0;

    bool operator==(const Lease&) const = default;
};

enum class DoneOutcome : int32_t {
    counted = 0,       // this report completed the shard
    counted_late = 1,  // the lease had expired (or its shard was handed on) but the shard was not done yet
    already_done = 2,  // someone reported the shard first; not counted again
};
std::string_view to_string(DoneOutcome outcome) noexcept;

struct ShardPick {
    uint32_t epoch = 0;
    uint64_t shard = 0;
};

struct EpochProgress {
    uint32_t epoch = 0;
    uint64_t total = 0, todo = 0, leased = 0, done = 0;
};

struct ShardCounters {
    uint64_t granted = 0;
    uint64_t requeued = 0;   // leases that expired or whose member went away
    uint64_t late = 0;       // reports counted after their lease was taken back
    uint64_t duplicate = 0;  // reports of a shard already done
    uint64_t released = 0;   // leases their member gave back unread (also counted in requeued)
};

class ShardQueue {
public:
    explicit ShardQueue(DatasetPlan plan);

    const DatasetPlan& plan() const { return plan_; }

    // The shard a member on `host` should get next, or nothing now (every
    // shard left is leased: ask again later) or ever (finished()). Shards
    // come from the lowest unfinished epoch, or the one after it once the
    // lowest has nothing left to hand out; returned shards first; among the
    // next few, one whose placement names `host` first.
    std::optional<ShardPick> pick(std::string_view host) const;
    bool finished() const { return first_open_ >= plan_.epochs; }

    uint64_t next_lease_id() const { return next_lease_; }
    const std::map<uint64_t, Lease>& leases() const { return leases_; }
    // A lease that was taken back (expired, member gone) and not reported.
    const Lease* find_revoked(uint64_t id) const;
    // How a report of lease `id` would count; for an id below
    // next_lease_id() that is neither outstanding nor revoked: already_done.
    DoneOutcome outcome_of(uint64_t id) const;
    std::vector<uint64_t> leases_of(std::string_view member) const;

    // Every epoch, started or not.
    std::vector<EpochProgress> progress() const;
    const ShardCounters& counters() const { return counters_; }

    // Applied from events only; Error(invalid_argument) for a lease that
    // does not fit the queue (a corrupt journal).
    void grant(const Lease& lease);
    DoneOutcome complete(uint64_t id);
    void requeue(uint64_t id);
    // requeue() of a lease its member gave back; Error(invalid_argument)
    // when `member` does not hold it.
    void release(uint64_t id, std::string_view member);
    // Every outstanding lease runs at least lease_duration from `time`.
    void extend_leases(double time);

    boost::json::object to_json() const;
    static ShardQueue from_json(const boost::json::value& value, std::string_view where, Errc code = Errc::parse);

private:
    enum class Status : uint8_t { todo = 0, leased = 1, done = 2 };
    struct Epoch {
        bool complete = false;
        std::vector<Status> status;     // by shard index
        std::vector<uint64_t> order;    // shard indices in hand-out order (not saved: it follows from the plan)
        uint64_t cursor = 0;            // todo shards are at order[cursor..] or in `returned`
        std::deque<uint64_t> returned;  // back in the queue, oldest first; may hold stale entries
        uint64_t leased = 0, done = 0;
    };

    std::vector<uint64_t> make_order(uint32_t epoch) const;
    bool is_local(uint64_t shard, std::string_view host) const;
    std::optional<uint64_t> pick_in(const Epoch& epoch, std::string_view host) const;
    uint64_t pick_fresh(const std::vector<uint64_t>& order, std::string_view host) const;
    bool shard_done(uint32_t epoch, uint64_t shard) const;
    void mark_done(uint32_t epoch, uint64_t shard);
    void normalise(Epoch& epoch);

    DatasetPlan plan_;
    bool placed_ = false;        // some shard names hosts
    std::vector<Epoch> epochs_;  // the started ones, by number
    uint32_t first_open_ = 0;    // the lowest epoch not complete
    uint64_t next_lease_ = 1;
    std::map<uint64_t, Lease> leases_;   // outstanding
    std::map<uint64_t, Lease> revoked_;  // taken back, report still possible
    ShardCounters counters_;
};

}  // namespace cohort::coord
