#include "coordinator/replication/log_writer.hpp"

#include "coordinator/journal/record.hpp"
#include "etcd/txn.hpp"

#include <cohort/error.hpp>

#include <boost/json.hpp>

#include <algorithm>

#include <pthread.h>

#include <fmt/format.h>

namespace cohort::coord::replication {

namespace {

// One attempt at a transaction; past it the call is retried (etcd's own
// failover across endpoints happens inside the attempt).
constexpr auto kAttempt = std::chrono::seconds(2);
constexpr auto kRetryPause = std::chrono::milliseconds(200);

bool is_heartbeat(const Event& e) {
    return std::holds_alternative<event::Heartbeat>(e);
}

}  // namespace

LogWriter::LogWriter(std::shared_ptr<etcd::EtcdClient> client, EtcdLayout layout, CoordinatorState& state,
                     uint64_t seq, int64_t fence, LogWriterOptions options, DurableCallback on_durable)
    : client_(std::move(client)),
      layout_(std::move(layout)),
      state_(state),
      fence_(fence),
      options_(options),
      on_durable_(std::move(on_durable)),
      queued_seq_(seq),
      replica_(state) {
    stats_.last_seq = seq;
    thread_ = std::thread([this] { run(); });
    ::pthread_setname_np(thread_.native_handle(), "cohort-etcd-log");
    snapshot_thread_ = std::thread([this] { run_snapshotter(); });
    ::pthread_setname_np(snapshot_thread_.native_handle(), "cohort-etcd-snap");
}

LogWriter::~LogWriter() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    snapshot_wake_.notify_all();
    thread_.join();
    snapshot_thread_.join();
}

void LogWriter::commit(Clock::time_point) {
    std::vector<Event> events = state_.take_events();
    std::erase_if(events, is_heartbeat);
    if (events.empty()) return;
    Batch batch{std::move(events), queued_seq_ + 1, false};
    {
        std::lock_guard lock(mutex_);
        if (failed_) {
            throw Error(Errc::unavailable,
                        fmt::format("this coordinator replica can no longer write to etcd: {}", last_error_));
        }
        queued_seq_ += batch.events.size();
        queue_.push_back(std::move(batch));
    }
    wake_.notify_one();
}

void LogWriter::snapshot() {
    {
        std::lock_guard lock(mutex_);
        if (failed_) return;
        queue_.push_back(Batch{{}, 0, true});
    }
    wake_.notify_one();
}

void LogWriter::flush() {
    std::unique_lock lock(mutex_);
    // Bounded: a clean stop while etcd is away must not hang. The queued
    // snapshots count too.
    idle_.wait_for(lock, std::chrono::seconds(5), [&] {
        return (queue_.empty() && !busy_ && snapshot_queue_.empty() && !snapshot_busy_) || failed_;
    });
}

JournalStats LogWriter::stats() const {
    std::lock_guard lock(mutex_);
    return stats_;
}

std::string LogWriter::last_error() const {
    std::lock_guard lock(mutex_);
    return last_error_;
}

bool LogWriter::write_fenced(etcd::Txn txn) {
    txn.if_create_revision(layout_.leader(), etcd::Compare::equal, fence_);
    for (;;) {
        {
            std::lock_guard lock(mutex_);
            if (stop_) return false;
        }
        try {
            const etcd::TxnResult result = client_->txn(txn, etcd::Clock::now() + kAttempt, etcd::Replay::safe);
            reachable_ = true;
            if (!result.succeeded) {
                throw Error(Errc::mismatch,
                            fmt::format("deposed: the leader key {} is no longer the one this replica created at "
                                        "revision {}; another replica leads now",
                                        layout_.leader(), fence_));
            }
            std::lock_guard lock(mutex_);
            ++stats_.syncs;
            return true;
        } catch (const Error& e) {
            if (e.code() != Errc::unavailable && e.code() != Errc::timeout) throw;
            // etcd is away: the same write is tried again until it answers.
            // Its outcome is then certain: written, or fenced.
            reachable_ = false;
            std::unique_lock lock(mutex_);
            last_error_ = e.what();
            if (wake_.wait_for(lock, kRetryPause, [&] { return stop_; })) return false;
        }
    }
}

void LogWriter::write_entries(const std::vector<Event>& events, uint64_t first) {
    std::size_t begin = 0;
    while (begin < events.size()) {
        std::string value;
        std::size_t end = begin;
        while (end < events.size()) {
            std::string line = journal::journal_line(first + end, events[end]);
            if (!value.empty() && value.size() + line.size() > options_.entry_bytes) break;
            value += line;
            ++end;
        }
        etcd::Txn txn;
        txn.then_put(layout_.log_key(first + begin), value);
        if (!write_fenced(std::move(txn))) return;
        {
            // Only what etcd holds reaches the snapshot thread's copy.
            std::lock_guard lock(mutex_);
            stats_.last_seq = first + end - 1;
            stats_.events += end - begin;
            stats_.bytes += value.size();
            snapshot_queue_.push_back(SnapshotItem{{events.begin() + begin, events.begin() + end}, 0});
        }
        snapshot_wake_.notify_one();
        ++entries_since_snapshot_;
        begin = end;
    }
}

