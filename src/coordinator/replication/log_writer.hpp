// The leader's journal in etcd: each commit's events (heartbeats aside) go
// to PREFIX/log/<seq> in a transaction that holds only while this replica
// still owns the leader key it created (fencing), so a deposed leader, one
// woken from a long SIGSTOP included, can never write.
//
// A writer thread does the etcd calls, batching whatever was committed
// while the previous transaction was in flight (group commit, as the data
// directory's writer does). While etcd cannot be reached it retries the
// same transaction until etcd answers: the change is then written, or the
// fence fails and the replica steps down.
//
// Snapshots (every `snapshot_every` entries) are a third thread's,
// cohort-etcd-snap, as the data directory's are (issue 19, defect 8): it
// keeps its own copy of the state, applies each entry once etcd holds it,
// and writes the snapshot when a marker reaches it, while the writer goes
// on writing entries and reporting them durable. A big state's snapshot
// (tens of MB of JSON in 1 MiB chunks) therefore holds no reply. Its
// chunks go under their own keys and the head moves in one fenced
// transaction that also deletes the log it covers, so a reader sees the
// old snapshot and its log or the new one and what follows, never a mix;
// entries the writer adds meanwhile are after the marker and stay. Markers
// that queue up while one is written collapse into the newest. A snapshot
// that fails fails the writer as an entry would (a deposed leader must stop
// either way).
#pragma once

#include "coordinator/journal/journal.hpp"
#include "coordinator/replication/etcd_log.hpp"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace cohort::coord::replication {

struct LogWriterOptions {
    // Log entries between snapshots; 0: only when snapshot() is called.
    uint64_t snapshot_every = 1000;
    // A log entry's value is cut here (etcd refuses requests above
    // --max-request-bytes, 1.5 MiB by default).
    std::size_t entry_bytes = 512 * 1024;
    std::size_t chunk_bytes = 1024 * 1024;
};

// The failure callback hears Error(mismatch) "deposed: ..." when the fence
// failed (another replica leads now), or etcd's own error otherwise.
class LogWriter final : public Journal {
public:
    // `state` is the server's (this object reads its events); `seq` the last
    // event etcd holds; `fence` the create revision of the leader key this
    // replica wrote. The writer starts at once.
    LogWriter(std::shared_ptr<etcd::EtcdClient> client, EtcdLayout layout, CoordinatorState& state, uint64_t seq,
              int64_t fence, LogWriterOptions options, DurableCallback on_durable);
    ~LogWriter() override;  // stops the thread; what is queued is dropped

    CoordinatorState& state() override { return state_; }
    void commit(Clock::time_point now = Clock::now()) override;
    uint64_t queued_seq() const override { return queued_seq_; }
    uint64_t answer_seq() const override { return queued_seq_; }
    void snapshot() override;
    void flush() override;
    JournalStats stats() const override;

    // False while a write is failing to reach etcd (it is being retried).
    bool etcd_reachable() const { return reachable_.load(); }
    // The last etcd error of a write being retried.
    std::string last_error() const;

private:
    struct Batch {
        std::vector<Event> events;  // numbered from `first`
        uint64_t first = 0;
        bool snapshot = false;
    };

    void run();
    // One fenced transaction, retried while etcd is unreachable; false once
    // stopping. Throws Error(mismatch) when the fence fails.
    bool write_fenced(etcd::Txn txn);
    void write_entries(const std::vector<Event>& events, uint64_t first);
    // From the snapshot thread.
    void run_snapshotter();
    void write_snapshot(uint64_t seq);
    // Both threads: marks the writer failed (the first failure is kept and
    // reported); false if it already was.
    bool fail(std::exception_ptr failure);

    std::shared_ptr<etcd::EtcdClient> client_;
    EtcdLayout layout_;
    CoordinatorState& state_;
    int64_t fence_;
    LogWriterOptions options_;
    DurableCallback on_durable_;
    uint64_t queued_seq_;  // the io thread's

    mutable std::mutex mutex_;
    std::condition_variable wake_, idle_;
    std::deque<Batch> queue_;
    bool busy_ = false;
    bool stop_ = false;
    bool failed_ = false;
    std::string last_error_;
    JournalStats stats_;
    std::atomic<bool> reachable_{true};
    uint64_t entries_since_snapshot_ = 0;  // the writer's
    // The snapshot thread's queue: entries etcd holds, in order, and
    // markers (snapshot after `seq`); guarded by mutex_.
    struct SnapshotItem {
        std::vector<Event> events;
        uint64_t marker = 0;  // 0: none
    };
    std::deque<SnapshotItem> snapshot_queue_;
    bool snapshot_busy_ = false;
    std::condition_variable snapshot_wake_;
    // The snapshot thread's copy of the state (every entry written
    // applied): the source of snapshots.
    CoordinatorState replica_;
    std::thread thread_;
    std::thread snapshot_thread_;
};

}  // namespace cohort::coord::replication
