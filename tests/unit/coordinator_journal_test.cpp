// coordinator/journal: the state survives a restart on the same directory:
// through the journal, through snapshots, after a torn last line and after
// kill -9 mid-commit; any other damage (a journal missing or emptied
// included) stops start-up with a message that names the file and says
// what to do; the files are private (0700/0600).
#include "coordinator/journal/durable_state.hpp"
#include "coordinator/journal/record.hpp"
#include "core/json_text.hpp"
#include "journal_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

namespace cohort::coord {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

using testing::collect;
using testing::error_of;
using testing::read;
using testing::TempDir;
using testing::text_of;
using testing::write;

// Byte offset where line `index` (0-based) of `text` starts.
std::size_t line_start(const std::string& text, std::size_t index) {
    std::size_t at = 0;
    for (std::size_t i = 0; i < index; ++i) at = text.find('\n', at) + 1;
    return at;
}

std::size_t line_count(const std::string& text) {
    return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

fs::path journal_file(const fs::path& dir, uint64_t seq) {
    return dir / fmt::format("journal-{:020}.jsonl", seq);
}

// A two-node job with a dataset; every step commits heartbeats, store
// writes and a shard lease (times with fractions that text must keep exact).
class Workload {
public:
    void start(DurableState& d) {
        JobSettings s;
        s.min_nodes = s.max_nodes = 2;
        s.failure_timeout = 1e6;
        CoordinatorState& st = d.state();
        st.create_job("j", s, t_);
        for (const char* id : {"a", "b"}) {
            Node n;
            n.id = id;
            n.host = std::string("host-") + id;
            n.address = std::string(id) + ":5000";
            st.join("j", n, t_);
        }
        DatasetPlan plan;
        for (int i = 0; i < 40; ++i) plan.shards.push_back(ShardSpec{"s" + std::to_string(i), 100u + i, {"host-a"}});
        plan.epochs = 3;
        plan.lease_duration = 1e6;
        st.register_dataset("j", plan, t_);
        d.commit();
    }

    void step(DurableState& d) {
        CoordinatorState& st = d.state();
        t_ += 0.1;
        const uint64_t gen = st.job("j").generation();
        HeartbeatMetrics m;
        m.step = i_;
        m.step_time = 0.3 + i_ / 7.0;
        st.heartbeat("j", "a", gen, m, t_);
        st.heartbeat("j", "b", gen, std::nullopt, t_);
        st.store_set("j", gen, "key" + std::to_string(i_ % 5), "value " + std::to_string(i_), t_);
        st.store_add("j", gen, "count", 1, t_);
        const ShardLease next = st.next_shard("j", i_ % 2 == 0 ? "a" : "b", t_);
        if (next.granted && i_ % 3 != 0) st.shard_done("j", i_ % 2 == 0 ? "a" : "b", next.lease, t_);
        ++i_;
        d.commit();
    }

    // One event: a store write.
    void store_only(DurableState& d, std::string_view key) {
        t_ += 0.1;
        d.state().store_set("j", d.state().job("j").generation(), key, "x", t_);
        d.commit();
    }

private:
    double t_ = 1700000000.3;
    uint64_t i_ = 0;
};

JournalOptions manual_snapshots() {
    JournalOptions o;
    o.snapshot_every = 0;
    return o;
}

TEST(CoordinatorJournal, ReopenGivesTheSameState) {
    TempDir dir;
    Workload w;
    std::string before;
    uint64_t last = 0;
    {
        DurableState d = DurableState::open(dir.path() / "data", manual_snapshots());
        w.start(d);
        for (int i = 0; i < 50; ++i) w.step(d);
        before = text_of(d.state());
        last = d.stats().last_seq;
        EXPECT_GT(last, 250u);
        EXPECT_EQ(d.state().job("j").generation(), 1u);
    }
    std::vector<std::string> warnings;
    DurableState d = DurableState::open(dir.path() / "data", manual_snapshots(), collect(warnings));
    EXPECT_EQ(text_of(d.state()), before);
    EXPECT_EQ(d.stats().last_seq, last);
    EXPECT_TRUE(warnings.empty());
    EXPECT_TRUE(d.state().take_events().empty());
    // Appends continue the numbering.
    w.step(d);
    const std::string after = text_of(d.state());
    const uint64_t last_after = d.stats().last_seq;
    EXPECT_GT(last_after, last);
    DurableState again = DurableState::open(dir.path() / "data", manual_snapshots());
    EXPECT_EQ(text_of(again.state()), after);
    EXPECT_EQ(again.stats().last_seq, last_after);
}

TEST(CoordinatorJournal, SnapshotThenMoreEvents) {
    TempDir dir;
    Workload w;
    std::string before;
    uint64_t at_snapshot = 0;
    {
        DurableState d = DurableState::open(dir.path(), manual_snapshots());
        w.start(d);
        for (int i = 0; i < 20; ++i) w.step(d);
        d.snapshot();
        at_snapshot = d.stats().last_seq;
        EXPECT_EQ(d.stats().snapshot_seq, at_snapshot);
        for (int i = 0; i < 20; ++i) w.step(d);
        before = text_of(d.state());
    }
    EXPECT_TRUE(fs::exists(dir.path() / fmt::format("snapshot-{:020}.json", at_snapshot)));
    EXPECT_TRUE(fs::exists(journal_file(dir.path(), 0)));  // kept: the way back if the snapshot is damaged
    EXPECT_TRUE(fs::exists(journal_file(dir.path(), at_snapshot)));
    const std::string first = read(journal_file(dir.path(), at_snapshot));
    EXPECT_NE(first.find(fmt::format("{{\"seq\":{},\"event\":", at_snapshot + 1)), std::string::npos);

    DurableState d = DurableState::open(dir.path(), manual_snapshots());
    EXPECT_EQ(text_of(d.state()), before);
    EXPECT_EQ(d.stats().snapshot_seq, at_snapshot);
}

TEST(CoordinatorJournal, AutomaticSnapshotsKeepTheNewest) {
    TempDir dir;
    Workload w;
    JournalOptions o;
    o.snapshot_every = 60;
    o.keep = 2;
    std::string before;
    {
        DurableState d = DurableState::open(dir.path(), o);
        w.start(d);
        for (int i = 0; i < 80; ++i) w.step(d);
        EXPECT_GE(d.stats().snapshots, 5u);
        before = text_of(d.state());
    }
    std::vector<std::string> snapshots, journals;
    for (const auto& entry : fs::directory_iterator(dir.path())) {
        const std::string name = entry.path().filename().string();
        if (name == "manifest.json" || name.starts_with("part-")) continue;
        (name.starts_with("snapshot-") ? snapshots : journals).push_back(name);
    }
    std::sort(snapshots.begin(), snapshots.end());
    std::sort(journals.begin(), journals.end());
    ASSERT_EQ(snapshots.size(), 2u);
    ASSERT_EQ(journals.size(), 2u);  // the ones that follow the kept snapshots
    EXPECT_EQ(journals[0].substr(8, 20), snapshots[0].substr(9, 20));
    EXPECT_EQ(journals[1].substr(8, 20), snapshots[1].substr(9, 20));
    EXPECT_EQ(text_of(DurableState::open(dir.path(), o).state()), before);
}

TEST(CoordinatorJournal, TornLastLineIsDroppedWithAWarning) {
    TempDir dir;
    Workload w;
    std::string before;
    {
        DurableState d = DurableState::open(dir.path(), manual_snapshots());
        w.start(d);
        for (int i = 0; i < 10; ++i) w.step(d);
        before = text_of(d.state());
    }
    // A write cut short: the next event's line without its last 7 bytes (a
    // line that was fsynced, and so in the manifest, cannot be torn).
    const fs::path file = journal_file(dir.path(), 0);
    std::string text = read(file);
    const std::size_t last_line = text.size();
    const std::string line = journal::journal_line(line_count(text) + 1, event::JobDeleted{"j", 1});
    text += line.substr(0, line.size() - 7);
    write(file, text);

    std::vector<std::string> warnings;
    DurableState d = DurableState::open(dir.path(), manual_snapshots(), collect(warnings));
    EXPECT_EQ(text_of(d.state()), before);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find(file.string() + ": byte " + std::to_string(last_line)), std::string::npos)
        << warnings[0];
    EXPECT_NE(warnings[0].find("no end"), std::string::npos) << warnings[0];
    EXPECT_EQ(fs::file_size(file), last_line);

    // The next commit takes the dropped event's number and the file reads back cleanly.
    const uint64_t last = d.stats().last_seq;
    w.store_only(d, "next");
    EXPECT_EQ(d.stats().last_seq, last + 1);
    const std::string expected = text_of(d.state());
    warnings.clear();
    DurableState again = DurableState::open(dir.path(), manual_snapshots(), collect(warnings));
    EXPECT_EQ(text_of(again.state()), expected);
    EXPECT_TRUE(warnings.empty());
}

// A crash cuts an append short before its '\n': a complete last line that
// fails its checksum was damaged afterwards, and is not dropped.
TEST(CoordinatorJournal, CompleteLastLineWithBadChecksumStopsStartUp) {
    TempDir dir;
    Workload w;
    {
        DurableState d = DurableState::open(dir.path(), manual_snapshots());
        w.start(d);
        for (int i = 0; i < 10; ++i) w.step(d);
        w.store_only(d, "last");
    }
    const fs::path file = journal_file(dir.path(), 0);
    std::string text = read(file);
    const std::size_t last_line = line_start(text, line_count(text) - 1);
    text[last_line + 20] ^= 1;  // a flipped bit inside the last line
    write(file, text);

    std::vector<std::string> warnings;
    const std::string message =
        error_of([&] { DurableState::open(dir.path(), manual_snapshots(), collect(warnings)); }, Errc::parse);
    EXPECT_NE(message.find(file.string() + ": byte " + std::to_string(last_line) + ": checksum mismatch"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("a complete line, so not one a crash cut short"), std::string::npos) << message;
    EXPECT_NE(message.find("restore the data directory from a backup, or truncate this file to " +
                           std::to_string(last_line) + " bytes"),
              std::string::npos)
        << message;
    EXPECT_TRUE(warnings.empty());
    EXPECT_EQ(read(file), text);  // nothing repaired behind the operator's back

    // Doing what the message says starts from the events before the line.
    fs::resize_file(file, last_line);
    fs::remove(dir.path() / "manifest.json");
    DurableState d = DurableState::open(dir.path(), manual_snapshots());
    EXPECT_EQ(d.stats().last_seq, line_count(text) - 1);
}

// The events of one journal, and then the journal is deleted or emptied:
// the manifest says events were fsynced there, so start-up stops.
TEST(CoordinatorJournal, MissingOrEmptyNewestJournalStopsStartUp) {
    for (const bool snapshot : {false, true}) {
        for (const bool missing : {true, false}) {
            SCOPED_TRACE(
                fmt::format("{}, {}", snapshot ? "after a snapshot" : "no snapshot", missing ? "missing" : "empty"));
            TempDir dir;
            Workload w;
            uint64_t base = 0, last = 0;
            {
                DurableState d = DurableState::open(dir.path(), manual_snapshots());
                w.start(d);
                for (int i = 0; i < 3; ++i) w.step(d);
                if (snapshot) d.snapshot();
                base = snapshot ? d.stats().last_seq : 0;
                for (int i = 0; i < 3; ++i) w.step(d);
                last = d.stats().last_seq;
            }
            const fs::path file = journal_file(dir.path(), base);
            if (missing) {
                fs::remove(file);
            } else {
                fs::resize_file(file, 0);
            }
            const std::string message = error_of([&] { DurableState::open(dir.path()); }, Errc::parse);
            const fs::path manifest = dir.path() / "manifest.json";
            EXPECT_NE(message.find(file.string() + ": the journal " +
                                   (missing ? "is missing, but " + manifest.string() + " names it as the newest one"
                                            : fmt::format("is empty: the events end at event {}", base))),
                      std::string::npos)
                << message;
            EXPECT_NE(message.find(fmt::format("event {} is the last left; events {} to ", base, base + 1)),
                      std::string::npos)
                << message;
            EXPECT_NE(message.find("restore the file from a backup"), std::string::npos) << message;
            EXPECT_NE(message.find("remove " + manifest.string()), std::string::npos) << message;
            EXPECT_EQ(fs::exists(file), !missing);
            EXPECT_GT(last, base);

            // Doing what the message says starts from what is left.
            fs::remove(manifest);
            std::vector<std::string> warnings;
            DurableState d = DurableState::open(dir.path(), {}, collect(warnings));
            EXPECT_EQ(d.stats().last_seq, base);
            if (!snapshot && missing) {
                EXPECT_TRUE(warnings.empty());  // nothing left: a new directory
            } else {
                ASSERT_EQ(warnings.size(), 1u);
                EXPECT_NE(warnings[0].find("no manifest"), std::string::npos) << warnings[0];
            }
        }
    }
}

// Nothing lost, nothing reported: a journal just started, and a crash
// between a snapshot and its journal's start (the manifest still names the
// journal before).
TEST(CoordinatorJournal, NoFalseAlarmAfterASnapshot) {
    TempDir dir;
    Workload w;
    std::string before;
    uint64_t seq = 0;
    {
        DurableState d = DurableState::open(dir.path(), manual_snapshots());
        w.start(d);
        for (int i = 0; i < 3; ++i) w.step(d);
        d.snapshot();
        seq = d.stats().last_seq;
        before = text_of(d.state());
    }
    EXPECT_EQ(fs::file_size(journal_file(dir.path(), seq)), 0u);
    std::vector<std::string> warnings;
    EXPECT_EQ(text_of(DurableState::open(dir.path(), {}, collect(warnings)).state()), before);
    EXPECT_TRUE(warnings.empty());

    fs::remove(journal_file(dir.path(), seq));
    write(dir.path() / "manifest.json", journal::manifest_text({0, seq - 2}));
    DurableState d = DurableState::open(dir.path(), {}, collect(warnings));
    EXPECT_EQ(text_of(d.state()), before);
    EXPECT_TRUE(warnings.empty());
    EXPECT_TRUE(fs::exists(journal_file(dir.path(), seq)));
}

// A journal deleted before any event reached it: nothing saved is lost,
// but a file the manifest names is gone, so start-up still stops.
TEST(CoordinatorJournal, MissingJournalWithNoSavedEventsStopsStartUp) {
    TempDir dir;
    uint64_t seq = 0;
    {
        DurableState d = DurableState::open(dir.path(), manual_snapshots());
        Workload w;
        w.start(d);
        d.snapshot();
        seq = d.stats().last_seq;
    }
    fs::remove(journal_file(dir.path(), seq));
    const fs::path manifest = dir.path() / "manifest.json";
    const std::string message = error_of([&] { DurableState::open(dir.path()); }, Errc::parse);
    EXPECT_NE(message.find(journal_file(dir.path(), seq).string() + ": the journal is missing, but " +
                           manifest.string() + " names it as the newest one;"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find(fmt::format("or remove {} to start from event {} (the manifest records no event after it "
                                       "as saved)",
                                       manifest.string(), seq)),
              std::string::npos)
        << message;
}

TEST(CoordinatorJournal, DamagedManifestStopsStartUp) {
    TempDir dir;
    { DurableState::open(dir.path()); }
    const fs::path manifest = dir.path() / "manifest.json";
    std::string text = read(manifest);
    text[text.size() / 2] ^= 2;
    write(manifest, text);
    const std::string message = error_of([&] { DurableState::open(dir.path()); }, Errc::parse);
    EXPECT_NE(message.find(manifest.string() + ": byte 0: the manifest"), std::string::npos) << message;
    EXPECT_NE(message.find("restore it from a backup, or remove it"), std::string::npos) << message;
}

// The directory and every file in it are the coordinator's user's alone,
// whatever the umask.
TEST(CoordinatorJournal, FilesArePrivate) {
    TempDir parent;
    const fs::path dir = parent.path() / "data";
    const mode_t saved = ::umask(0);
    {
        DurableState d = DurableState::open(dir, manual_snapshots());
        Workload w;
        w.start(d);
        d.snapshot();
        w.step(d);
    }
    ::umask(saved);
    const auto mode = [](const fs::path& p) { return fs::status(p).permissions() & fs::perms::all; };
    EXPECT_EQ(mode(dir), fs::perms::owner_all);
    std::size_t files = 0;
    for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
        EXPECT_EQ(mode(e.path()), fs::perms::owner_read | fs::perms::owner_write) << e.path();
        ++files;
    }
    EXPECT_EQ(files, 5u);  // two journals, a snapshot, its one job's part, the manifest
}

TEST(CoordinatorJournal, CorruptionBeforeTheEndStopsStartUp) {
    TempDir dir;
    Workload w;
    {
        DurableState d = DurableState::open(dir.path(), manual_snapshots());
        w.start(d);
        for (int i = 0; i < 10; ++i) w.step(d);
    }
    const fs::path file = journal_file(dir.path(), 0);
    const std::string good = read(file);

    std::string damaged = good;
    const std::size_t at = line_start(good, 7);
    damaged[at + 30] = damaged[at + 30] == 'x' ? 'y' : 'x';
    write(file, damaged);
    std::string message = error_of([&] { DurableState::open(dir.path()); }, Errc::parse);
    EXPECT_NE(message.find(file.string() + ": byte " + std::to_string(at) + ": checksum mismatch"), std::string::npos)
        << message;
    EXPECT_NE(message.find("truncate this file to " + std::to_string(at) + " bytes"), std::string::npos) << message;
    EXPECT_EQ(read(file), damaged);  // nothing repaired behind the operator's back

    // A line missing in the middle: a gap in the sequence numbers.
    const std::size_t next = line_start(good, 8);
    write(file, good.substr(0, at) + good.substr(next));
    message = error_of([&] { DurableState::open(dir.path()); }, Errc::parse);
    EXPECT_NE(message.find(file.string() + ": byte " + std::to_string(at) + ": event 9 follows event 7"),
              std::string::npos)
        << message;

    // A well-formed line the state refuses.
    Event bogus = event::JobDeleted{"nobody", 1};
    write(file, good.substr(0, at) + journal::journal_line(8, bogus) + good.substr(next));
    message = error_of([&] { DurableState::open(dir.path()); }, Errc::parse);
    EXPECT_NE(message.find(file.string() + ": byte " + std::to_string(at) + ": event 8 (job_deleted) does not fit"),
              std::string::npos)
        << message;

    write(file, good);
    EXPECT_NO_THROW(DurableState::open(dir.path()));
}

TEST(CoordinatorJournal, DamagedNewestSnapshotIsNotSkippedSilently) {
    TempDir dir;
    Workload w;
    JournalOptions o = manual_snapshots();
    o.keep = 3;
    std::string before;
    uint64_t first = 0, second = 0;
    {
        DurableState d = DurableState::open(dir.path(), o);
        w.start(d);
        for (int i = 0; i < 5; ++i) w.step(d);
        d.snapshot();
        first = d.stats().last_seq;
        for (int i = 0; i < 5; ++i) w.step(d);
        d.snapshot();
        second = d.stats().last_seq;
        for (int i = 0; i < 5; ++i) w.step(d);
        before = text_of(d.state());
    }
    const fs::path newest = dir.path() / fmt::format("snapshot-{:020}.json", second);
    std::string text = read(newest);
    text[text.size() / 2] ^= 4;
    write(newest, text);
    const std::string message = error_of([&] { DurableState::open(dir.path(), o); }, Errc::parse);
    EXPECT_NE(message.find(newest.string() + ": byte 0: the snapshot"), std::string::npos) << message;
    EXPECT_NE(message.find(fmt::format("move snapshot-{:020}.json out of the directory and start again to recover "
                                       "from snapshot-{:020}.json",
                                       second, first)),
              std::string::npos)
        << message;

    // Doing what the message says loses nothing.
    fs::rename(newest, dir.path() / "damaged.json");
    DurableState d = DurableState::open(dir.path(), o);
    EXPECT_EQ(text_of(d.state()), before);
    EXPECT_EQ(d.stats().snapshot_seq, first);

    // A journal that does not start where the events before it end.
    d = DurableState::open(dir.path() / "other", o);
    w = Workload();
    w.start(d);
    d.snapshot();
    const uint64_t a = d.stats().last_seq;
    w.step(d);
    d.snapshot();
    const uint64_t b = d.stats().last_seq;
    w.step(d);
    d = DurableState::open(dir.path() / "unused", o);
    fs::remove(dir.path() / "other" / fmt::format("snapshot-{:020}.json", b));
    fs::remove(journal_file(dir.path() / "other", a));
    const std::string gap = error_of([&] { DurableState::open(dir.path() / "other", o); }, Errc::parse);
    EXPECT_NE(gap.find(fmt::format("{}: byte 0: the journal starts after event {}, but the events before it end at "
                                   "event {}",
                                   journal_file(dir.path() / "other", b).string(), b, a)),
              std::string::npos)
        << gap;
}

TEST(CoordinatorJournal, LeftoverTemporaryIsRemoved) {
    TempDir dir;
    write(dir.path() / "snapshot-00000000000000000009.json.tmp", "{\"format\":");
    std::vector<std::string> warnings;
    DurableState d = DurableState::open(dir.path(), {}, collect(warnings));
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("unfinished snapshot"), std::string::npos);
    EXPECT_FALSE(fs::exists(dir.path() / "snapshot-00000000000000000009.json.tmp"));
    JournalOptions bad;
    bad.keep = 0;
    EXPECT_NE(error_of([&] { DurableState::open(dir.path(), bad); }, Errc::invalid_argument).find("keep"),
              std::string::npos);
}

TEST(CoordinatorJournal, FsyncIsBatched) {
    TempDir dir;
    JournalOptions o = manual_snapshots();
    o.fsync_interval = 10ms;
    DurableState d = DurableState::open(dir.path(), o);
    const auto t0 = DurableState::Clock::now();
    const uint64_t base = d.stats().syncs;

    d.state().create_job("k", JobSettings{}, 1);
    d.commit(t0);
    EXPECT_TRUE(d.stats().unsynced);
    EXPECT_EQ(d.sync_deadline(), t0 + 10ms);
    d.state().delete_job("k", 2);
    d.commit(t0 + 5ms);
    EXPECT_EQ(d.stats().syncs, base);
    EXPECT_FALSE(d.sync_due(t0 + 9ms));
    EXPECT_TRUE(d.sync_due(t0 + 10ms));
    d.state().create_job("k", JobSettings{}, 3);
    d.commit(t0 + 10ms);  // the oldest unsynced commit is 10 ms old
    EXPECT_EQ(d.stats().syncs, base + 1);
    EXPECT_FALSE(d.stats().unsynced);
    EXPECT_FALSE(d.sync_deadline());

    d.commit(t0 + 11ms);  // nothing new: nothing to sync
    EXPECT_FALSE(d.stats().unsynced);
    d.state().delete_job("k", 4);
    d.commit(t0 + 11ms);
    d.sync();  // the server's timer
    d.sync();
    EXPECT_EQ(d.stats().syncs, base + 2);

    // Interval 0: every commit with events fsyncs.
    o.fsync_interval = 0ms;
    d = DurableState::open(dir.path(), o);
    for (int i = 0; i < 3; ++i) {
        d.state().create_job("m" + std::to_string(i), JobSettings{}, 5);
        d.commit();
    }
    EXPECT_EQ(d.stats().syncs, 3u);
}

// A child commits in a loop and reports each commit through a pipe once
// commit() returned; the parent kills it with SIGKILL at some point and
// reopens: every reported commit is there, at most the one in flight is not.
TEST(CoordinatorJournal, SurvivesKillNineMidCommit) {
    TempDir dir;
    for (const int round : {0, 1, 2}) {
        SCOPED_TRACE("round " + std::to_string(round));
        int fds[2];
        ASSERT_EQ(::pipe(fds), 0);
        JournalOptions o;
        o.snapshot_every = 97;  // snapshots and new journals mid-run too
        o.fsync_interval = round == 0 ? 0ms : 1ms;
        const pid_t child = ::fork();
        ASSERT_GE(child, 0);
        if (child == 0) {
            ::close(fds[0]);
            try {
                DurableState d = DurableState::open(dir.path(), o);
                if (d.state().find_job("j") == nullptr) {
                    d.state().create_job("j", JobSettings{}, 1);
                    Node n;
                    n.id = "a";
                    d.state().join("j", n, 1);
                    d.commit();
                }
                for (;;) {
                    CoordinatorState& st = d.state();
                    const int64_t n = st.store_add("j", 1, "count", 1, 2);
                    st.store_set("j", 1, "padding", std::string(static_cast<std::size_t>(n % 300), 'p'), 2);
                    d.commit();
                    if (::write(fds[1], &n, sizeof n) != sizeof n) ::_exit(3);
                }
            } catch (...) {
                ::_exit(2);
            }
        }
        ::close(fds[1]);
        int64_t acknowledged = 0, n = 0;
        const int64_t stop_at = 150 + round * 37;
        while (acknowledged < stop_at && ::read(fds[0], &n, sizeof n) == sizeof n) acknowledged = n;
        ::kill(child, SIGKILL);
        int status = 0;
        ::waitpid(child, &status, 0);
        // Commits reported after the parent stopped reading are still in the pipe.
        while (::read(fds[0], &n, sizeof n) == sizeof n) acknowledged = n;
        ::close(fds[0]);
        ASSERT_TRUE(WIFSIGNALED(status)) << "the child stopped by itself with status " << status;

        std::vector<std::string> warnings;
        DurableState d = DurableState::open(dir.path(), o, collect(warnings));
        const auto count = d.state().store_get("j", 1, "count");
        ASSERT_TRUE(count.has_value());
        const int64_t found = std::stoll(*count);
        EXPECT_GE(found, acknowledged);
        EXPECT_LE(found, acknowledged + 1);
        // A kill while a snapshot or the manifest is written leaves its
        // temporary file (and a snapshot's parts), a warning each; one in a
        // journal append, a torn line.
        int torn = 0;
        for (const std::string& w : warnings) {
            const bool snapshot_left = w.find("removed an unfinished ") != std::string::npos ||
                                       w.find("removed a part of an unfinished snapshot") != std::string::npos;
            const bool torn_line = w.find("ignoring a torn last line") != std::string::npos;
            torn += torn_line ? 1 : 0;
            EXPECT_TRUE(snapshot_left || torn_line) << w;
        }
        EXPECT_LE(torn, 1) << ::testing::PrintToString(warnings);
        // And the journal goes on from there.
        d.state().store_add("j", 1, "count", 1000, 3);
        d.commit();
        const std::string expected = text_of(d.state());
        d = DurableState::open(dir.path() / "elsewhere", o);
        EXPECT_EQ(text_of(DurableState::open(dir.path(), o).state()), expected);
        d = DurableState::open(dir.path(), o);
        d.state().store_add("j", 1, "count", -1000, 3);
        d.commit();
    }
}

// With a writer thread commit() only queues; the writer reports durable
// sequence numbers in order, the last one is queued_seq(), and a reopen
// finds exactly the state. A snapshot is written by the writer too.
TEST(CoordinatorJournal, WriterThreadGroupsCommits) {
    TempDir dir;
    JournalOptions o = manual_snapshots();
    DurableState d = DurableState::open(dir.path(), o);
    std::mutex mutex;
    std::vector<uint64_t> reported;
    d.start_writer([&](uint64_t seq, std::exception_ptr failure) {
        EXPECT_FALSE(failure);
        std::lock_guard lock(mutex);
        reported.push_back(seq);
    });
    d.state().create_job("j", JobSettings{}, 1);
    Node n;
    n.id = "a";
    d.state().join("j", n, 1);
    d.commit();
    constexpr int kCommits = 500;
    for (int i = 0; i < kCommits; ++i) {
        d.state().store_set("j", 1, "k" + std::to_string(i), std::string(100, 'v'), 2);
        d.commit();
    }
    d.snapshot();
    d.state().store_set("j", 1, "after-the-snapshot", "x", 3);
    d.commit();
    d.flush();
    const uint64_t last = d.queued_seq();
    {
        std::lock_guard lock(mutex);
        ASSERT_FALSE(reported.empty());
        EXPECT_TRUE(std::is_sorted(reported.begin(), reported.end()));
        EXPECT_EQ(reported.back(), last);
    }
    const JournalStats stats = d.stats();
    EXPECT_EQ(stats.last_seq, last);
    EXPECT_EQ(stats.snapshots, 1u);
    EXPECT_EQ(stats.snapshot_seq, last - 1);
    EXPECT_LE(stats.syncs, uint64_t(kCommits) + 3);
    EXPECT_FALSE(stats.unsynced);
    EXPECT_FALSE(d.sync_deadline());
    EXPECT_TRUE(fs::exists(dir.path() / fmt::format("snapshot-{:020}.json", last - 1)));
    const std::string expected = text_of(d.state());
    d = DurableState::open(dir.path() / "elsewhere", o);  // stops the writer, drains its queue
    EXPECT_EQ(text_of(DurableState::open(dir.path(), o).state()), expected);
}

// A snapshot in progress holds no reply (defect 8): with the snapshot's
// temporary file a FIFO nobody reads, the snapshot thread blocks in open(),
// yet every later commit is reported durable, in journal-S. Once the FIFO
// is read the snapshot fails (a pipe cannot be fsynced): a warning, the
// journals stay, and the next snapshot is written; a reopen finds it all.
TEST(CoordinatorJournal, ASnapshotInProgressHoldsNoReply) {
    TempDir dir;
    std::mutex mutex;
    std::vector<std::string> warnings;
    DurableState d = DurableState::open(dir.path(), manual_snapshots(), [&](std::string w) {
        std::lock_guard lock(mutex);
        warnings.push_back(std::move(w));
    });
    std::condition_variable reported_cv;
    uint64_t reported = 0;
    d.start_writer([&](uint64_t seq, std::exception_ptr failure) {
        EXPECT_FALSE(failure);
        std::lock_guard lock(mutex);
        reported = std::max(reported, seq);
        reported_cv.notify_all();
    });
    d.state().create_job("j", JobSettings{}, 1);
    Node n;
    n.id = "a";
    d.state().join("j", n, 1);
    d.state().store_set("j", 1, "before", "x", 2);
    d.commit();
    const uint64_t s = d.queued_seq();
    const fs::path fifo = dir.path() / fmt::format("snapshot-{:020}.json.tmp", s);
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    d.snapshot();
    for (int i = 0; i < 50; ++i) {
        d.state().store_set("j", 1, "k" + std::to_string(i), "v", 3);
        d.commit();
    }
    const uint64_t last = d.queued_seq();
    {
        std::unique_lock lock(mutex);
        EXPECT_TRUE(reported_cv.wait_for(lock, 20s, [&] { return reported >= last; }))
            << "commits after the snapshot's marker waited for the snapshot: " << reported << " of " << last;
    }
    EXPECT_TRUE(fs::exists(dir.path() / fmt::format("journal-{:020}.jsonl", s)));
    EXPECT_FALSE(fs::exists(dir.path() / fmt::format("snapshot-{:020}.json", s)));
    EXPECT_EQ(d.stats().snapshots, 0u);

    // Unblock the snapshot thread: read what it writes until it closes.
    const int fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    bool seen = false;
    char buffer[65536];
    for (int i = 0; i < 2000; ++i) {
        const ssize_t got = ::read(fd, buffer, sizeof buffer);
        if (got > 0) seen = true;
        if (got == 0 && seen) break;
        if (got <= 0) std::this_thread::sleep_for(10ms);
    }
    ::close(fd);
    ASSERT_TRUE(seen) << "the snapshot thread never wrote the snapshot";
    d.flush();
    EXPECT_EQ(d.stats().snapshots, 0u);
    {
        std::lock_guard lock(mutex);
        ASSERT_EQ(warnings.size(), 1u);
        EXPECT_NE(warnings[0].find(fmt::format("cannot write the snapshot after event {}", s)), std::string::npos)
            << warnings[0];
        EXPECT_NE(warnings[0].find("the next snapshot tries again"), std::string::npos) << warnings[0];
    }
    d.snapshot();
    d.flush();
    const JournalStats stats = d.stats();
    EXPECT_EQ(stats.snapshots, 1u);
    EXPECT_EQ(stats.snapshot_seq, last);
    EXPECT_TRUE(fs::exists(dir.path() / fmt::format("snapshot-{:020}.json", last)));
    const std::string expected = text_of(d.state());
    d = DurableState::open(dir.path() / "elsewhere", manual_snapshots());
    EXPECT_EQ(text_of(DurableState::open(dir.path(), manual_snapshots()).state()), expected);
}

// With journal-S started and the snapshot after S not yet written, a
// restart replays the previous journal and journal-S.
TEST(CoordinatorJournal, AJournalStartedBeforeItsSnapshotReplays) {
    TempDir dir;
    std::string expected;
    uint64_t s = 0;
    {
        DurableState d = DurableState::open(dir.path(), manual_snapshots());
        d.start_writer([](uint64_t, std::exception_ptr) {});
        d.state().create_job("j", JobSettings{}, 1);
        Node n;
        n.id = "a";
        d.state().join("j", n, 1);
        d.state().store_set("j", 1, "one", "1", 1);
        d.commit();
        s = d.queued_seq();
        // A directory where the snapshot cannot be created: the snapshot
        // thread fails, the journal after it goes on.
        fs::create_directory(dir.path() / fmt::format("snapshot-{:020}.json.tmp", s));
        d.snapshot();
        d.state().store_set("j", 1, "two", "2", 2);
        d.commit();
        d.flush();
        EXPECT_EQ(d.stats().snapshots, 0u);
        expected = text_of(d.state());
    }
    fs::remove(dir.path() / fmt::format("snapshot-{:020}.json.tmp", s));
    EXPECT_TRUE(fs::exists(dir.path() / fmt::format("journal-{:020}.jsonl", s)));
    EXPECT_TRUE(fs::exists(dir.path() / fmt::format("journal-{:020}.jsonl", 0)));
    EXPECT_EQ(text_of(DurableState::open(dir.path(), manual_snapshots()).state()), expected);
}

// An answer waits for every queued event but heartbeats: a heartbeat's
// record lost in a power loss is one a restart's resume() makes moot.
TEST(CoordinatorJournal, AnswersWaitForEverythingButHeartbeats) {
    TempDir dir;
    DurableState d = DurableState::open(dir.path(), manual_snapshots());
    d.state().create_job("j", JobSettings{}, 1);
    Node n;
    n.id = "a";
    d.state().join("j", n, 1);
    d.commit();
    d.start_writer([](uint64_t, std::exception_ptr) {});
    const uint64_t joined = d.queued_seq();
    EXPECT_EQ(d.answer_seq(), joined);
    d.state().heartbeat("j", "a", 0, std::nullopt, 2);
    d.commit();
    EXPECT_EQ(d.queued_seq(), joined + 1);
    EXPECT_EQ(d.answer_seq(), joined);
    d.state().store_set("j", 1, "k", "v", 3);
    d.state().heartbeat("j", "a", 0, std::nullopt, 3);
    d.commit();
    EXPECT_EQ(d.queued_seq(), joined + 3);
    EXPECT_EQ(d.answer_seq(), joined + 2);
    d.flush();
    EXPECT_EQ(d.stats().last_seq, joined + 3);  // heartbeats are journaled all the same
}

// A child commits through the writer thread and reports each sequence
// number the writer calls durable; after SIGKILL every reported one is on
// disk.
TEST(CoordinatorJournal, WriterThreadLosesNothingReportedDurable) {
    TempDir dir;
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    JournalOptions o;
    o.snapshot_every = 211;
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        ::close(fds[0]);
        try {
            DurableState d = DurableState::open(dir.path(), o);
            d.state().create_job("j", JobSettings{}, 1);
            Node n;
            n.id = "a";
            d.state().join("j", n, 1);
            d.commit();
            d.start_writer([&](uint64_t seq, std::exception_ptr failure) {
                if (failure || ::write(fds[1], &seq, sizeof seq) != sizeof seq) ::_exit(3);
            });
            for (int64_t i = 0;; ++i) {
                d.state().store_add("j", 1, "count", 1, 2);
                d.commit();
            }
        } catch (...) {
            ::_exit(2);
        }
    }
    ::close(fds[1]);
    uint64_t durable = 0, seq = 0;
    while (durable < 2000 && ::read(fds[0], &seq, sizeof seq) == sizeof seq) durable = seq;
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    while (::read(fds[0], &seq, sizeof seq) == sizeof seq) durable = std::max(durable, seq);
    ::close(fds[0]);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the child stopped by itself with status " << status;
    ASSERT_GE(durable, 2000u);
    DurableState d = DurableState::open(dir.path(), o);
    EXPECT_GE(d.stats().last_seq, durable);
    EXPECT_TRUE(d.state().store_get("j", 1, "count").has_value());
}

}  // namespace
}  // namespace cohort::coord
