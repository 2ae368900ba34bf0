// health: heartbeat metrics parsing, the per-member window, straggler scores
// and the settings. Hang detection and diagnosis: health_hang_test.cpp.
#include "coordinator/protocol/metrics.hpp"
#include "coordinator/state/settings.hpp"
#include "health/settings.hpp"
#include "health/straggler.hpp"

#include "coordinator_support.hpp"
#include "health_support.hpp"

#include <gtest/gtest.h>

namespace cohort::health {
namespace {

using coord::parse_json;
using coord::testing::expect_error;
using namespace testing;

// The heartbeat's metrics as the route reads them (coordinator/protocol):
// what the health windows are fed.
TEST(HealthReport, ParsesEveryFieldAndPrintsItBack) {
    const HeartbeatMetrics r = report(R"({"step": 12, "step_time": 0.5, "samples_per_sec": 256, "data_wait": 0.01,
        "collective_wait": 0.2, "collective_seq": 57, "in_collective": true, "gpu": {"gpus": []},
        "samples": [{"age": 1.5, "step": 11, "step_time": 0.4}, {"step": 12}]})");
    EXPECT_EQ(r.step, 12u);
    EXPECT_EQ(r.collective_wait, 0.2);
    EXPECT_EQ(r.collective_seq, 57u);
    EXPECT_EQ(r.in_collective, true);
    ASSERT_EQ(r.samples.size(), 2u);
    EXPECT_EQ(r.samples[0].age, 1.5);  // before sending
    EXPECT_EQ(r.samples[0].step_time, 0.4);
    EXPECT_FALSE(r.samples[0].data_wait);
    EXPECT_EQ(r.samples[1].age, 0);
    EXPECT_EQ(r.gpu_json, R"({"gpus":[]})");
    EXPECT_EQ(coord::protocol::read<HeartbeatMetrics>(coord::protocol::write(r), "again", coord::protocol::kJournal),
              r);
    EXPECT_EQ(report("{}"), HeartbeatMetrics{});
}

TEST(HealthReport, BadMetricsNameTheField) {
    const auto bad = [](const char* text, const char* message) {
        expect_error([&] { report(text); }, Errc::invalid_argument, message);
    };
    bad(R"({"stepp": 1})", "metrics: unknown field 'stepp' (did you mean 'step'?)");
    bad(R"({"step_time": -1})", "metrics: step_time: must not be negative, not -1");
    bad(R"({"step": -3})", "metrics: step: must not be negative, not -3");
    bad(R"({"step": "7"})", "metrics: step: must be a whole number, not a string");
    bad(R"({"in_collective": 1})", "metrics: in_collective: must be true or false, not a number");
    bad(R"({"samples": {}})", "metrics: samples: must be a list, not an object");
    bad(R"({"samples": [{"step": 1}, {"step": 2, "age": -2}]})",
        "metrics: samples[1]: age: must not be negative, not -2");
    bad(R"({"samples": [{"age": 1}]})", "metrics: samples[0]: missing field 'step'");
    bad(R"({"samples": [{"step": 1, "gpu": 1}]})", "metrics: samples[0]: unknown field 'gpu'");
    expect_error([] { coord::protocol::read<HeartbeatMetrics>(parse_json("[]"), "hb", coord::protocol::kJournal); },
                 Errc::parse, "hb: expected an object, not a list");
}

TEST(HealthWindow, KeepsEachStepOnceAtItsReceiveTime) {
    NodeWindow w;
    // The latest step comes both batched and at the top level; its gaps are filled.
    w.add(report(R"({"step": 12, "collective_wait": 0.1, "samples": [{"age": 2, "step": 10, "step_time": 1},
        {"age": 1, "step": 11, "step_time": 1}, {"age": 0.5, "step": 12, "step_time": 1}]})"),
          100);
    ASSERT_EQ(w.samples().size(), 3u);
    EXPECT_EQ(w.samples()[0].time, 98);
    EXPECT_EQ(w.samples()[2].time, 99.5);
    EXPECT_EQ(w.samples()[2].collective_wait, 0.1);
    EXPECT_EQ(w.step(), 12u);
    EXPECT_EQ(w.step_advanced_at(), 99.5);
    // Steps at or below the newest held are merged or dropped, never held twice.
    w.add(report(R"({"samples": [{"age": 3, "step": 9}, {"age": 2, "step": 12, "data_wait": 0.3},
        {"age": 1, "step": 13}]})"),
          101);
    ASSERT_EQ(w.samples().size(), 4u);
    EXPECT_EQ(w.samples()[2].data_wait, 0.3);
    EXPECT_EQ(w.samples()[2].time, 99.5);
    EXPECT_EQ(w.samples()[3].step, 13u);
    EXPECT_EQ(w.last_heartbeat(), 101);
    // A repeated step does not move step_advanced_at: that is what a hang looks like.
    w.add(report(R"({"step": 13, "collective_seq": 4, "in_collective": true})"), 150);
    EXPECT_EQ(w.step_advanced_at(), 100);
    EXPECT_EQ(w.collective_seq(), 4u);
    w.add(report(R"({"step": 13})"), 151);  // collective state absent: the last one stands
    EXPECT_EQ(w.in_collective(), true);
    w.reset();
    EXPECT_FALSE(w.step());
    EXPECT_TRUE(w.samples().empty());
}

