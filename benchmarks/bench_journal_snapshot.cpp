// Question (issue 19, defect 8): does a snapshot of a big coordinator state
// hold the replies of other clients? Before, the journal's writer thread
// built and wrote each whole-state snapshot itself, so every reply queued
// behind it waited for it (0.8 s at 230,000 members). Now a snapshot
// thread writes it while the writer goes on.
//
// One process, the journal alone (no HTTP, so the figures are the
// journal's): a state of --members members in --jobs jobs, then
//   1. the stall before, measured directly: building, writing and fsyncing
//      one snapshot of this state, as the writer did between two batches
//      (three times; the median and the largest);
//   2. the anchor: a producer commits one store write every 1/--rate s for
//      --seconds with the writer thread and no snapshots, and times each
//      commit until the writer reports it durable (what a reply waits for);
//   3. the same with a snapshot every --snapshot-every events; the writes
//      go to one job, so each incremental snapshot rewrites that job's part
//      alone (after the first, which writes every job);
//   4. the same with the writes spread over every job: every snapshot
//      rewrites every part, what a whole-state snapshot costs.
// The physical floor is the disk's fsync, which the anchor includes; the
// target is that 3's p99 and max stay near 2's, far under 1.
//
//   build/benchmarks/bench_journal_snapshot [--members 230000] [--jobs 23]
//       [--rate 2000] [--seconds 20] [--snapshot-every 10000] [--dir DIR]
//
// It exits 1 when a commit is never reported durable.
#include "coordinator/journal/durable_state.hpp"
#include "coordinator/journal/record.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using cohort::coord::DurableState;
using cohort::coord::JournalOptions;

struct Options {
    std::size_t members = 230000;
    std::size_t jobs = 23;
    double rate = 2000;
    double seconds = 20;
    uint64_t snapshot_every = 10000;
    std::string dir;  // empty: a fresh folder under the temp directory
};

double ms(Clock::duration d) {
    return std::chrono::duration<double, std::milli>(d).count();
}

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
    return v[std::min(i, v.size() - 1)];
}

std::string load_average() {
    std::ifstream in("/proc/loadavg");
    std::string one, five, fifteen;
    in >> one >> five >> fifteen;
    return one + " " + five + " " + fifteen;
}

// A data directory holding `members` members, each in a running world.
DurableState populated(const fs::path& dir, const Options& o) {
    JournalOptions manual;
    manual.snapshot_every = 0;
    DurableState d = DurableState::open(dir, manual);
    const std::size_t per_job = (o.members + o.jobs - 1) / o.jobs;
    std::size_t made = 0;
    for (std::size_t j = 0; j < o.jobs && made < o.members; ++j) {
        const std::string job = "job-" + std::to_string(j);
        cohort::coord::JobSettings settings;
        const std::size_t here = std::min(per_job, o.members - made);
        settings.min_nodes = settings.max_nodes = static_cast<uint32_t>(here);
        d.state().create_job(job, settings, 1);
        for (std::size_t m = 0; m < here; ++m, ++made) {
            cohort::Node node;
            node.id = job + "-member-" + std::to_string(m);
            node.host = "host-" + std::to_string(m / 8);
            node.address = "10.0." + std::to_string(m / 250 % 250) + "." + std::to_string(m % 250) + ":29500";
            d.state().join(job, node, 1);
        }
        d.commit();
    }
    d.snapshot();
    return d;
}

struct Stall {
    double build_ms, write_ms, bytes;
};

// What the writer used to do between two batches: build the snapshot's
// JSON, its text, and write and fsync it.
Stall inline_snapshot(DurableState& d, const fs::path& dir) {
    const auto t0 = Clock::now();
    const boost::json::value state = d.state().snapshot();
    const std::string text = cohort::coord::journal::snapshot_text(d.queued_seq(), state);
    const auto t1 = Clock::now();
    const fs::path file = dir / "inline-snapshot.json";
    {
        std::FILE* f = std::fopen(file.c_str(), "wbe");
        if (f == nullptr || std::fwrite(text.data(), 1, text.size(), f) != text.size()) {
            throw std::runtime_error("cannot write " + file.string());
        }
        std::fflush(f);
        ::fsync(::fileno(f));
        std::fclose(f);
    }
    const auto t2 = Clock::now();
    fs::remove(file);
    return {ms(t1 - t0), ms(t2 - t1), static_cast<double>(text.size())};
}

struct Run {
    std::vector<double> latencies_ms;
    uint64_t snapshots = 0;
    uint64_t parts_written = 0;
    uint64_t parts_reused = 0;
    uint64_t last_snapshot_bytes = 0;  // the newest snapshot's parts and file
};

// One producer thread commits a store write every 1/rate s; each commit's
// latency runs until the writer reports its sequence number durable.
Run steady_writes(DurableState& d, const Options& o, std::size_t busy_jobs) {
    std::mutex mutex;
    std::condition_variable cv;
    std::vector<std::pair<uint64_t, Clock::time_point>> reports;
    uint64_t newest = 0;
    d.start_writer([&](uint64_t seq, std::exception_ptr failure) {
        if (failure) return;
        const auto now = Clock::now();
        std::lock_guard lock(mutex);
        reports.emplace_back(seq, now);
        newest = std::max(newest, seq);
        cv.notify_all();
    });
    const cohort::coord::JournalStats before = d.stats();
    std::vector<std::pair<uint64_t, Clock::time_point>> commits;
    const auto period = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1.0 / o.rate));
    const auto start = Clock::now();
    const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
    const std::string value(100, 'v');
    auto next = start;
    for (uint64_t i = 0; Clock::now() < end; ++i) {
        std::this_thread::sleep_until(next);
        next += period;
        d.state().store_set("job-" + std::to_string(i % busy_jobs), 1, "key-" + std::to_string(i % 1000), value, 2);
        const auto at = Clock::now();
        d.commit();
        commits.emplace_back(d.queued_seq(), at);
    }
    {
        std::unique_lock lock(mutex);
        const uint64_t last = commits.empty() ? 0 : commits.back().first;
        if (!cv.wait_for(lock, std::chrono::seconds(60), [&] { return newest >= last; })) {
            throw std::runtime_error("commits were not reported durable within 60 s");
        }
    }
    d.flush();
    Run out;
    const cohort::coord::JournalStats after = d.stats();
    out.snapshots = after.snapshots - before.snapshots;
    out.parts_written = after.parts_written - before.parts_written;
    out.parts_reused = after.parts_reused - before.parts_reused;
    out.last_snapshot_bytes = after.snapshot_bytes;
    std::lock_guard lock(mutex);
    std::size_t r = 0;
    for (const auto& [seq, at] : commits) {
        while (r < reports.size() && reports[r].first < seq) ++r;
        out.latencies_ms.push_back(ms(reports[r].second - at));
    }
    return out;
}

