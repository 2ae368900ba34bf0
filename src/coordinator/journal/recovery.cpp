// Loading a data directory: newest snapshot, then the journals after it,
// line by line, checksums and sequence numbers checked.
#include "coordinator/journal/recovery.hpp"

#include "coordinator/journal/data_dir.hpp"
#include "coordinator/journal/record.hpp"
#include "coordinator/journal/snapshot_parts.hpp"
#include "coordinator/state/json_parse.hpp"

#include <algorithm>
#include <optional>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace cohort::coord::journal {

namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

// Runs `f`, turning any Error into Error(parse) that names the file and the
// byte offset and says what to do.
template <class F>
auto at(const fs::path& file, uint64_t offset, std::string_view advice, F&& f) {
    try {
        return f();
    } catch (const Error& e) {
        throw Error(Errc::parse, fmt::format("{}: byte {}: {}; {}", file.string(), offset, e.what(), advice));
    }
}

// What an operator can do about a damaged snapshot `seq`.
std::string snapshot_advice(const fs::path& dir, const DirectoryListing& listing, uint64_t seq) {
    const auto older =
        std::find_if(listing.snapshots.rbegin(), listing.snapshots.rend(), [&](uint64_t s) { return s < seq; });
    std::string fallback;
    if (older != listing.snapshots.rend()) {
        fallback = snapshot_path(dir, *older).filename().string();
    } else if (!listing.journals.empty() && listing.journals.front() == 0) {
        fallback = journal_path(dir, 0).filename().string() + " (from the empty state)";
    }
    if (fallback.empty()) {
        return "the coordinator cannot start from this directory: restore it from a backup (no older snapshot "
               "or journal-0 is left to recover from)";
    }
    return fmt::format(
        "the coordinator does not skip a damaged snapshot by itself: move {} out of the directory and start "
        "again to recover from {} and the journals after it (nothing is lost if they are intact; the part files "
        "older snapshots name are kept), or restore the directory from a backup",
        snapshot_path(dir, seq).filename().string(), fallback);
}

std::string journal_advice(uint64_t offset) {
    return fmt::format(
        "the journal is damaged, so start-up stops: restore the data directory from a backup, or truncate this "
        "file to {} bytes and remove the journals and snapshots after it and manifest.json to start from the events "
        "before this point (the later ones are lost)",
        offset);
}

// The manifest, or nothing in a directory without one (new, or written by
// a version before manifests).
std::optional<ManifestRecord> load_manifest(const fs::path& dir, const DirectoryListing& listing) {
    if (!listing.manifest) return std::nullopt;
    const fs::path file = manifest_path(dir);
    const std::string text = read_file(file);
    std::string_view record = text;
    if (record.ends_with('\n')) record.remove_suffix(1);
    const std::string advice =
        "it records which journal files must be there; restore it from a backup, or remove it to start without "
        "that check (a journal that was deleted or emptied then goes unnoticed)";
    if (const auto problem = checksum_problem(record)) {
        throw Error(Errc::parse, fmt::format("{}: byte 0: the manifest ({} bytes) is damaged: {}; {}", file.string(),
                                             text.size(), *problem, advice));
    }
    return at(file, 0, advice, [&] { return read_manifest(record); });
}

// What to do when the journals hold fewer events than the manifest says
// were fsynced.
std::string lost_events_advice(const fs::path& dir, uint64_t last, uint64_t durable) {
    if (durable <= last) {
        return fmt::format(
            "restore the file from a backup of the directory; or remove {} to start from event {} (the manifest "
            "records no event after it as saved)",
            manifest_path(dir).string(), last);
    }
    return fmt::format(
        "restore the file from a backup of the directory; or, to start from the events that are left (event {} is "
        "the last left; events {} to {} at least, which clients were told were saved, are lost), remove {}",
        last, last + 1, durable, manifest_path(dir).string());
}