TEST(HealthWindow, IsBoundedByCountAndAge) {
    NodeWindow w(Settings{.window = 5, .window_seconds = 10});
    feed(w, 8, 0.1);
    ASSERT_EQ(w.samples().size(), 5u);
    EXPECT_EQ(w.samples().front().step, 4u);
    w.set_limits(Settings{.window = 50, .window_seconds = 10});
    feed(w, 3, 0.1, 20);  // steps 9-11 at 20-22: the rest are too old
    ASSERT_EQ(w.samples().size(), 3u);
    EXPECT_EQ(w.samples().front().step, 9u);
    w.add(report(R"({"step": 11})"), 40);  // the newest step outlives its sample
    EXPECT_TRUE(w.samples().empty());
    EXPECT_EQ(w.step(), 11u);
    w.add(report(R"({"step": 11})"), 41);
    EXPECT_TRUE(w.samples().empty());
}

// Members 0..n-1 with `busy[i]` seconds per step, 10 steps each.
std::vector<Scores> scores_of(std::vector<double> busy, const Settings& s = {}) {
    Job job;
    for (std::size_t i = 0; i < busy.size(); ++i) feed(job.add(static_cast<uint32_t>(i)).window, 10, busy[i]);
    std::vector<double> scratch;
    std::vector<Busy> b;
    for (const NodeInput& n : job.inputs()) b.push_back(busy_of(*n.window, s, scratch));
    return score(b, s);
}