void print_row(const char* what, const Run& run) {
    const auto& v = run.latencies_ms;
    std::printf("| %s | %zu | %llu | %llu / %llu | %.1f | %.2f | %.2f | %.2f | %.1f |\n", what, v.size(),
                static_cast<unsigned long long>(run.snapshots), static_cast<unsigned long long>(run.parts_written),
                static_cast<unsigned long long>(run.parts_reused), static_cast<double>(run.last_snapshot_bytes) / 1e6,
                percentile(v, 0.5), percentile(v, 0.99),
                percentile(v, 0.999), v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()));
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        if (flag == "--help" || flag == "-h") {
            std::printf(
                "usage: bench_journal_snapshot [--members N] [--jobs J] [--rate R] [--seconds S] "
                "[--snapshot-every E] [--dir DIR]\n");
            std::exit(0);
        }
        if (i + 1 >= argc) throw std::runtime_error(flag + " needs a value; see --help");
        const std::string value = argv[++i];
        if (flag == "--dir") {
            o.dir = value;
            continue;
        }
        std::size_t used = 0;
        double v = 0;
        try {
            v = std::stod(value, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used != value.size() || !(v > 0)) throw std::runtime_error(flag + " needs a positive number, not '" + value + "'");
        if (flag == "--members") o.members = static_cast<std::size_t>(v);
        else if (flag == "--jobs") o.jobs = static_cast<std::size_t>(v);
        else if (flag == "--rate") o.rate = v;
        else if (flag == "--seconds") o.seconds = v;
        else if (flag == "--snapshot-every") o.snapshot_every = static_cast<uint64_t>(v);
        else throw std::runtime_error("unknown flag '" + flag + "'; see --help");
    }
    if (o.jobs < 1 || o.members < o.jobs) throw std::runtime_error("--members must be at least --jobs (1 or more)");
    return o;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        const Options o = parse(argc, argv);
        fs::path root = o.dir.empty() ? fs::temp_directory_path() : fs::path(o.dir);
        std::string pattern = (root / "bench-journal-XXXXXX").string();
        if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("cannot make a folder under " + root.string());
        const fs::path dir = pattern;
        std::printf("bench_journal_snapshot: %zu members in %zu jobs, %.0f writes/s for %.0f s, snapshot every %llu "
                    "events, in %s; load average %s\n",
                    o.members, o.jobs, o.rate, o.seconds, static_cast<unsigned long long>(o.snapshot_every),
                    dir.c_str(), load_average().c_str());
        const auto t0 = Clock::now();
        {
            DurableState seed = populated(dir / "seed", o);
        }
        std::printf("state built and journaled in %.1f s\n\n", ms(Clock::now() - t0) / 1000);

        // 1. The stall before: what the writer did between two batches.
        std::vector<Stall> stalls;
        {
            DurableState d = DurableState::open(dir / "seed");
            for (int i = 0; i < 3; ++i) stalls.push_back(inline_snapshot(d, dir));
        }
        std::vector<double> totals;
        for (const Stall& s : stalls) totals.push_back(s.build_ms + s.write_ms);
        std::printf("one whole snapshot, %.1f MB: build %.0f ms + write and fsync %.0f ms; total median %.0f ms, max "
                    "%.0f ms (what a reply queued behind it waited before)\n\n",
                    stalls[0].bytes / 1e6, stalls[0].build_ms, stalls[0].write_ms, percentile(totals, 0.5),
                    *std::max_element(totals.begin(), totals.end()));

        std::printf("| commit until reported durable | commits | snapshots | parts written / reused | last "
                    "snapshot MB | p50 ms | p99 ms | p99.9 ms | max ms |\n");
        std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        // 2, 3 and 4 each start from a copy of the seed directory.
        struct Case {
            const char* name;
            uint64_t every;
            std::size_t busy_jobs;
        };
        const Case cases[] = {{"2. anchor: no snapshots, writes to one job", 0, 1},
                              {"3. a snapshot every --snapshot-every events, writes to one job", o.snapshot_every, 1},
                              {"4. the same, writes spread over every job", o.snapshot_every, o.jobs}};
        for (const Case& c : cases) {
            const fs::path copy = dir / ("case-" + std::to_string(&c - cases));
            fs::copy(dir / "seed", copy);
            JournalOptions jo;
            jo.snapshot_every = c.every;
            DurableState d = DurableState::open(copy, jo);
            print_row(c.name, steady_writes(d, o, c.busy_jobs));
            fs::remove_all(copy);
        }
        std::printf("\nload average after: %s\n", load_average().c_str());
        fs::remove_all(dir);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_journal_snapshot: %s\n", e.what());
        return 1;
    }
}
