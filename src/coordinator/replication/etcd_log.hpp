// The coordinator's state in etcd: where replicas keep it and how they read
// it back. This file owns the key layout under the prefix; the bytes of each
// record are the data directory's (coordinator/journal/record.hpp), so one
// format serves both.
//
// Keys under PREFIX (default "/cohort/coordinator"):
//
//   PREFIX/leader                 {"id":...,"url":...,"since":...}, attached
//                                 to the leader's lease: it goes when the
//                                 leader stops refreshing the lease.
//   PREFIX/log/<20-digit seq>     journal lines (record.hpp) for events
//                                 seq, seq+1, ..., written by the leader in
//                                 one fenced transaction each (log_writer.hpp).
//   PREFIX/snapshot/<20-digit S>/<6-digit i>
//                                 the snapshot record of the state after
//                                 event S, cut into chunks below etcd's
//                                 request limit.
//   PREFIX/snapshot-head          {"seq":S,"chunks":N}: the newest whole
//                                 snapshot. Written with the log keys up to S
//                                 deleted, in one transaction.
//
// Heartbeats are not replicated: a member's liveness and its step metrics
// live in the leader's memory, and a new leader gives every member a fresh
// failure timeout (docs/coordinator.md, "High availability").
#pragma once

#include "coordinator/state/state.hpp"
#include "etcd/client.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::coord::replication {

struct EtcdLayout {
    std::string prefix;  // no trailing '/'

    std::string leader() const { return prefix + "/leader"; }
    std::string log_prefix() const { return prefix + "/log/"; }
    std::string log_key(uint64_t seq) const;
    std::string snapshot_prefix() const { return prefix + "/snapshot/"; }
    std::string snapshot_chunk(uint64_t seq, uint32_t chunk) const;
    std::string snapshot_head() const { return prefix + "/snapshot-head"; }
};

// "/cohort/coordinator/" -> "/cohort/coordinator"; Error(invalid_argument)
// for an empty prefix or one without a leading '/'.
EtcdLayout layout_for(std::string_view prefix);

// The sequence number in a log key; 0 for a key that is not one.
uint64_t log_seq(const EtcdLayout& layout, std::string_view key);

// What a leader writes for `events`, numbered from `first`.
std::string log_value(uint64_t first, const std::vector<Event>& events);

// The state as etcd holds it at one revision: the newest snapshot and the
// log after it, replayed. `seq` is the last event applied.
struct LoadedState {
    CoordinatorState state;
    uint64_t seq = 0;
    int64_t revision = 0;  // etcd's revision of the read
};

// One consistent read of the whole prefix. Error(parse) naming the key for
// a damaged record or a gap in the log; Error(unavailable) when etcd cannot
// be reached before `deadline`.
LoadedState load_state(etcd::EtcdClient& client, const EtcdLayout& layout, etcd::Clock::time_point deadline);

// Applies the log entries that follow `seq`: false when the log no longer
// starts right after it (a snapshot replaced those entries), and the caller
// must load_state() instead. Throws as load_state().
bool catch_up(etcd::EtcdClient& client, const EtcdLayout& layout, CoordinatorState& state, uint64_t& seq,
              etcd::Clock::time_point deadline);

// Applies one log entry (its key and value) after `seq`. An entry at or
// before `seq` is a repeat (a write retried) and changes nothing: returns
// true. False when it does not start right after `seq` (a gap).
bool apply_entry(const EtcdLayout& layout, const etcd::KeyValue& kv, CoordinatorState& state, uint64_t& seq);

}  // namespace cohort::coord::replication
