// coordinator/journal: incremental snapshots. A snapshot rewrites only the
// jobs changed since the previous one (with and without the writer thread),
// a reopen gives exactly the state back, a part missing, damaged or swapped
// stops start-up with a message naming it and saying what to do, prune keeps
// exactly the parts a kept snapshot names, version-1 snapshots still load,
// and the parts of a snapshot a crash cut short are removed at start-up.
#include "coordinator/journal/durable_state.hpp"
#include "coordinator/journal/record.hpp"
#include "journal_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace cohort::coord {
namespace {

namespace fs = std::filesystem;
using testing::collect;
using testing::error_of;
using testing::read;
using testing::TempDir;
using testing::text_of;
using testing::write;

JournalOptions manual_snapshots() {
    JournalOptions o;
    o.snapshot_every = 0;
    return o;
}

std::string job_name(int i) {
    return fmt::format("job-{}", i);
}

// `count` jobs job-0, job-1, ..., each with a member and a store key.
void add_jobs(DurableState& d, int count) {
    for (int i = 0; i < count; ++i) {
        d.state().create_job(job_name(i), JobSettings{}, 1);
        Node n;
        n.id = "a";
        d.state().join(job_name(i), n, 1);
        d.state().store_set(job_name(i), 1, "k", "v", 1);
    }
    d.commit();
}

// One event, naming job-<i>.
void change(DurableState& d, int i, std::string_view value) {
    d.state().store_set(job_name(i), 1, "k", value, 2);
    d.commit();
}

// The part files in `dir`, sorted; with `seq`, only those written by the
// snapshot after event `seq`.
std::vector<std::string> parts(const fs::path& dir, std::optional<uint64_t> seq = std::nullopt) {
    const std::string prefix = seq ? fmt::format("part-{:020}-", *seq) : "part-";
    std::vector<std::string> out;
    for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
        const std::string name = e.path().filename().string();
        if (name.starts_with(prefix)) out.push_back(name);
    }
    std::sort(out.begin(), out.end());
    return out;
}

fs::path snapshot_file(const fs::path& dir, uint64_t seq) {
    return dir / fmt::format("snapshot-{:020}.json", seq);
}

// The only part written by the snapshot after `seq`.
fs::path only_part(const fs::path& dir, uint64_t seq) {
    const std::vector<std::string> written = parts(dir, seq);
    EXPECT_EQ(written.size(), 1u);
    return dir / (written.empty() ? std::string("none") : written.front());
}

TEST(CoordinatorSnapshotParts, OnlyTheChangedJobIsRewritten) {
    TempDir dir;
    DurableState d = DurableState::open(dir.path(), manual_snapshots());
    add_jobs(d, 10);
    d.snapshot();
    const JournalStats first = d.stats();
    EXPECT_EQ(first.parts_written, 10u);
    EXPECT_EQ(first.parts_reused, 0u);
    EXPECT_EQ(parts(dir.path()).size(), 10u);
    EXPECT_NE(read(snapshot_file(dir.path(), first.snapshot_seq)).find("\"version\":2,"), std::string::npos);

    change(d, 3, "changed");
    d.snapshot();
    const JournalStats second = d.stats();
    EXPECT_EQ(second.parts_written, 11u);
    EXPECT_EQ(second.parts_reused, 9u);
    EXPECT_LT(second.snapshot_bytes, first.snapshot_bytes);
    // The new part is job-3's, the fourth job (index 3) of the snapshot.
    EXPECT_EQ(only_part(dir.path(), second.snapshot_seq).filename().string(),
              fmt::format("part-{:020}-000003.json", second.snapshot_seq));
    EXPECT_NE(read(only_part(dir.path(), second.snapshot_seq)).find("\"changed\""), std::string::npos);
    EXPECT_EQ(parts(dir.path()).size(), 11u);  // the older snapshot still names job-3's first part

    const std::string expected = text_of(d.state());
    EXPECT_EQ(text_of(DurableState::open(dir.path(), manual_snapshots()).state()), expected);
}

