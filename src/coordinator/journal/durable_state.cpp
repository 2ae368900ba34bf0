// DurableState: commits to the journal, batched fsync, the writer thread's
// group commit, snapshots and the retention of old files.
#include "coordinator/journal/durable_state.hpp"

#include "coordinator/journal/record.hpp"
#include "coordinator/journal/recovery.hpp"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <variant>

#include <pthread.h>

#include <fmt/format.h>

namespace cohort::coord {

namespace fs = std::filesystem;

namespace {

// Runs `f`; an Error(io) marks the journal broken before it propagates.
template <class F>
void guarded(bool& broken, F&& f) {
    try {
        f();
    } catch (...) {
        broken = true;
        throw;
    }
}

}  // namespace

// One commit's events, or a snapshot of the state after event `seq`.
struct DurableState::Batch {
    std::vector<Event> events;
    bool snapshot = false;
    uint64_t seq = 0;
};

// The snapshot thread (cohort-snapshot). It keeps its own copy of the state
// by applying every event the writer has made durable, in order, and writes
// a snapshot when a marker reaches it: a marker at S follows event S in the
// queue, so the copy is then exactly the state after event S. The writer
// started journal-S before queueing the marker, so it appends and answers
// while the snapshot is built and written; a snapshot that is slow, or that
// fails, delays no reply.
struct DurableState::Snapshotter {
    // Events, in the writer's order, or a marker: snapshot after `seq`.
    struct Item {
        std::vector<Event> events;
        std::optional<uint64_t> marker;
    };
    std::mutex mutex;
    std::condition_variable wake;  // the thread: work, or stop
    std::condition_variable idle;  // flush(): every queued snapshot written
    std::deque<Item> queue;
    bool busy = false;
    bool stop = false;
    CoordinatorState replica;
    journal::IncrementalSnapshots parts;  // of the replica
    std::thread thread;
};

struct DurableState::Writer {
    std::mutex mutex;
    std::condition_variable wake;  // the writer: work, or stop
    std::condition_variable idle;  // flush(): the queue is drained
    std::deque<Batch> queue;
    bool busy = false;
    bool stop = false;
    std::exception_ptr failure;
    DurableCallback on_durable;
    Snapshotter snapshotter;
    std::thread thread;
};

DurableState DurableState::open(const fs::path& dir, JournalOptions options, std::function<void(std::string)> warn) {
    if (options.keep < 1) {
        throw Error(Errc::invalid_argument, "journal options: keep must be at least 1 (the newest snapshot)");
    }
    if (options.fsync_interval.count() < 0) {
        throw Error(Errc::invalid_argument,
                    fmt::format("journal options: fsync_interval {} ms is negative", options.fsync_interval.count()));
    }
    journal::Recovered recovered = journal::recover(dir, warn);
    DurableState out;
    out.dir_ = dir;
    out.options_ = options;
    out.warn_ = std::move(warn);
    out.state_ = std::move(recovered.state);
    out.stats_.last_seq = recovered.last_seq;
    out.stats_.snapshot_seq = recovered.snapshot.value_or(0);
    out.has_snapshot_ = recovered.snapshot.has_value();
    // Appends continue the newest journal; after a crash between writing a
    // snapshot and starting its journal, the journal is started here.
    out.segment_base_ = recovered.last_journal.value_or(recovered.last_seq);
    const bool fresh = !recovered.last_journal;
    out.segment_ = journal::AppendFile(journal::journal_path(dir, out.segment_base_));
    if (fresh) journal::sync_directory(dir);
    // What was replayed may still be only in the page cache (the last run was
    // killed before its fsync): on disk first, then recorded as durable.
    out.segment_.sync();
    out.record_manifest(recovered.last_seq);
    out.queued_seq_ = out.answer_seq_ = out.stats_.last_seq;
    out.queued_snapshot_seq_ = out.stats_.snapshot_seq;
    out.queued_snapshot_ = out.has_snapshot_;
    return out;
}

// Only before start_writer(): the writer thread holds `this`.
DurableState::DurableState(DurableState&& other) noexcept
    : dir_(std::move(other.dir_)),
      options_(other.options_),
      warn_(std::move(other.warn_)),
      state_(std::move(other.state_)),
      segment_(std::move(other.segment_)),
      segment_base_(other.segment_base_),
      manifest_durable_(other.manifest_durable_),
      has_snapshot_(other.has_snapshot_),
      parts_(std::move(other.parts_)),
      unsynced_since_(std::exchange(other.unsynced_since_, std::nullopt)),
      broken_(other.broken_),
      stats_(other.stats_),
      queued_seq_(other.queued_seq_),
      answer_seq_(other.answer_seq_),
      queued_snapshot_seq_(other.queued_snapshot_seq_),
      queued_snapshot_(other.queued_snapshot_) {}

DurableState& DurableState::operator=(DurableState&& other) noexcept {
    if (this != &other) {
        stop_writer();
        sync_quietly();
        dir_ = std::move(other.dir_);
        options_ = other.options_;
        warn_ = std::move(other.warn_);
        state_ = std::move(other.state_);
        segment_ = std::move(other.segment_);
        segment_base_ = other.segment_base_;
        manifest_durable_ = other.manifest_durable_;
        has_snapshot_ = other.has_snapshot_;
        parts_ = std::move(other.parts_);
        unsynced_since_ = std::exchange(other.unsynced_since_, std::nullopt);
        broken_ = other.broken_;
        stats_ = other.stats_;
        queued_seq_ = other.queued_seq_;
        answer_seq_ = other.answer_seq_;
        queued_snapshot_seq_ = other.queued_snapshot_seq_;
        queued_snapshot_ = other.queued_snapshot_;
    }
    return *this;
}

DurableState::~DurableState() {
    stop_writer();
    sync_quietly();
}

void DurableState::start_writer(DurableCallback on_durable) {
    if (writer_) return;
    sync();
    writer_ = std::make_unique<Writer>();
    writer_->on_durable = std::move(on_durable);
    writer_->snapshotter.replica = state_;
    // The replica is state_ as the last snapshot left it plus the events
    // noted since: the same parts stay valid for it.
    writer_->snapshotter.parts = std::exchange(parts_, {});
    writer_->snapshotter.thread = std::thread([this] { run_snapshotter(); });
    ::pthread_setname_np(writer_->snapshotter.thread.native_handle(), "cohort-snapshot");
    writer_->thread = std::thread([this] { run_writer(); });
    ::pthread_setname_np(writer_->thread.native_handle(), "cohort-journal");
}

// Both threads drain their queues before they stop, the writer first: a
// clean stop loses nothing and writes the snapshots it was asked for.
void DurableState::stop_writer() noexcept {
    if (!writer_) return;
    {
        std::lock_guard lock(writer_->mutex);
        writer_->stop = true;
    }
    writer_->wake.notify_one();
    writer_->thread.join();
    Snapshotter& s = writer_->snapshotter;
    {
        std::lock_guard lock(s.mutex);
        s.stop = true;
    }
    s.wake.notify_one();
    s.thread.join();
    writer_.reset();
}

void DurableState::to_snapshotter(std::vector<Event> events, std::optional<uint64_t> marker) {
    Snapshotter& s = writer_->snapshotter;
    {
        std::lock_guard lock(s.mutex);
        s.queue.push_back({std::move(events), marker});
    }
    s.wake.notify_one();
}

void DurableState::queue(Batch batch) {
    uint64_t answer = answer_seq_;
    for (std::size_t i = 0; i < batch.events.size(); ++i)
        if (!std::holds_alternative<event::Heartbeat>(batch.events[i])) answer = queued_seq_ + i + 1;
    {
        std::lock_guard lock(writer_->mutex);
        if (writer_->failure) throw broken_error();
        writer_->queue.push_back(std::move(batch));
    }
    answer_seq_ = answer;
    writer_->wake.notify_one();
}

// Group commit: everything queued while the last batch was written and
// fsynced goes out in one write(2) and one fsync.
void DurableState::run_writer() {
    Writer& w = *writer_;
    std::unique_lock lock(w.mutex);
    for (;;) {
        w.wake.wait(lock, [&] { return w.stop || !w.queue.empty(); });
        if (w.queue.empty()) return;  // stopping, and drained
        std::deque<Batch> batches;
        batches.swap(w.queue);
        w.busy = true;
        lock.unlock();
        std::exception_ptr failure;
        uint64_t durable = 0;
        try {
            std::vector<Event> events;
            // Only events on disk reach the snapshot thread: a snapshot
            // never holds what the journal lacks.
            const auto flush_events = [&] {
                if (events.empty()) return;
                append(events, Clock::now());
                sync_segment();
                durable = stats_.last_seq;
                to_snapshotter(std::move(events), std::nullopt);
                events.clear();
            };
            for (Batch& b : batches) {
                if (b.snapshot) {
                    flush_events();
                    start_journal(b.seq);
                    to_snapshotter({}, b.seq);
                } else {
                    std::move(b.events.begin(), b.events.end(), std::back_inserter(events));
                }
            }
            flush_events();
        } catch (...) {
            failure = std::current_exception();
        }
        // Told outside the lock: the callback may take its own.
        if (durable > 0 && w.on_durable) w.on_durable(durable, nullptr);
        if (failure) {
            // Recorded before anyone hears of it: a commit made after the
            // news (the server's next request) must throw, not be queued and
            // answered as if it could still become durable.
            lock.lock();
            w.failure = failure;
            w.queue.clear();  // never reported durable
            lock.unlock();
            if (w.on_durable) w.on_durable(0, failure);
        }
        lock.lock();
        w.busy = false;
        w.idle.notify_all();
    }
}

// A snapshot of the state after event `seq` for each marker; of several
// markers taken together only the newest is written (the journals hold
// the events between them until a later snapshot replaces them).
void DurableState::run_snapshotter() {
    Snapshotter& s = writer_->snapshotter;
    std::unique_lock lock(s.mutex);
    for (;;) {
        s.wake.wait(lock, [&] { return s.stop || !s.queue.empty(); });
        if (s.queue.empty()) return;  // stopping, and drained
        std::deque<Snapshotter::Item> items;
        items.swap(s.queue);
        s.busy = true;
        lock.unlock();
        std::optional<uint64_t> newest;
        for (const Snapshotter::Item& item : items)
            if (item.marker) newest = item.marker;
        for (Snapshotter::Item& item : items) {
            for (const Event& e : item.events) {
                s.replica.apply(e);
                s.parts.changed(e);
            }
            if (item.marker && item.marker == newest) write_snapshot_file(*item.marker, s.replica, s.parts);
        }
        lock.lock();
        s.busy = false;
        s.idle.notify_all();
    }
}

// From the snapshot thread. A failure is a warning: nothing is lost, since
// the journals since the last good snapshot stay until a later one is
// written, and the next marker tries again.
void DurableState::write_snapshot_file(uint64_t seq, const CoordinatorState& state,
                                       journal::IncrementalSnapshots& parts) noexcept {
    journal::SnapshotWrite written;
    try {
        written = parts.write(dir_, seq, state);
    } catch (const std::exception& e) {
        if (warn_) {
            warn_(fmt::format("cannot write the snapshot after event {} ({}); the journals before it are kept and "
                              "the next snapshot tries again",
                              seq, e.what()));
        }
        return;
    }
    {
        std::lock_guard lock(writer_->mutex);
        count_snapshot(seq, written);
    }
    prune();
}

void DurableState::flush() {
    if (!writer_) return sync();
    {
        std::unique_lock lock(writer_->mutex);
        writer_->idle.wait(lock, [&] { return writer_->queue.empty() && !writer_->busy; });
        if (writer_->failure) throw broken_error();
    }
    Snapshotter& s = writer_->snapshotter;
    std::unique_lock lock(s.mutex);
    s.idle.wait(lock, [&] { return s.queue.empty() && !s.busy; });
}

void DurableState::sync_quietly() noexcept {
    if (broken_ || !segment_.is_open() || !unsynced_since_) return;
    try {
        segment_.sync();
        if (manifest_durable_ <= segment_base_ && stats_.last_seq > segment_base_) record_manifest(stats_.last_seq);
    } catch (...) {
        // Nobody to tell: the events were written, only the fsync failed.
    }
}

void DurableState::check_usable() const {
    if (broken_) throw broken_error();
}

Error DurableState::broken_error() const {
    return Error(Errc::io, fmt::format("the journal in {} is unusable after an earlier I/O error; restart the "
                                       "coordinator to recover from the directory",
                                       dir_.string()));
}

void DurableState::write_pending(Clock::time_point now) {
    check_usable();
    const std::vector<Event> events = state_.take_events();
    for (const Event& e : events) parts_.changed(e);
    append(events, now);
    queued_seq_ = answer_seq_ = stats_.last_seq;
}

void DurableState::append(const std::vector<Event>& events, Clock::time_point now) {
    check_usable();
    if (events.empty()) return;
    std::string lines;
    uint64_t seq = stats_.last_seq;
    for (const Event& e : events) lines += journal::journal_line(++seq, e);
    // One write(2) per commit (per batch with a writer): the kernel has
    // every line once it returns.
    guarded(broken_, [&] { segment_.write(lines); });
    std::unique_lock<std::mutex> lock;
    if (writer_) lock = std::unique_lock(writer_->mutex);
    stats_.last_seq = seq;
    stats_.events += events.size();
    stats_.bytes += lines.size();
    if (!unsynced_since_) unsynced_since_ = now;
}

void DurableState::queue_events() {
    std::vector<Event> events = state_.take_events();
    if (events.empty()) return;
    const uint64_t count = events.size();
    queue(Batch{std::move(events), false, 0});
    queued_seq_ += count;
}

void DurableState::commit(Clock::time_point now) {
    if (writer_) {
        queue_events();
    } else {
        write_pending(now);
        if (options_.fsync_interval.count() == 0 || sync_due(now)) sync();
    }
    if (options_.snapshot_every > 0 && queued_seq_ - queued_snapshot_seq_ >= options_.snapshot_every) snapshot();
}

void DurableState::sync() {
    if (!writer_) sync_segment();
}

void DurableState::sync_segment() {
    check_usable();
    if (!unsynced_since_) return;
    guarded(broken_, [&] { segment_.sync(); });
    {
        std::unique_lock<std::mutex> lock;
        if (writer_) lock = std::unique_lock(writer_->mutex);
        unsynced_since_.reset();
        ++stats_.syncs;
    }
    // Once per journal, at its first events on disk: from then on, start-up
    // refuses a directory where this journal is missing or empty.
    if (manifest_durable_ <= segment_base_ && stats_.last_seq > segment_base_) {
        guarded(broken_, [&] { record_manifest(stats_.last_seq); });
    }
}

// The manifest is replaced only after what it claims is on disk, so a
// crash between the two steps never makes start-up see a loss that is not.
void DurableState::record_manifest(uint64_t durable) {
    journal::replace_file_durably(journal::manifest_path(dir_),
                                  journal::manifest_text(journal::ManifestRecord{segment_base_, durable}));
    manifest_durable_ = durable;
}

std::optional<DurableState::Clock::time_point> DurableState::sync_deadline() const {
    if (writer_ || !unsynced_since_) return std::nullopt;
    return *unsynced_since_ + options_.fsync_interval;
}

bool DurableState::sync_due(Clock::time_point now) const {
    const auto deadline = sync_deadline();
    return deadline && now >= *deadline;
}

void DurableState::snapshot() {
    if (writer_) {
        // Queued after the events it holds: the writer syncs them first.
        queue_events();
        if (queued_snapshot_ && queued_snapshot_seq_ == queued_seq_) return;
        queue(Batch{{}, true, queued_seq_});
        queued_snapshot_ = true;
        queued_snapshot_seq_ = queued_seq_;
        return;
    }
    // The snapshot never holds what the journal lacks.
    write_pending(Clock::now());
    if (has_snapshot_ && stats_.snapshot_seq == stats_.last_seq) return;
    write_snapshot(stats_.last_seq);
    queued_snapshot_ = true;
    queued_snapshot_seq_ = stats_.snapshot_seq;
}

// Without a writer thread: the snapshot, then its journal.
void DurableState::write_snapshot(uint64_t seq) {
    journal::SnapshotWrite written;
    guarded(broken_, [&] {
        // The journal that ends here goes to disk first: with the previous
        // snapshot it is the way back should this snapshot ever be damaged.
        sync_segment();
        written = parts_.write(dir_, seq, state_);
    });
    start_journal(seq);
    has_snapshot_ = true;
    count_snapshot(seq, written);
    prune();
}

void DurableState::count_snapshot(uint64_t seq, const journal::SnapshotWrite& written) {
    stats_.snapshot_seq = seq;
    ++stats_.snapshots;
    stats_.parts_written += written.parts_written;
    stats_.parts_reused += written.parts_reused;
    stats_.snapshot_bytes = written.bytes;
}

// journal-<seq> takes the events after `seq`, once every event up to `seq`
// is on disk. With a writer this comes before the snapshot after `seq` is
// written; until it is, start-up replays the previous journal and this one
// after the previous snapshot.
void DurableState::start_journal(uint64_t seq) {
    if (segment_base_ == seq) return;
    guarded(broken_, [&] {
        sync_segment();
        segment_ = journal::AppendFile(journal::journal_path(dir_, seq));
        segment_base_ = seq;
        journal::sync_directory(dir_);
        record_manifest(seq);
    });
}

// Keeps the newest `keep` snapshots, the journals from the oldest of them
// on and the part files they name; older files are removed, and so are
// parts no kept snapshot names (a job rewritten or deleted since, or a
// snapshot that failed). Only the thread that writes snapshots calls this,
// so no part is new and not yet named. A failure here loses nothing, so it
// is a warning.
void DurableState::prune() {
    try {
        const journal::DirectoryListing listing = journal::list_data_directory(dir_);
        if (listing.snapshots.empty()) return;
        const std::size_t kept = std::min<std::size_t>(listing.snapshots.size(), options_.keep);
        // Until there are more than `keep`, every journal stays (journal-0
        // included: the way back from a damaged first snapshot).
        if (listing.snapshots.size() > options_.keep) {
            const uint64_t oldest_kept = listing.snapshots[listing.snapshots.size() - kept];
            for (uint64_t s : listing.snapshots) {
                if (s < oldest_kept) journal::remove_file(journal::snapshot_path(dir_, s));
            }
            for (uint64_t j : listing.journals) {
                if (j < oldest_kept) journal::remove_file(journal::journal_path(dir_, j));
            }
        }
        // Every kept snapshot is read before any part is removed: one that
        // cannot be read keeps every part (the exception leaves first).
        std::set<std::string> named;
        for (std::size_t i = listing.snapshots.size() - kept; i < listing.snapshots.size(); ++i) {
            named.merge(journal::parts_named_by(journal::snapshot_path(dir_, listing.snapshots[i])));
        }
        for (const std::string& part : listing.parts) {
            if (!named.contains(part)) journal::remove_file(dir_ / part);
        }
    } catch (const std::exception& e) {
        // Any failure, not only Error: the snapshot thread calls this from
        // a noexcept function, where an escaping bad_alloc would end the
        // process. Old files left behind cost disk, never state.
        if (warn_) warn_(fmt::format("cannot remove old journal files: {}", e.what()));
    }
}

JournalStats DurableState::stats() const {
    std::unique_lock<std::mutex> lock;
    if (writer_) lock = std::unique_lock(writer_->mutex);
    JournalStats out = stats_;
    out.unsynced = unsynced_since_.has_value();
    return out;
}

}  // namespace cohort::coord
