// DurableState: commits to the journal, batched fsync, snapshots and the
// retention of old files.
#include "coordinator/journal/durable_state.hpp"

#include "coordinator/journal/record.hpp"
#include "coordinator/journal/recovery.hpp"

#include <utility>

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
    return out;
}

DurableState::DurableState(DurableState&& other) noexcept = default;

DurableState& DurableState::operator=(DurableState&& other) noexcept {
    if (this != &other) {
        sync_quietly();
        dir_ = std::move(other.dir_);
        options_ = other.options_;
        warn_ = std::move(other.warn_);
        state_ = std::move(other.state_);
        segment_ = std::move(other.segment_);
        segment_base_ = other.segment_base_;
        has_snapshot_ = other.has_snapshot_;
        unsynced_since_ = std::exchange(other.unsynced_since_, std::nullopt);
        broken_ = other.broken_;
        stats_ = other.stats_;
    }
    return *this;
}

DurableState::~DurableState() {
    sync_quietly();
}

void DurableState::sync_quietly() noexcept {
    if (broken_ || !segment_.is_open() || !unsynced_since_) return;
    try {
        segment_.sync();
    } catch (...) {
        // Nobody to tell: the events were written, only the fsync failed.
    }
}

void DurableState::check_usable() const {
    if (broken_) {
        throw Error(Errc::io, fmt::format("the journal in {} is unusable after an earlier I/O error; restart the "
                                          "coordinator to recover from the directory",
                                          dir_.string()));
    }
}

void DurableState::write_pending(Clock::time_point now) {
    check_usable();
    const std::vector<Event> events = state_.take_events();
    if (events.empty()) return;
    std::string lines;
    uint64_t seq = stats_.last_seq;
    for (const Event& e : events) lines += journal::journal_line(++seq, e);
    // One write(2) per commit: the kernel has every line once it returns.
    guarded(broken_, [&] { segment_.write(lines); });
    stats_.last_seq = seq;
    stats_.events += events.size();
    stats_.bytes += lines.size();
    if (!unsynced_since_) unsynced_since_ = now;
}

void DurableState::commit(Clock::time_point now) {
    write_pending(now);
    if (options_.fsync_interval.count() == 0 || sync_due(now)) sync();
    if (options_.snapshot_every > 0 && stats_.last_seq - stats_.snapshot_seq >= options_.snapshot_every) snapshot();
}

void DurableState::sync() {
    check_usable();
    if (!unsynced_since_) return;
    guarded(broken_, [&] { segment_.sync(); });
    unsynced_since_.reset();
    ++stats_.syncs;
}

std::optional<DurableState::Clock::time_point> DurableState::sync_deadline() const {
    if (!unsynced_since_) return std::nullopt;
    return *unsynced_since_ + options_.fsync_interval;
}

bool DurableState::sync_due(Clock::time_point now) const {
    const auto deadline = sync_deadline();
    return deadline && now >= *deadline;
}

void DurableState::snapshot() {
    // The snapshot never holds what the journal lacks.
    write_pending(Clock::now());
    if (has_snapshot_ && stats_.snapshot_seq == stats_.last_seq) return;
    const uint64_t seq = stats_.last_seq;
    guarded(broken_, [&] {
        // The journal that ends here goes to disk first: with the previous
        // snapshot it is the way back should this snapshot ever be damaged.
        sync();
        journal::replace_file_durably(journal::snapshot_path(dir_, seq),
                                      journal::snapshot_text(seq, state_.snapshot()));
        if (segment_base_ != seq) {
            segment_ = journal::AppendFile(journal::journal_path(dir_, seq));
            segment_base_ = seq;
            journal::sync_directory(dir_);
        }
    });
    has_snapshot_ = true;
    stats_.snapshot_seq = seq;
    ++stats_.snapshots;
    prune();
}

// Keeps the newest `keep` snapshots and the journals from the oldest of
// them on; older files are removed. A failure here loses nothing, so it
// is a warning.
void DurableState::prune() {
    try {
        const journal::DirectoryListing listing = journal::list_data_directory(dir_);
        if (listing.snapshots.size() <= options_.keep) return;
        const uint64_t oldest_kept = listing.snapshots[listing.snapshots.size() - options_.keep];
        for (uint64_t s : listing.snapshots) {
            if (s < oldest_kept) journal::remove_file(journal::snapshot_path(dir_, s));
        }
        for (uint64_t j : listing.journals) {
            if (j < oldest_kept) journal::remove_file(journal::journal_path(dir_, j));
        }
    } catch (const Error& e) {
        if (warn_) warn_(fmt::format("cannot remove old journal files: {}", e.what()));
    }
}

JournalStats DurableState::stats() const {
    JournalStats out = stats_;
    out.unsynced = unsynced_since_.has_value();
    return out;
}

}  // namespace cohort::coord
