// health: hang detection and the diagnosis of why a member or a job hangs.
#include "health/diagnosis.hpp"
#include "health/hang.hpp"

#include "health_support.hpp"

#include <gtest/gtest.h>

namespace cohort::health {
namespace {

using namespace testing;

const Settings kSettings{.hang_timeout = 60};

// `n` members that stepped to step 10 at t = 9 and then stopped.
Job stopped_job(uint32_t n) {
    Job job;
    for (uint32_t r = 0; r < n; ++r) feed(job.add(r).window, 10, 0.1);
    return job;
}

JobHealth evaluate(const Job& job, double now) {
    return Tracker().evaluate(job.inputs(), now, kSettings);
}

TEST(HealthHang, HungAfterHangTimeoutAndNotBefore) {
    Job job = stopped_job(1);
    beat(job.add(1).window, 5, std::nullopt, false);  // alive, never stepped
    JobHealth h = evaluate(job, 68.9);
    EXPECT_FALSE(h.nodes[0].hung);
    EXPECT_FALSE(h.nodes[0].diagnosis);
    EXPECT_NEAR(*h.nodes[0].stalled_for, 59.9, 1e-9);
    h = evaluate(job, 69);
    EXPECT_TRUE(h.nodes[0].hung);
    EXPECT_EQ(h.nodes[0].stalled_for, 60);
    EXPECT_TRUE(h.nodes[0].diagnosis);
    // Not judged before its first step, however long.
    h = evaluate(job, 1000);
    EXPECT_FALSE(h.nodes[1].step);
    EXPECT_FALSE(h.nodes[1].stalled_for);
    EXPECT_FALSE(h.nodes[1].hung);
}

TEST(HealthHang, JobHungOnlyWhenEveryJudgedMemberIs) {
    Job job = stopped_job(2);
    feed(job[0].window, 1, 0.1, 80);  // rank 0 still steps
    beat(job.add(2).window, 5, std::nullopt, false);
    JobHealth h = evaluate(job, 100);
    EXPECT_FALSE(h.nodes[0].hung);
    EXPECT_TRUE(h.nodes[1].hung);
    EXPECT_EQ(h.hung_nodes, 1u);
    EXPECT_FALSE(h.hung);
    EXPECT_FALSE(h.diagnosis);
    h = evaluate(job, 140);
    EXPECT_TRUE(h.hung);  // rank 2 has no step: not judged, does not hold the verdict back
    EXPECT_EQ(h.hung_nodes, 2u);
    ASSERT_TRUE(h.diagnosis);
    EXPECT_EQ(h.diagnosis->evidence[1], "1 more rank has not reported a step yet");
    Job starting;
    beat(starting.add(0).window, 5, std::nullopt, false);
    EXPECT_FALSE(evaluate(starting, 1000).hung);
    EXPECT_FALSE(evaluate(Job{}, 1000).hung);
    EXPECT_EQ(evaluate(stopped_job(1), 100).diagnosis->evidence[0],
              "the 1 judged rank hung at step 10, not advanced for 91 s");
}

TEST(HealthDiagnosis, CollectiveNamesTheRanksThatNeverEnteredIt) {
    Job job = stopped_job(5);
    beat(job[0].window, 10, 57, true);
    beat(job[1].window, 10, 57, true);
    beat(job[2].window, 10, 56, false);
    beat(job[3].window, 10, 56, true);  // stuck in an earlier one: behind all the same
    // job[4] reports no collective state: neither blamed nor explained.
    const JobHealth h = evaluate(job, 100);
    const std::string summary = "ranks 2, 3 (members w2, w3) never entered collective 57; ranks 0, 1 wait in it";
    for (int i : {0, 2, 3}) {
        const Diagnosis& d = *h.nodes[i].diagnosis;
        EXPECT_EQ(d.cause, Cause::collective);
        EXPECT_EQ(d.summary, summary);
        EXPECT_EQ(d.ranks, (std::vector<uint32_t>{2, 3}));
        EXPECT_EQ(d.members, (std::vector<std::string>{"w2", "w3"}));
    }
    EXPECT_EQ(h.nodes[0].diagnosis->evidence[1], "inside collective 57");
    EXPECT_EQ(h.nodes[2].diagnosis->evidence[1], "not inside a collective; the latest it entered is 56");
    EXPECT_EQ(h.nodes[4].diagnosis->cause, Cause::unknown);
    ASSERT_TRUE(h.hung);
    EXPECT_EQ(h.diagnosis->cause, Cause::collective);
    EXPECT_EQ(h.diagnosis->summary, summary);
    EXPECT_EQ(h.diagnosis->evidence[0], "all 5 judged ranks hung at step 10, not advanced for 91 s");
}

TEST(HealthDiagnosis, GpuXidIsRememberedUntilTheStepAdvances) {
    Job job = stopped_job(1);
    GpuReading faulty = gpu_reading(1, 100, 30, 60);
    faulty.xid_events.push_back({79, 1700000001, "GPU has fallen off the bus"});
    GpuSample with_xid = gpu_sample({gpu_reading(0, 100, 30, 60), faulty});
    beat(job[0].window, 20, std::nullopt, false, &with_xid);
    with_xid.stale = true;  // resent: the same event, not a second one
    beat(job[0].window, 21, std::nullopt, false, &with_xid);
    const GpuSample later = gpu_sample({gpu_reading(0, 100, 30, 60), gpu_reading(1, 100, 30, 60)});
    beat(job[0].window, 30, std::nullopt, false, &later);
    ASSERT_EQ(job[0].window.xids().size(), 1u);
    const Diagnosis d = *evaluate(job, 100).nodes[0].diagnosis;
    EXPECT_EQ(d.cause, Cause::gpu);
    EXPECT_EQ(d.summary, "GPU 1 reported Xid 79 (GPU has fallen off the bus)");
    EXPECT_EQ(d.ranks, std::vector<uint32_t>{0});
    EXPECT_EQ(d.evidence.back(), d.summary);
    feed(job[0].window, 1, 0.1, 31);  // stepping again: the Xid did not stop it
    EXPECT_TRUE(job[0].window.xids().empty());
}

TEST(HealthDiagnosis, GpuIdleWithMemoryHeldOrTooHot) {
    const auto diagnose = [](std::vector<GpuReading> gpus) {
        Job job = stopped_job(1);
        const GpuSample sample = gpu_sample(std::move(gpus));
        beat(job[0].window, 99, std::nullopt, false, &sample);
        return *evaluate(job, 100).nodes[0].diagnosis;
    };
    Diagnosis d = diagnose({gpu_reading(0, 0, 12, 50)});
    EXPECT_EQ(d.cause, Cause::gpu);
    EXPECT_EQ(d.summary, "GPU 0 at 0 % utilisation with 12.0 GiB held");
    EXPECT_EQ(diagnose({gpu_reading(0, 0, 0.3, 50)}).cause, Cause::unknown);  // only a CUDA context
    d = diagnose({gpu_reading(0, 100, 30, 89), gpu_reading(1, 100, 30, 93)});
    EXPECT_EQ(d.summary, "GPU 1 at 93 °C, at or over the 90 °C limit");
    // Idle-with-memory comes before heat.
    d = diagnose({gpu_reading(0, 100, 30, 95), gpu_reading(1, 0, 30, 50)});
    EXPECT_EQ(d.summary, "GPU 1 at 0 % utilisation with 30.0 GiB held");
    EXPECT_EQ(d.evidence.back(), "GPU 0 at 95 °C, at or over the 90 °C limit");
}

TEST(HealthDiagnosis, UnknownListsTheEvidence) {
    Job job = stopped_job(2);
    const GpuSample fine = gpu_sample({gpu_reading(0, 97, 40, 65)});
    beat(job[1].window, 99, 12, false, &fine);
    const JobHealth h = evaluate(job, 100);
    const Diagnosis& d = *h.nodes[0].diagnosis;
    EXPECT_EQ(d.cause, Cause::unknown);
    EXPECT_EQ(d.summary, "step 10 has not advanced for 91 s; no collective or GPU cause found");
    EXPECT_EQ(d.evidence, (std::vector<std::string>{"last step 10, not advanced for 91 s",
                                                    "no collective state reported", "no GPU samples"}));
    EXPECT_EQ(h.nodes[1].diagnosis->evidence[1], "not inside a collective; the latest it entered is 12");
    EXPECT_EQ(h.nodes[1].diagnosis->evidence[2], "GPU 0: 97 % utilisation, 40.0 GiB held, 65 °C (sample 1 s old)");
    EXPECT_EQ(h.diagnosis->cause, Cause::unknown);
    EXPECT_EQ(h.diagnosis->summary, "all 2 judged ranks stalled for 91 s; no collective or GPU cause found");
    EXPECT_TRUE(h.diagnosis->ranks.empty());
}

TEST(HealthDiagnosis, JobNamesGpuFaultsAndTheRanksThatStoppedFirst) {
    Job job = stopped_job(3);
    feed(job.add(3).window, 5, 0.1);  // stopped at step 5, at t = 4
    JobHealth h = evaluate(job, 100);
    EXPECT_EQ(h.diagnosis->summary,
              "all 4 judged ranks stalled for 91 to 96 s; no collective or GPU cause found; "
              "rank 3 (member w3) stopped first, at step 5");
    EXPECT_EQ(h.diagnosis->ranks, std::vector<uint32_t>{3});
    GpuReading faulty = gpu_reading(0, 100, 30, 60);
    faulty.xid_events.push_back({48, 1700000001, ""});
    const GpuSample sample = gpu_sample({faulty});
    beat(job[1].window, 50, std::nullopt, false, &sample);
    h = evaluate(job, 100);
    EXPECT_EQ(h.diagnosis->cause, Cause::gpu);
    EXPECT_EQ(h.diagnosis->summary, "rank 1 (member w1): GPU 0 reported Xid 48");
    EXPECT_EQ(h.diagnosis->members, std::vector<std::string>{"w1"});
    EXPECT_EQ(h.diagnosis->evidence.back(), "rank 1 (member w1): GPU 0 reported Xid 48");
}

TEST(HealthDiagnosis, NamesRanksAsRanges) {
    EXPECT_EQ(name_ranks(std::vector<uint32_t>{5}), "rank 5");
    EXPECT_EQ(name_ranks(std::vector<uint32_t>{2, 3}), "ranks 2, 3");
    EXPECT_EQ(name_ranks(std::vector<uint32_t>{0, 1, 2, 3, 7}), "ranks 0-3, 7");
    std::vector<uint32_t> odd;
    for (uint32_t r = 1; r < 40; r += 2) odd.push_back(r);
    EXPECT_EQ(name_ranks(odd), "ranks 1, 3, 5, 7, 9, 11, 13, 15 and 12 more");
    const std::vector<std::string> members{"a", "b", "c", "d", "e", "f", "g", "h", "i"};
    EXPECT_EQ(name_nodes(std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}, members),
              "ranks 0-8 (members a, b, c, d, e, f, g, h and 1 more)");
}

TEST(HealthDiagnosis, JsonForms) {
    Job job = stopped_job(2);
    const boost::json::object o = to_json(evaluate(job, 100));
    EXPECT_EQ(o.at("hung"), true);
    EXPECT_EQ(o.at("hung_nodes"), 2);
    EXPECT_EQ(o.at("diagnosis").at("cause"), "unknown");
    EXPECT_EQ(o.at("diagnosis").at("evidence").as_array().size(), 3u);
    const boost::json::object& node = o.at("nodes").as_array()[1].as_object();
    EXPECT_EQ(node.at("member"), "w1");
    EXPECT_EQ(node.at("step"), 10);
    EXPECT_EQ(node.at("stalled_for"), 91.0);
    EXPECT_EQ(node.at("busy_per"), "step");
    EXPECT_EQ(node.at("relative_score"), 1.0);
    EXPECT_EQ(node.at("diagnosis").at("ranks"), boost::json::array{1});
    EXPECT_EQ(node.at("diagnosis").at("members"), boost::json::array{"w1"});
}

// A job of 10,000 in which one rank never entered the collective: every
// diagnosis stays short.
TEST(HealthDiagnosis, TenThousandRanksStayShort) {
    Job job;
    for (uint32_t r = 0; r < 10000; ++r) {
        NodeWindow& w = job.add(r).window;
        feed(w, 4, r == 4711 ? 0.2 : 0.1);
        beat(w, 5, r == 4711 ? 8 : 9, r != 4711);
    }
    const JobHealth h = evaluate(job, 100);
    ASSERT_TRUE(h.hung);
    EXPECT_EQ(h.diagnosis->summary,
              "rank 4711 (member w4711) never entered collective 9; ranks 0-4710, 4712-9999 wait in it");
    EXPECT_EQ(h.nodes[0].diagnosis->ranks, std::vector<uint32_t>{4711});
    EXPECT_DOUBLE_EQ(*h.nodes[4711].relative_score, 0.5);
}

}  // namespace
}  // namespace cohort::health
