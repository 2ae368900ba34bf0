// The coordinator's state on disk: an append-only journal of its events
// plus periodic snapshots, in one data directory, so that a coordinator
// killed with kill -9 (or a machine that loses power) starts again where it
// was.
//
// On-disk format
// --------------
// Events are numbered 1, 2, 3, ... (the sequence number, `seq`) for the
// life of the directory. File names carry a sequence number as 20 decimal
// digits, so `ls` sorts them:
//
//   snapshot-<S>.json   the state after event S: one line,
//       {"format":"cohort-coordinator-snapshot","version":2,"seq":S,
//        "state":<CoordinatorState::snapshot_without_jobs()> with
//          "job_parts":[{"job":NAME,"file":"part-...json","crc32":C},...],
//        "crc32":"xxxxxxxx"}
//     written to snapshot-<S>.json.tmp, fsynced, renamed into place, and
//     the directory fsynced: a snapshot file is whole or absent. C is the
//     part line's own crc32, so a part swapped for another job's, or for
//     an older one, is caught. Version 1 (older directories) has the whole
//     CoordinatorState::snapshot() as "state", no parts; it still loads.
//   part-<S>-<I>.json   one job, written by the snapshot after event S (I:
//     its index among that snapshot's jobs, 6 digits; job names, untrusted
//     bytes, never go into file names): one line,
//       {"format":"cohort-coordinator-snapshot-part","version":1,"seq":S,
//        "job":<Job::snapshot()>,"crc32":"xxxxxxxx"}
//     Snapshots are incremental (snapshot_parts.hpp): the snapshot after S
//     writes parts only for the jobs an event named since the previous
//     snapshot this process wrote (every job after a resumed event, and in
//     the first snapshot after start-up: the parts of the snapshot loaded
//     are not reused), and names the earlier parts for the rest. Its new
//     parts are written and fsynced one by one, the directory fsynced once,
//     and only then the snapshot file replaced as above. A changed job is
//     still serialised whole.
//   journal-<S>.jsonl   the events after event S (S+1, S+2, ...), one
//     JSON line each, appended as they happen:
//       {"seq":N,"event":<to_json(Event)>,"crc32":"xxxxxxxx"}
//   manifest.json       {"format":"cohort-coordinator-manifest","version":1,
//        "journal":J,"durable":D,"crc32":"xxxxxxxx"}: journal-<J>.jsonl is
//     the one appended to, and every event up to D is on disk (fsynced).
//     Replaced atomically like a snapshot, and only after what it claims is
//     on disk: at start-up, when a journal is started (D = J), and at the
//     first fsync of events into a journal (D > J), so once per journal.
//
// All of it is private to the coordinator's user whatever the umask: the
// directory is created 0700, the files 0600 (the store's values are there).
//
// "crc32" is the CRC-32 (IEEE, as zlib computes it) of every byte of the
// line before `,"crc32":`, as 8 lower-case hex digits; it is always the
// last member, so a record is checked before its JSON is trusted. Numbers
// are written so that coord::parse_json reads them back exactly. Files not
// named this way are left alone.
//
// Start-up (open)
// ---------------
// The newest snapshot-<S>.json is loaded (none: the empty state, S = 0),
// with every part it names (each part's checksum must hold and equal the
// crc32 the snapshot records for it), and the journals journal-<B>.jsonl
// with B >= S are replayed in order; each must start where the previous one
// ended (B = the last seq so far) and number its lines without gaps.
// Leftover *.tmp files are removed, and so are part files newer than the
// newest snapshot: a crash after a snapshot's parts, before its file. Both
// with a warning. (Parts an older snapshot wrote that none names any more
// are left to the next prune.)
//
// - A torn last line (no '\n' at the end of the newest journal) is what a
//   crash mid-append leaves: it is
//   dropped with a warning naming the file and byte offset, and the file is
//   truncated back to the last good line so appends continue cleanly. That
//   event was never committed (commit() had not returned), so nothing
//   acknowledged is lost.
// - Anything else stops start-up with Error(parse) naming the file, the
//   byte offset and what to do: a bad line (a complete line with a bad
//   checksum included, even the last: an append a crash cut short lacks
//   its '\n'), a journal that the manifest names but that is missing,
//   journals that end before the manifest's D (a journal emptied or cut
//   short; D records a journal's first fsynced events only, so a journal cut
//   at a line boundary after them is not noticed), a damaged manifest, a
//   gap or overlap
//   in sequence numbers, a journal that does not start where the events
//   before it end, an event the state refuses, a newest snapshot that is
//   damaged. A damaged newest snapshot is never skipped silently, even when
//   an older one exists: snapshots are written atomically, so damage means
//   the disk or a person changed it, and an operator should look. The
//   message says how to recover: moving the damaged snapshot out of the
//   directory makes the next start use the previous snapshot (or journal-0)
//   and replay the journals after it, which hold every later event as long
//   as they are intact (`keep` >= 2 keeps them). A part the newest snapshot
//   names that is missing, damaged or not the one it names is the same
//   case, and the message names the part and the snapshot. A part that the
//   previous snapshot names too fails it as well; the way back is then
//   journal-0 if it is still there, or a backup.
//
// Durability
// ----------
// commit() hands the state's new events to the kernel in one write(2):
// from then on they survive the coordinator process being killed. They
// reach the disk (survive an OS crash or power loss) at the next fsync,
// which is batched: commit() fsyncs when fsync_interval has passed since the
// oldest unsynced commit (or every time with an interval of 0), and the
// server calls sync() when sync_due() says so, from a timer at
// sync_deadline(). snapshot() (automatic every snapshot_every events) writes
// the state, starts a new journal (with a writer, in the other order: see
// below), and deletes the snapshots beyond the newest `keep` together with
// the journals before the oldest one kept, then the part files no kept
// snapshot names (reading the kept snapshot files: small in version 2; a
// version-1 one is recognised by its first bytes and not parsed). A kept
// snapshot that cannot be read keeps every part, with a warning.
//
// Group commit (start_writer)
// ---------------------------
// A server must not block its I/O thread on write(2), fsync or a snapshot.
// After start_writer() commit() only hands the new events to a writer
// thread and returns; the writer takes every commit queued so far as one
// batch, writes it with one write(2), fsyncs once, and then reports the last
// sequence number of the batch as durable. Commits that arrive while it
// writes and fsyncs wait for the next batch, so under load one fsync covers
// many commits. A reply goes out only once the writer has reported
// answer_seq() durable: every event queued before it, except that a reply
// need not wait for heartbeats (see answer_seq). An I/O error is reported
// once, through the same callback, and leaves the object broken as above:
// nothing reported durable is lost, and nothing queued after it is ever
// reported durable.
//
// Snapshots in the background (issue 19, defect 8)
// ------------------------------------------------
// A snapshot of a big job takes long to build and write (64 MB, 0.8 s, at
// 230,000 members, whenever that job changed), and nothing that waits for
// it may hold a reply. With a writer, snapshot() only queues a marker after the events
// it covers. The writer syncs those events, starts journal-S at once (in the
// manifest too) and goes on appending and reporting batches. A third
// thread, cohort-snapshot, keeps its own copy of the state: it applies
// every event the writer has made durable, as it is made durable, notes
// the job each names, and writes snapshot-S (and the parts of the jobs
// noted) when the marker reaches it. Until then start-up finds
// the previous snapshot and replays its journal and journal-S, so a crash
// at any point loses nothing. Markers that queue up while a snapshot is
// written collapse into the newest. A snapshot that fails is a warning:
// its journals stay, and the next marker tries again. flush() waits for the
// queued snapshots too.
//
// One strand owns a DurableState and its state(); with a writer, stats()
// may be read from any thread. After open(), the server calls
// state().resume(now) and commit() so the outage counts as nobody's
// silence.
#pragma once

