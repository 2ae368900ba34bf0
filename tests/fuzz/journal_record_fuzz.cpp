// One record of the coordinator's data directory: a journal line, a
// snapshot, the manifest or a snapshot's part (one job). The first byte
// picks which and whether the harness seals the record with a correct
// CRC-32 first (else hardly any input gets past the checksum to the JSON
// behind it). A journal line's
// event is then replayed into a state, as recovery does.
#include "fuzz_input.hpp"

#include "coordinator/journal/record.hpp"
#include "coordinator/state/state.hpp"

#include <fmt/format.h>

namespace {

using namespace cohort::coord;

// `record` with whatever checksum tail it had replaced by a correct one.
std::string sealed(std::string_view record) {
    constexpr std::string_view kOpen = ",\"crc32\":\"";
    if (const std::size_t at = record.rfind(kOpen); at != std::string_view::npos) record = record.substr(0, at);
    return fmt::format("{}{}{:08x}\"}}", record, kOpen, journal::crc32(record));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    cohort::fuzz::Input in(data, size);
    const uint8_t flags = in.byte();
    const std::string record = (flags & 1) != 0 ? sealed(in.rest()) : std::string(in.rest());
    cohort::fuzz::expect_named_errors("journal record", [&] {
        (void)journal::checksum_problem(record);
        switch ((flags >> 1) % 4) {
            case 0: {
                const journal::JournalEntry entry = journal::read_journal_line(record);
                // What was read is written back as the same line.
                const std::string line = journal::journal_line(entry.seq, entry.event);
                (void)journal::read_journal_line(std::string_view(line).substr(0, line.size() - 1));
                CoordinatorState state;
                state.apply(entry.event);
                break;
            }
            case 1: {
                const journal::SnapshotRecord snapshot = journal::read_snapshot(record);
                const CoordinatorState state = CoordinatorState::from_snapshot(snapshot.state);
                // A state loaded from a snapshot writes one that loads again.
                try {
                    (void)CoordinatorState::from_snapshot(state.snapshot());
                } catch (const cohort::Error& e) {
                    cohort::fuzz::defect("journal: a snapshot written back fails to load", e.what());
                }
                break;
            }
            case 2:
                (void)journal::read_manifest(record);
                break;
            default: {
                (void)journal::stored_checksum(record);
                const journal::PartRecord part = journal::read_part(record);
                const Job job = Job::from_snapshot(part.job, "snapshot part");
                // A job loaded from a part writes one that loads again.
                try {
                    (void)Job::from_snapshot(job.snapshot(), "snapshot part written back");
                } catch (const cohort::Error& e) {
                    cohort::fuzz::defect("journal: a snapshot part written back fails to load", e.what());
                }
                break;
            }
        }
    });
    return 0;
}
