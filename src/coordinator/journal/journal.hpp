// Where the coordinator server's committed changes go before it answers:
// a data directory (DurableState) or etcd, through the leader of a set of
// replicas (replication/log_writer.hpp). The server holds each answer until
// the journal reports durable every change made before it.
#pragma once

#include "coordinator/state/state.hpp"

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>

namespace cohort::coord {

struct JournalStats {
    uint64_t last_seq = 0;      // the newest event's sequence number
    uint64_t snapshot_seq = 0;  // the newest snapshot's; 0 with none
    uint64_t events = 0;        // journaled by this process
    uint64_t bytes = 0;         // journal bytes written by this process
    uint64_t syncs = 0;         // fsyncs (etcd: transactions) by this process
    uint64_t snapshots = 0;     // written by this process
    bool unsynced = false;      // committed events wait for an fsync
    // Incremental snapshots (a data directory): job parts written and parts
    // of earlier snapshots named again, by this process; and what the
    // newest snapshot wrote, in bytes (its parts and its file).
    uint64_t parts_written = 0;
    uint64_t parts_reused = 0;
    uint64_t snapshot_bytes = 0;
};

class Journal {
public:
    using Clock = std::chrono::steady_clock;
    // From the journal's writer thread: every event up to `seq` is durable;
    // or, with `failure` set, the journal cannot take more and the server
    // must refuse changes (the error says why).
    using DurableCallback = std::function<void(uint64_t seq, std::exception_ptr failure)>;

    virtual ~Journal() = default;

    virtual CoordinatorState& state() = 0;
    // Takes the state's new events (take_events()) and queues them.
    virtual void commit(Clock::time_point now = Clock::now()) = 0;
    // The newest event queued; and what an answer must wait for (the newest
    // one other than a heartbeat).
    virtual uint64_t queued_seq() const = 0;
    virtual uint64_t answer_seq() const = 0;
    // A snapshot of the state, written by the writer thread.
    virtual void snapshot() = 0;
    // Waits until everything queued is durable (or failed).
    virtual void flush() = 0;
    virtual JournalStats stats() const = 0;
};

}  // namespace cohort::coord