// keep = 2: after a third snapshot, job-3's first part (named only by the
// first snapshot) goes; job-5's first part, which the second snapshot still
// names, stays; a deleted job's part goes once no kept snapshot names it.
TEST(CoordinatorSnapshotParts, PruneKeepsExactlyThePartsKeptSnapshotsName) {
    TempDir dir;
    std::vector<std::string> warnings;
    DurableState d = DurableState::open(dir.path(), manual_snapshots(), collect(warnings));
    add_jobs(d, 10);
    d.snapshot();
    const uint64_t s1 = d.stats().snapshot_seq;
    change(d, 3, "second");
    d.snapshot();
    change(d, 5, "third");
    d.snapshot();
    const uint64_t s3 = d.stats().snapshot_seq;
    EXPECT_FALSE(fs::exists(snapshot_file(dir.path(), s1)));
    EXPECT_FALSE(fs::exists(dir.path() / fmt::format("part-{:020}-000003.json", s1)));
    EXPECT_TRUE(fs::exists(dir.path() / fmt::format("part-{:020}-000005.json", s1)));
    EXPECT_EQ(parts(dir.path()).size(), 11u);

    d.state().delete_job(job_name(7), 3);
    d.commit();
    d.snapshot();  // names 9 jobs
    d.snapshot();  // nothing new: no snapshot written
    EXPECT_TRUE(fs::exists(dir.path() / fmt::format("part-{:020}-000007.json", s1)));  // s3 names it
    change(d, 0, "fifth");
    d.snapshot();  // s3 is pruned, and with it the last name of job-7's part
    EXPECT_FALSE(fs::exists(snapshot_file(dir.path(), s3)));
    EXPECT_FALSE(fs::exists(dir.path() / fmt::format("part-{:020}-000007.json", s1)));
    EXPECT_FALSE(fs::exists(dir.path() / fmt::format("part-{:020}-000005.json", s1)));
    EXPECT_EQ(parts(dir.path()).size(), 10u);  // 9 jobs, and job-0's previous part named by the older one
    EXPECT_TRUE(warnings.empty());

    const std::string expected = text_of(d.state());
    const DurableState again = DurableState::open(dir.path(), manual_snapshots());
    EXPECT_EQ(text_of(again.state()), expected);
    EXPECT_FALSE(again.state().jobs().contains(job_name(7)));
}

TEST(CoordinatorSnapshotParts, MissingDamagedOrSwappedPartStopsStartUp) {
    TempDir dir;
    std::string expected;
    uint64_t s1 = 0, s2 = 0;
    {
        DurableState d = DurableState::open(dir.path(), manual_snapshots());
        add_jobs(d, 3);
        d.snapshot();
        s1 = d.stats().snapshot_seq;
        change(d, 1, "newer");
        d.snapshot();
        s2 = d.stats().snapshot_seq;
        expected = text_of(d.state());
    }
    const fs::path part = only_part(dir.path(), s2);  // job-1's, named by the newest snapshot only
    const std::string good = read(part);
    // The message names the part, the job and the snapshot, and says what to do.
    const auto expect_stops = [&](std::string_view what) {
        const std::string message = error_of([&] { DurableState::open(dir.path(), manual_snapshots()); }, Errc::parse);
        EXPECT_NE(message.find(part.string() + ": " + std::string(what)), std::string::npos) << message;
        EXPECT_NE(
            message.find(fmt::format("the part of job 'job-1' that {} names", snapshot_file(dir.path(), s2).string())),
            std::string::npos)
            << message;
        EXPECT_NE(message.find(fmt::format("move snapshot-{:020}.json out of the directory and start again to "
                                           "recover from snapshot-{:020}.json",
                                           s2, s1)),
                  std::string::npos)
            << message;
        return message;
    };

    fs::remove(part);
    expect_stops("the part file is missing");

    std::string damaged = good;
    damaged[damaged.size() / 2] ^= 4;
    write(part, damaged);
    const std::string message = expect_stops("byte 0: the part (");
    EXPECT_NE(message.find("is damaged: checksum mismatch"), std::string::npos) << message;

    // Another job's valid part in its place: its own checksum holds.
    write(part, read(dir.path() / fmt::format("part-{:020}-000000.json", s1)));
    expect_stops("byte 0: the part's checksum");

    // Doing what the message says loses nothing: the older snapshot and the
    // journal after it hold every event.
    fs::rename(snapshot_file(dir.path(), s2), dir.path() / "damaged.json");
    std::vector<std::string> warnings;
    const DurableState d = DurableState::open(dir.path(), manual_snapshots(), collect(warnings));
    EXPECT_EQ(text_of(d.state()), expected);
    EXPECT_EQ(d.stats().snapshot_seq, s1);
    ASSERT_EQ(warnings.size(), 1u);  // the moved snapshot's own part, now named by none
    EXPECT_NE(warnings[0].find(part.string() + ": removed a part of an unfinished snapshot"), std::string::npos)
        << warnings[0];
}

// The snapshot's text picks the files opened: a name that is not a part
// file's (a path elsewhere) is refused before anything is opened.
TEST(CoordinatorSnapshotParts, ASnapshotNamesOnlyPartFiles) {
    TempDir dir;
    const auto snapshot_naming = [&](std::string_view file) {
        boost::json::object state = CoordinatorState().snapshot_without_jobs();
        state["job_parts"] =
            boost::json::array{boost::json::object{{"job", "j"}, {"file", file}, {"crc32", "00000000"}}};
        write(snapshot_file(dir.path(), 7), journal::incremental_snapshot_text(7, state));
        return error_of([&] { DurableState::open(dir.path(), manual_snapshots()); }, Errc::parse);
    };
    for (const std::string_view file : {"../outside.json", "/etc/passwd", "part-7-0.json", "snapshot-1.json"}) {
        const std::string message = snapshot_naming(file);
        EXPECT_NE(message.find(snapshot_file(dir.path(), 7).string() + ": byte 0: "), std::string::npos) << message;
        EXPECT_NE(message.find(fmt::format("'{}' is not a part file name", file)), std::string::npos) << message;
    }
}