CoordinatorState load_snapshot(const fs::path& dir, const DirectoryListing& listing, uint64_t seq) {
    const fs::path file = snapshot_path(dir, seq);
    const std::string advice = snapshot_advice(dir, listing, seq);
    const std::string text = read_file(file);
    std::string_view record = text;
    if (record.ends_with('\n')) record.remove_suffix(1);
    if (const auto problem = checksum_problem(record)) {
        throw Error(Errc::parse, fmt::format("{}: byte 0: the snapshot ({} bytes) is damaged: {}; {}", file.string(),
                                             text.size(), *problem, advice));
    }
    SnapshotRecord snapshot = at(file, 0, advice, [&] {
        SnapshotRecord snap = read_snapshot(record);
        if (snap.seq != seq) {
            throw Error(Errc::parse, fmt::format("snapshot: seq {} does not match the file name", snap.seq));
        }
        return snap;
    });
    if (snapshot.version == 1)
        return at(file, 0, advice, [&] { return CoordinatorState::from_snapshot(snapshot.state); });
    // A bad part is reported under its own name, not at the snapshot's byte 0.
    json::value state = with_parts(dir, seq, std::move(snapshot.state), advice);
    return at(file, 0, advice, [&] { return CoordinatorState::from_snapshot(state); });
}

// Parts newer than the newest snapshot are a snapshot a crash (or a failed
// write) cut short, its parts written and its file not: no snapshot can
// name them.
// Parts older ones no longer name are left to prune(), which reads them.
void remove_unfinished_parts(const fs::path& dir, const DirectoryListing& listing,
                             const std::function<void(std::string)>& warn) {
    const uint64_t newest = listing.snapshots.empty() ? 0 : listing.snapshots.back();
    for (const std::string& name : listing.parts) {
        if (listing.snapshots.empty() || part_sequence(name) > newest) {
            remove_file(dir / name);
            if (warn) {
                warn(fmt::format("{}: removed a part of an unfinished snapshot, left by a crash or a failed write",
                                 (dir / name).string()));
            }
        }
    }
}

// Replays one journal onto `out`; the last one may end in a torn line.
void replay_journal(const fs::path& file, bool newest, Recovered& out, const std::function<void(std::string)>& warn) {
    const std::string text = read_file(file);
    std::size_t offset = 0;
    while (offset < text.size()) {
        const std::size_t newline = text.find('\n', offset);
        const std::size_t end = newline == std::string::npos ? text.size() : newline;
        const std::string_view record = std::string_view(text).substr(offset, end - offset);
        std::optional<std::string> problem;
        if (newline == std::string::npos) {
            problem = "the line has no end ('\\n')";
        } else {
            problem = checksum_problem(record);
        }
        if (problem) {
            // Only a line without its '\n' can be a write a crash cut short:
            // a complete line that fails its checksum was damaged afterwards.
            if (!newest || newline != std::string::npos) {
                const std::string_view kind =
                    newline == std::string::npos ? "" : " (a complete line, so not one a crash cut short)";
                throw Error(Errc::parse, fmt::format("{}: byte {}: {}{}; {}", file.string(), offset, *problem, kind,
                                                     journal_advice(offset)));
            }
            if (warn) {
                warn(
                    fmt::format("{}: byte {}: ignoring a torn last line ({} bytes: {}), left by a crash while it "
                                "was written; the file is truncated to {} bytes",
                                file.string(), offset, text.size() - offset, *problem, offset));
            }
            truncate_file(file, offset);
            return;
        }
        const std::string advice = journal_advice(offset);
        at(file, offset, advice, [&] {
            JournalEntry entry = read_journal_line(record);
            if (entry.seq != out.last_seq + 1) {
                throw Error(Errc::parse, fmt::format("event {} follows event {}: events are missing or repeated",
                                                     entry.seq, out.last_seq));
            }
            try {
                out.state.apply(entry.event);
            } catch (const Error& e) {
                throw Error(Errc::parse, fmt::format("event {} ({}) does not fit the state: {}", entry.seq,
                                                     event_type(entry.event), e.what()));
            }
            out.last_seq = entry.seq;
        });
        offset = end + 1;
    }
}

}  // namespace

