// The coordinator's state changes, as events. CoordinatorState::apply() is
// the only thing that changes the state, so the journal of these events,
// replayed onto an empty state (or onto the snapshot taken before them),
// rebuilds it exactly. Each event records an outcome, not a request: ranks
// chosen, lease granted, member declared failed. Replaying needs no clock
// and no decision, only the same code.
#pragma once

#include "coordinator/state/answers.hpp"
#include "coordinator/state/dataset_plan.hpp"
#include "coordinator/state/member.hpp"
#include "coordinator/state/settings.hpp"
#include "coordinator/state/shard_queue.hpp"

#include <cohort/node.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

namespace cohort::coord::event {

struct JobCreated {
    std::string job;
    double time = 0;
    JobSettings settings;
};

struct JobDeleted {
    std::string job;
    double time = 0;
};

// A node joined (or joined again): it is waiting from now on.
struct MemberJoined {
    std::string job;
    double time = 0;
    Node node;
};

// A member failed, left or timed out; its shard leases go back to the queue.
struct MemberRemoved {
    std::string job;
    double time = 0;
    std::string member;
    MemberState state = MemberState::failed;  // failed, left or timed_out
    std::string reason;
};

struct RoundOpened {
    std::string job;
    double time = 0;
    std::string reason;
};

// The round formed generation `generation` with these node ids as ranks
// 0..n-1; members of the previous world not among them are stale. The new
// generation's key-value store starts empty.
struct RoundClosed {
    std::string job;
    double time = 0;
    uint64_t generation = 0;
    std::vector<std::string> ranks;
};

struct Heartbeat {
    std::string job;
    double time = 0;
    std::string member;
    std::optional<HeartbeatMetrics> metrics;
};

// Every store write: set, add (its result), compare_and_set (when it stored).
struct StoreSet {
    std::string job;
    double time = 0;
    uint64_t generation = 0;
    std::string key;
    std::string value;
};

struct StoreRemoved {
    std::string job;
    double time = 0;
    uint64_t generation = 0;
    std::string key;
};

struct DatasetRegistered {
    std::string job;
    double time = 0;
    DatasetPlan plan;
};

struct LeaseGranted {
    std::string job;
    double time = 0;
    Lease lease;  // lease.granted_at == time
};

struct LeaseCompleted {
    std::string job;
    double time = 0;
    std::string member;
    uint64_t lease = 0;
};

struct LeaseExpired {
    std::string job;
    double time = 0;
    uint64_t lease = 0;
};

// The member gave an outstanding lease back unread (a loader that stops
// with shards read ahead): its shard is handed out again at once.
struct LeaseReleased {
    std::string job;
    double time = 0;
    std::string member;
    uint64_t lease = 0;
};

// The coordinator started again on saved state: members and leases get a
// fresh start from `time`, so the outage does not count as their silence.
struct Resumed {
    double time = 0;
};

// The first answer to a change that carried an Idempotency-Key, journaled
// in the same commit as the change, so that a retry after a restart gets it
// again. Not a job's: keys are the coordinator's.
struct AnswerKept {
    double time = 0;
    std::string key;
    std::string fingerprint;  // the request it answers (method, target, body hash)
    KeptAnswer answer;
};

}  // namespace cohort::coord::event

namespace cohort::coord {

using Event =
    std::variant<event::JobCreated, event::JobDeleted, event::MemberJoined, event::MemberRemoved, event::RoundOpened,
                 event::RoundClosed, event::Heartbeat, event::StoreSet, event::StoreRemoved, event::DatasetRegistered,
                 event::LeaseGranted, event::LeaseCompleted, event::LeaseExpired, event::LeaseReleased,
                 event::Resumed, event::AnswerKept>;

// "member_joined", "round_closed", ...: the "type" field of its JSON.
std::string_view event_type(const Event& event);
double event_time(const Event& event);

// {"type": ..., "time": ..., "job": ..., fields}: one journal line.
boost::json::object to_json(const Event& event);
// Error(parse) "event: ..." naming the type and the field.
Event event_from_json(const boost::json::value& value);

}  // namespace cohort::coord