// A directory written before incremental snapshots: snapshot version 1,
// the whole state in one file. It loads, and the next snapshot, version 2,
// is pruned alongside it.
TEST(CoordinatorSnapshotParts, VersionOneSnapshotStillLoads) {
    TempDir dir;
    uint64_t s1 = 0;
    std::string expected;
    {
        DurableState d = DurableState::open(dir.path(), manual_snapshots());
        add_jobs(d, 4);
        s1 = d.stats().last_seq;
        expected = text_of(d.state());
        write(snapshot_file(dir.path(), s1), journal::snapshot_text(s1, d.state().snapshot()));
    }
    ASSERT_NE(read(snapshot_file(dir.path(), s1)).find("\"version\":1,"), std::string::npos);
    DurableState d = DurableState::open(dir.path(), manual_snapshots());
    EXPECT_EQ(text_of(d.state()), expected);
    EXPECT_EQ(d.stats().snapshot_seq, s1);
    EXPECT_TRUE(parts(dir.path()).empty());
    change(d, 2, "after");
    d.snapshot();
    EXPECT_EQ(parts(dir.path()).size(), 4u);  // the first after start-up writes every job
    expected = text_of(d.state());
    EXPECT_EQ(text_of(DurableState::open(dir.path(), manual_snapshots()).state()), expected);
}

// With the writer thread the snapshot thread's replica tracks the changes:
// the second snapshot writes one part.
TEST(CoordinatorSnapshotParts, WriterThreadWritesIncrementalSnapshots) {
    TempDir dir;
    DurableState d = DurableState::open(dir.path(), manual_snapshots());
    add_jobs(d, 5);
    d.start_writer([](uint64_t, std::exception_ptr failure) { EXPECT_FALSE(failure); });
    d.snapshot();
    d.flush();
    EXPECT_EQ(d.stats().parts_written, 5u);
    change(d, 2, "via the writer");
    d.snapshot();
    d.flush();
    const JournalStats stats = d.stats();
    EXPECT_EQ(stats.snapshots, 2u);
    EXPECT_EQ(stats.parts_written, 6u);
    EXPECT_EQ(stats.parts_reused, 4u);
    EXPECT_NE(read(only_part(dir.path(), stats.snapshot_seq)).find("via the writer"), std::string::npos);
    const std::string expected = text_of(d.state());
    d = DurableState::open(dir.path() / "elsewhere", manual_snapshots());  // stops the writer
    EXPECT_EQ(text_of(DurableState::open(dir.path(), manual_snapshots()).state()), expected);
}

// A crash after a snapshot's parts were written and before its file was:
// the parts are removed at start-up, with a warning, and nothing is lost.
TEST(CoordinatorSnapshotParts, PartsOfAnUnfinishedSnapshotAreRemovedAtStartUp) {
    TempDir dir;
    std::string expected;
    uint64_t s1 = 0;
    {
        DurableState d = DurableState::open(dir.path(), manual_snapshots());
        add_jobs(d, 3);
        d.snapshot();
        s1 = d.stats().snapshot_seq;
        change(d, 0, "journaled only");
        expected = text_of(d.state());
    }
    const fs::path whole = dir.path() / fmt::format("part-{:020}-000000.json", s1 + 1);
    const fs::path torn = dir.path() / fmt::format("part-{:020}-000001.json", s1 + 1);
    write(whole, read(dir.path() / fmt::format("part-{:020}-000000.json", s1)));
    write(torn, "{\"format\":\"cohort-coordinator-snapshot-part\",\"ver");
    std::vector<std::string> warnings;
    const DurableState d = DurableState::open(dir.path(), manual_snapshots(), collect(warnings));
    EXPECT_EQ(text_of(d.state()), expected);
    ASSERT_EQ(warnings.size(), 2u);
    EXPECT_NE(warnings[0].find(whole.string() + ": removed a part of an unfinished snapshot, left by a crash"),
              std::string::npos)
        << warnings[0];
    EXPECT_NE(warnings[1].find(torn.string()), std::string::npos) << warnings[1];
    EXPECT_FALSE(fs::exists(whole));
    EXPECT_FALSE(fs::exists(torn));
    EXPECT_EQ(parts(dir.path()).size(), 3u);
}

}  // namespace
}  // namespace cohort::coord