#include "coordinator/journal/data_dir.hpp"
#include "coordinator/journal/journal.hpp"
#include "coordinator/journal/snapshot_parts.hpp"
#include "coordinator/state/state.hpp"

#include <chrono>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace cohort::coord {

struct JournalOptions {
    // Without a writer thread: the longest a committed event waits for
    // fsync; 0: fsync every commit. With one, every batch is fsynced.
    std::chrono::milliseconds fsync_interval{10};
    // Events between automatic snapshots; 0: only when snapshot() is called.
    uint64_t snapshot_every = 10000;
    // Snapshots kept, with the journals that follow them; at least 1.
    uint32_t keep = 2;
};


class DurableState final : public Journal {
public:

    // Loads the directory (creating it if missing), as described above.
    // `warn` hears about torn lines dropped and leftovers removed.
    // Error(parse) for corruption, Error(io) for the file system,
    // Error(invalid_argument) for bad options.
    static DurableState open(const std::filesystem::path& dir, JournalOptions options = {},
                             std::function<void(std::string)> warn = {});

    DurableState(DurableState&& other) noexcept;
    DurableState& operator=(DurableState&& other) noexcept;
    DurableState(const DurableState&) = delete;
    DurableState& operator=(const DurableState&) = delete;
    // Drains the writer's queue, if there is a writer, and fsyncs what is
    // still unsynced, ignoring errors.
    ~DurableState() override;