// From the snapshot thread: the state after entry `seq`, which replica_
// holds now.
void LogWriter::write_snapshot(uint64_t seq) {
    const std::string text = journal::snapshot_text(seq, replica_.snapshot());
    uint32_t chunks = 0;
    for (std::size_t at = 0; at < text.size(); at += options_.chunk_bytes, ++chunks) {
        etcd::Txn txn;
        txn.then_put(layout_.snapshot_chunk(seq, chunks), std::string_view(text).substr(at, options_.chunk_bytes));
        if (!write_fenced(std::move(txn))) return;
    }
    // The head moves to the new snapshot and the log and snapshots it
    // replaces go, in one transaction: a reader sees one or the other.
    // Entries after `seq`, written meanwhile, stay.
    etcd::Txn head;
    head.then_put(layout_.snapshot_head(), boost::json::serialize(boost::json::object{{"seq", seq}, {"chunks", chunks}}))
        .then_delete_range(layout_.log_key(0), layout_.log_key(seq + 1))
        .then_delete_range(layout_.snapshot_prefix(), layout_.snapshot_chunk(seq, 0));
    if (!write_fenced(std::move(head))) return;
    std::lock_guard lock(mutex_);
    stats_.snapshot_seq = seq;
    ++stats_.snapshots;
}

// Applies what etcd holds to replica_ as it is written, and writes a
// snapshot for the newest marker of each wake-up (older ones are covered by
// it).
void LogWriter::run_snapshotter() {
    std::unique_lock lock(mutex_);
    for (;;) {
        snapshot_wake_.wait(lock, [&] { return stop_ || !snapshot_queue_.empty(); });
        if (stop_ || failed_) return;
        std::deque<SnapshotItem> items;
        items.swap(snapshot_queue_);
        snapshot_busy_ = true;
        lock.unlock();
        uint64_t newest = 0;
        for (const SnapshotItem& item : items) newest = std::max(newest, item.marker);
        std::exception_ptr failure;
        try {
            for (const SnapshotItem& item : items) {
                for (const Event& e : item.events) replica_.apply(e);
                if (item.marker != 0 && item.marker == newest) write_snapshot(item.marker);
            }
        } catch (...) {
            failure = std::current_exception();
        }
        if (failure && fail(failure) && on_durable_) on_durable_(0, failure);
        lock.lock();
        snapshot_busy_ = false;
        idle_.notify_all();
    }
}

bool LogWriter::fail(std::exception_ptr failure) {
    std::lock_guard lock(mutex_);
    if (failed_) return false;
    failed_ = true;
    queue_.clear();
    snapshot_queue_.clear();
    try {
        std::rethrow_exception(failure);
    } catch (const std::exception& e) {
        last_error_ = e.what();
    } catch (...) {
        last_error_ = "an unknown failure";
    }
    idle_.notify_all();
    return true;
}

void LogWriter::run() {
    std::unique_lock lock(mutex_);
    for (;;) {
        wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (stop_) return;
        std::deque<Batch> batches;
        batches.swap(queue_);
        busy_ = true;
        lock.unlock();
        std::exception_ptr failure;
        uint64_t durable = 0;
        try {
            // Consecutive commits go out together: one transaction per
            // entry, however many commits it holds.
            std::vector<Event> events;
            uint64_t first = 0;
            const auto write_events = [&] {
                if (events.empty()) return;
                write_entries(events, first);
                durable = first + events.size() - 1;
                events.clear();
            };
            // The snapshot thread writes it once the entries before it
            // reach its copy; the writer goes on at once.
            const auto mark_snapshot = [&] {
                entries_since_snapshot_ = 0;
                {
                    std::lock_guard marker_lock(mutex_);
                    if (stats_.last_seq == 0 || failed_) return;
                    snapshot_queue_.push_back(SnapshotItem{{}, stats_.last_seq});
                }
                snapshot_wake_.notify_one();
            };
            for (Batch& b : batches) {
                if (b.snapshot) {
                    write_events();
                    mark_snapshot();
                    continue;
                }
                if (events.empty()) first = b.first;
                std::move(b.events.begin(), b.events.end(), std::back_inserter(events));
            }
            write_events();
            if (options_.snapshot_every > 0 && entries_since_snapshot_ >= options_.snapshot_every) mark_snapshot();
        } catch (...) {
            failure = std::current_exception();
        }
        const bool first_failure = failure && fail(failure);
        lock.lock();
        const bool stopping = stop_;
        lock.unlock();
        // Told outside the lock: the callback posts to the server's thread.
        if (!stopping && durable > 0 && stats().last_seq >= durable && on_durable_) on_durable_(durable, nullptr);
        if (first_failure && on_durable_) on_durable_(0, failure);
        lock.lock();
        busy_ = false;
        idle_.notify_all();
        if (failed_) {
            // Nothing more is written; wait to be destroyed.
            wake_.wait(lock, [&] { return stop_; });
            return;
        }
    }
}

}  // namespace cohort::coord::replication