TEST(HealthScores, RelativeScoreComparesBusyTimeWithTheMedian) {
    const auto s = scores_of({0.1, 0.1, 0.1, 0.1, 0.2});
    EXPECT_DOUBLE_EQ(*s[4].relative, 0.5);
    for (int i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(*s[i].relative, 1.0);
    EXPECT_DOUBLE_EQ(*s[4].individual, 1.0);  // steady, if slow
    const auto best = scores_of({0.1, 0.2, 0.4}, Settings{.reference = Reference::best});
    EXPECT_DOUBLE_EQ(*best[1].relative, 0.5);
    EXPECT_DOUBLE_EQ(*best[2].relative, 0.25);
    const auto median = scores_of({0.1, 0.2, 0.4});
    EXPECT_DOUBLE_EQ(*median[0].relative, 1.0);
    EXPECT_DOUBLE_EQ(*median[2].relative, 0.5);
    EXPECT_DOUBLE_EQ(*scores_of({0.1, 0.3})[1].relative, 2.0 / 3);  // even: the middle two's mean
}

TEST(HealthScores, BusyTimeLeavesOutCollectiveWait) {
    // Equal step times, as synchronous training makes them; rank 1 computes twice as long.
    Job job;
    feed(job.add(0).window, 5, 0.3, 0, 0.2);
    feed(job.add(1).window, 5, 0.3, 0, 0.1);
    feed(job.add(2).window, 5, 0.3, 0, 0.2);
    const JobHealth h = Tracker().evaluate(job.inputs(), 10, Settings{});
    EXPECT_DOUBLE_EQ(*h.nodes[1].busy, 0.2);
    EXPECT_DOUBLE_EQ(*h.nodes[1].relative_score, 0.5);
    EXPECT_EQ(h.nodes[1].busy_unit, BusyUnit::step);
}

TEST(HealthScores, SamplesPerSecondComparesOnlyWithItsKind) {
    Job job;
    for (uint32_t rank : {0u, 1u, 2u}) {
        NodeWindow& w = job.add(rank).window;
        for (int i = 1; i <= 4; ++i) {
            w.add(report(fmt::format(R"({{"step": {}, "samples_per_sec": {}}})", i, rank == 2 ? 50 : 100)), i);
        }
    }
    feed(job.add(3).window, 4, 5.0);  // measured per step: alone in its kind
    const JobHealth h = Tracker().evaluate(job.inputs(), 10, Settings{});
    EXPECT_DOUBLE_EQ(*h.nodes[2].relative_score, 0.5);
    EXPECT_EQ(h.nodes[2].busy_unit, BusyUnit::sample);
    EXPECT_FALSE(h.nodes[3].relative_score);
    EXPECT_TRUE(h.nodes[3].individual_score);
}

TEST(HealthScores, IndividualScoreComparesWithItsOwnBest) {
    Job job;
    double t = feed(job.add(0).window, 10, 0.2);
    t = feed(job[0].window, 10, 0.1, t + 1);  // its best run, mid-window
    feed(job[0].window, 10, 0.2, t + 1);
    // One lucky step weighs a tenth of a run, not the whole score.
    feed(job.add(1).window, 10, 0.2);
    feed(job[1].window, 1, 0.02, 10);
    feed(job[1].window, 10, 0.2, 11);
    const JobHealth h = Tracker().evaluate(job.inputs(), 30, Settings{});
    EXPECT_NEAR(*h.nodes[0].individual_score, 0.5, 1e-9);
    EXPECT_NEAR(*h.nodes[1].individual_score, 0.182 / 0.2, 1e-9);
}

TEST(HealthScores, NoScoreWithOneNodeOrTooFewSamples) {
    EXPECT_FALSE(scores_of({0.1})[0].relative);
    EXPECT_TRUE(scores_of({0.1})[0].individual);
    Job job;
    feed(job.add(0).window, 2, 0.1);
    feed(job.add(1).window, 2, 0.2);
    feed(job.add(2).window, 3, 0.1);
    const JobHealth h = Tracker().evaluate(job.inputs(), 5, Settings{});
    EXPECT_FALSE(h.nodes[1].relative_score);
    EXPECT_FALSE(h.nodes[1].individual_score);
    EXPECT_FALSE(h.nodes[2].relative_score);  // the only node with min_samples
    EXPECT_EQ(to_json(h.nodes[1]).if_contains("relative_score"), nullptr);
}

TEST(HealthStraggler, OnlyAfterStragglerForAndClearsWhenFast) {
    const Settings s{.straggler_for = 5};
    Job job;
    for (uint32_t r = 0; r < 4; ++r) feed(job.add(r, s).window, 10, r == 3 ? 0.2 : 0.1);
    Tracker tracker;
    JobHealth h = tracker.evaluate(job.inputs(), 100, s);
    EXPECT_FALSE(h.nodes[3].straggler);
    EXPECT_EQ(h.nodes[3].slow_since, 100);
    EXPECT_FALSE(tracker.evaluate(job.inputs(), 104.9, s).nodes[3].straggler);
    h = tracker.evaluate(job.inputs(), 105, s);
    EXPECT_TRUE(h.nodes[3].straggler);
    EXPECT_EQ(h.stragglers, std::vector<std::string>{"w3"});
    EXPECT_FALSE(h.nodes[0].slow_since);
    // Fast again: cleared; slow again: the clock starts over.
    feed(job[3].window, 10, 0.1, 20);
    EXPECT_FALSE(tracker.evaluate(job.inputs(), 106, s).nodes[3].slow_since);
    feed(job[3].window, 10, 0.3, 40);
    h = tracker.evaluate(job.inputs(), 107, s);
    EXPECT_EQ(h.nodes[3].slow_since, 107);
    EXPECT_FALSE(h.nodes[3].straggler);
    // Left out of an evaluation, or forgotten: the clock starts over too.
    auto in = job.inputs();
    tracker.evaluate(std::span(in).first(3), 108, s);
    EXPECT_EQ(tracker.evaluate(in, 109, s).nodes[3].slow_since, 109);
    tracker.forget("w3");
    EXPECT_EQ(tracker.evaluate(in, 110, s).nodes[3].slow_since, 110);
}

// Health settings are a job's settings' "health" object: read by the
// protocol, given their defaults and checked by health::resolve.
Settings settings_from_text(std::string_view health) {
    return coord::settings_from_json(parse_json(fmt::format(R"({{"health": {}}})", health))).health;
}

TEST(HealthSettings, DefaultsRoundTripAndErrors) {
    EXPECT_EQ(settings_from_text("{}"), Settings{});
    const Settings s = settings_from_text(R"({"window": 60, "window_seconds": 30, "recent": 5,
        "min_samples": 2, "straggler_threshold": 0.8, "straggler_for": 10, "reference": "best",
        "hang_timeout": 120, "gpu_temperature_limit": 85})");
    EXPECT_EQ(s.reference, Reference::best);
    EXPECT_EQ(s.window, 60u);
    EXPECT_EQ(resolve(published(s)), s);
    const auto bad = [](const char* text, const char* message) {
        expect_error([&] { settings_from_text(text); }, Errc::invalid_argument, message);
    };
    bad(R"({"windw": 1})", "job settings: health: unknown field 'windw' (did you mean 'window'?)");
    bad(R"({"window": 0})", "job settings: health: window must be from 1 to 100000 samples, not 0");
    bad(R"({"window": 100001})", "job settings: health: window must be from 1 to 100000 samples, not 100001");
    bad(R"({"window": -1})", "job settings: health: window: must not be negative, not -1");
    bad(R"({"min_samples": 9, "window": 5})", "job settings: health: min_samples (9) is above window (5)");
    bad(R"({"straggler_threshold": 1.5})", "straggler_threshold must be more than 0 and at most 1, not 1.5");
    bad(R"({"hang_timeout": 0})", "job settings: health: hang_timeout must be more than 0 seconds, not 0");
    bad(R"({"straggler_for": -1})", "straggler_for must be 0 or more seconds, not -1");
    bad(R"({"reference": "mean"})", R"(job settings: health: reference: must be "median" or "best", not "mean")");
    bad(R"({"hang_timeout": "5m"})", "job settings: health: hang_timeout: must be a number, not a string");
    expect_error([] { validate(Settings{.recent = 0}); }, Errc::invalid_argument,
                 "health settings: recent must be at least 1 sample, not 0");
}

}  // namespace
}  // namespace cohort::health