    // Starts the writer thread (named cohort-journal) and the snapshot
    // thread (cohort-snapshot), after fsyncing what is committed so far;
    // from then on commit() and snapshot() queue, and
    // `on_durable` hears about each synced batch. The object must not move
    // afterwards.
    void start_writer(DurableCallback on_durable);
    // The sequence number of the newest event commit() has taken: once it
    // is reported durable, so is everything committed before.
    uint64_t queued_seq() const override { return queued_seq_; }
    // What an answer must wait for: the newest queued event other than a
    // heartbeat. A heartbeat's record (its time, its metrics) that a power
    // loss takes is one nobody can miss: the restart's resume() starts every
    // heartbeat clock again, so it makes no member fail and decides nothing;
    // heartbeats, most of a big job's traffic, are then answered without
    // waiting for the disk. They are still journaled, in order.
    uint64_t answer_seq() const override { return answer_seq_; }
    // Waits until the writer has written and synced everything queued,
    // and the snapshots queued are written (or failed: see above);
    // Error(io) if the writer failed. Without a writer: sync().
    void flush() override;

    CoordinatorState& state() override { return state_; }
    const CoordinatorState& state() const { return state_; }

    // Journals the events the state's commands produced since the last
    // commit (take_events()); with a writer, queues them (see above).
    // Error(io) leaves this object broken: every
    // later call throws, and the coordinator must restart from the
    // directory (its in-memory state may be ahead of the journal).
    void commit(Clock::time_point now = Clock::now()) override;
    // Committed events reach the disk (with a writer: nothing to do).
    void sync();
    // When sync() is due; empty when nothing waits for an fsync (always,
    // with a writer).
    std::optional<Clock::time_point> sync_deadline() const;
    bool sync_due(Clock::time_point now) const;
    // Writes a snapshot of the state (after commit()ting pending events),
    // starts a new journal and deletes old files beyond `keep`.
    void snapshot() override;

    const std::filesystem::path& directory() const { return dir_; }
    JournalStats stats() const override;

private:
    struct Writer;
    struct Snapshotter;
    struct Batch;

    DurableState() = default;
    void check_usable() const;
    Error broken_error() const;
    void sync_segment();
    void write_pending(Clock::time_point now);
    // The file side, shared by both modes; with a writer, only the writer
    // thread calls these.
    void append(const std::vector<Event>& events, Clock::time_point now);
    void write_snapshot(uint64_t seq);
    // stats_ after a snapshot is written (with a writer, under its mutex).
    void count_snapshot(uint64_t seq, const journal::SnapshotWrite& written);
    void start_journal(uint64_t seq);
    // manifest.json := {the current journal, `durable`}, durably.
    void record_manifest(uint64_t durable);
    void sync_quietly() noexcept;
    void prune();
    void queue(Batch batch);
    // The state's new events, as one batch for the writer.
    void queue_events();
    void run_writer();
    void to_snapshotter(std::vector<Event> events, std::optional<uint64_t> marker);
    void run_snapshotter();
    void write_snapshot_file(uint64_t seq, const CoordinatorState& state,
                             journal::IncrementalSnapshots& parts) noexcept;
    void stop_writer() noexcept;

    std::filesystem::path dir_;
    JournalOptions options_;
    std::function<void(std::string)> warn_;
    CoordinatorState state_;
    journal::AppendFile segment_;
    uint64_t segment_base_ = 0;
    uint64_t manifest_durable_ = 0;  // what manifest.json says is on disk
    bool has_snapshot_ = false;
    // Without a writer: the parts of state_'s snapshots. start_writer()
    // hands them to the snapshot thread with its replica.
    journal::IncrementalSnapshots parts_;
    std::optional<Clock::time_point> unsynced_since_;
    bool broken_ = false;
    JournalStats stats_;  // with a writer, guarded by its mutex
    std::unique_ptr<Writer> writer_;
    // What the caller has queued; mirrors stats_ while there is no writer.
    uint64_t queued_seq_ = 0;
    uint64_t answer_seq_ = 0;
    uint64_t queued_snapshot_seq_ = 0;
    bool queued_snapshot_ = false;
};

}  // namespace cohort::coord
