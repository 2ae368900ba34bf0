// Incremental snapshots (snapshot version 2): each job's Job::snapshot() in
// a part file of its own, and a snapshot file that holds the rest of the
// state and names the part of every job. A snapshot rewrites only the jobs
// that changed since the previous one and points at the older parts for the
// others, so a snapshot of one busy job among many idle ones costs that job.
// See durable_state.hpp for the format and the order of writes.
#pragma once

#include "coordinator/state/events.hpp"
#include "coordinator/state/state.hpp"

#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include <boost/json/value.hpp>

namespace cohort::coord::journal {

// One entry of a version-2 snapshot's "job_parts".
struct PartRef {
    std::string job;
    std::string file;    // a part file name in the same directory
    uint32_t crc32 = 0;  // the part line's own checksum
};

// What one snapshot wrote.
struct SnapshotWrite {
    uint64_t parts_written = 0;
    uint64_t parts_reused = 0;
    uint64_t bytes = 0;  // parts and snapshot file together
};

// Writes the snapshots of one copy of the state: told every event applied
// to that copy (changed()), it re-serialises only the jobs those events
// named. It starts with every job changed: the first snapshot after start-up
// writes every part (parts of the snapshot loaded at start-up are not
// reused; see durable_state.hpp).
class IncrementalSnapshots {
public:
    // `event` was applied to the state the next write() is given.
    void changed(const Event& event);
    // New parts (each fsynced; then the directory once), then
    // snapshot-<seq>.json replaced durably. Error(io) on failure, and then
    // nothing is remembered as written: the next write() rewrites the same
    // jobs under new names, and the parts written here are left to prune.
    SnapshotWrite write(const std::filesystem::path& dir, uint64_t seq, const CoordinatorState& state);

private:
    std::map<std::string, PartRef, std::less<>> parts_;  // per job, as the last snapshot written names it
    std::set<std::string, std::less<>> changed_;         // jobs changed since then
    bool all_changed_ = true;
};

// A version-2 snapshot's "state" (snapshot-<seq>.json in `dir`) with its
// parts read into "jobs", as CoordinatorState::from_snapshot() takes it. A part that is
// missing, damaged, or not the one the snapshot names (another job's, or an
// older one's) is Error(parse) naming the part and the snapshot, followed by
// `advice`.
boost::json::value with_parts(const std::filesystem::path& dir, uint64_t seq, boost::json::value state,
                              std::string_view advice);

// The part files a snapshot file names; none for version 1. Error for a
// snapshot that cannot be read or is damaged.
std::set<std::string> parts_named_by(const std::filesystem::path& snapshot_file);

}  // namespace cohort::coord::journal
