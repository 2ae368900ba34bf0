// The checksummed records of the coordinator's data directory. A journal
// line and a snapshot file are each one JSON object whose last member is a
// CRC-32 of every byte before it:
//
//   {"seq":12,"event":{...},"crc32":"1a2b3c4d"}
//
// so a torn or damaged record is recognised before its JSON is trusted, and
// the files stay readable with jq.
#pragma once

#include "coordinator/state/events.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <boost/json/value.hpp>

namespace cohort::coord::journal {

// CRC-32 (IEEE 802.3, as zlib and gzip compute it).
uint32_t crc32(std::string_view bytes);

// One journal line, '\n' included.
std::string journal_line(uint64_t seq, const Event& event);
// A snapshot file's whole text, '\n' included: the state after event `seq`.
// Version 1 holds the whole state (CoordinatorState::snapshot());
// version 2 (incremental_snapshot_text) holds it less its jobs, with
// "job_parts" naming the part file that holds each job (snapshot_parts.hpp).
std::string snapshot_text(uint64_t seq, const boost::json::value& state);
std::string incremental_snapshot_text(uint64_t seq, const boost::json::value& state);
// A part file's whole text, '\n' included: one job's Job::snapshot(),
// written by the snapshot after event `seq`.
std::string part_text(uint64_t seq, const boost::json::value& job);

// Empty when `record` (without its '\n') ends in a checksum that matches,
// else what is wrong with it: "no checksum" or "checksum mismatch".
std::optional<std::string> checksum_problem(std::string_view record);
// The checksum `record` ends in, or nothing if it has none. A snapshot
// names each part by it, so a part swapped for another is caught.
std::optional<uint32_t> stored_checksum(std::string_view record);

struct JournalEntry {
    uint64_t seq = 0;
    Event event;
};

// A journal line whose checksum holds, without its '\n'. Error(parse)
// naming the field for anything else.
JournalEntry read_journal_line(std::string_view record);

struct SnapshotRecord {
    uint64_t seq = 0;
    uint64_t version = 1;  // 2: "state" has "job_parts" in place of "jobs"
    boost::json::value state;
};

// A snapshot file's text whose checksum holds, '\n' removed. Error(parse).
SnapshotRecord read_snapshot(std::string_view record);

struct PartRecord {
    uint64_t seq = 0;
    boost::json::value job;
};

// A part file's text whose checksum holds, '\n' removed. Error(parse).
PartRecord read_part(std::string_view record);

// The manifest: what start-up must find, so that a journal deleted or
// emptied is noticed rather than replayed as "no events".
struct ManifestRecord {
    uint64_t journal = 0;  // journal-<journal>.jsonl is the one appended to
    uint64_t durable = 0;  // every event up to this one was fsynced
};

// The manifest file's whole text, '\n' included.
std::string manifest_text(const ManifestRecord& manifest);
// A manifest's text whose checksum holds, '\n' removed. Error(parse).
ManifestRecord read_manifest(std::string_view record);

}  // namespace cohort::coord::journal