Recovered recover(const fs::path& dir, const std::function<void(std::string)>& warn) {
    const DirectoryListing listing = list_data_directory(dir);
    for (const fs::path& tmp : listing.temporaries) {
        remove_file(tmp);
        if (warn) {
            const bool snapshot = tmp.filename().string().starts_with("snapshot-");
            warn(fmt::format("{}: removed an unfinished {} left by a crash", tmp.string(),
                             snapshot ? "snapshot" : "manifest"));
        }
    }
    remove_unfinished_parts(dir, listing, warn);
    const std::optional<ManifestRecord> manifest = load_manifest(dir, listing);
    if (!manifest && (!listing.snapshots.empty() || !listing.journals.empty()) && warn) {
        warn(
            fmt::format("{}: no manifest (a directory written by an older cohort, or the file was removed): a "
                        "journal deleted or emptied before this start cannot be noticed; one is written now",
                        manifest_path(dir).string()));
    }
    Recovered out;
    if (!listing.snapshots.empty()) {
        const uint64_t seq = listing.snapshots.back();
        out.state = load_snapshot(dir, listing, seq);
        out.snapshot = seq;
        out.last_seq = seq;
    }
    // The journal appended to last must be there, unless a newer snapshot
    // holds all of it (a crash after the snapshot, before the manifest).
    if (manifest && manifest->journal >= out.last_seq &&
        !std::binary_search(listing.journals.begin(), listing.journals.end(), manifest->journal)) {
        throw Error(Errc::parse,
                    fmt::format("{}: the journal is missing, but {} names it as the newest one{}; {}",
                                journal_path(dir, manifest->journal).string(), manifest_path(dir).string(),
                                manifest->durable > manifest->journal
                                    ? fmt::format(", holding events up to {} at least", manifest->durable)
                                    : std::string(),
                                lost_events_advice(dir, out.last_seq, std::max(manifest->durable, out.last_seq))));
    }
    std::vector<uint64_t> journals;
    for (uint64_t base : listing.journals) {
        if (base >= out.last_seq) journals.push_back(base);
    }
    for (std::size_t i = 0; i < journals.size(); ++i) {
        const fs::path file = journal_path(dir, journals[i]);
        if (journals[i] != out.last_seq) {
            if (journals[i] < out.last_seq) {
                throw Error(Errc::parse, fmt::format("{}: byte 0: the journal starts after event {}, but the journal "
                                                     "before it goes on to event {}: the files overlap; restore the "
                                                     "data directory from a backup",
                                                     file.string(), journals[i], out.last_seq));
            }
            const std::string before = out.last_seq == 0 && !out.snapshot
                                           ? std::string("no snapshot or earlier journal holds the events before it")
                                           : fmt::format("the events before it end at event {}", out.last_seq);
            throw Error(Errc::parse,
                        fmt::format("{}: byte 0: the journal starts after event {}, but {}; restore the missing "
                                    "files (snapshot-{:020}.json or the journals before it) from a backup",
                                    file.string(), journals[i], before, journals[i]));
        }
        replay_journal(file, i + 1 == journals.size(), out, warn);
        out.last_journal = journals[i];
    }
    if (manifest && out.last_seq < manifest->durable) {
        const fs::path newest = journal_path(dir, out.last_journal.value_or(manifest->journal));
        std::error_code ec;
        const bool empty = fs::file_size(newest, ec) == 0 && !ec;
        throw Error(Errc::parse,
                    fmt::format("{}: the journal {} event {}, but {} says every event up to {} was written and "
                                "fsynced: the file was {} after the coordinator wrote it; {}",
                                newest.string(), empty ? "is empty: the events end at" : "ends at", out.last_seq,
                                manifest_path(dir).string(), manifest->durable, empty ? "emptied" : "cut short",
                                lost_events_advice(dir, out.last_seq, manifest->durable)));
    }
    return out;
}

}  // namespace cohort::coord::journal
