// coordinator/state: what GET /metrics reports about a job's activity:
// rounds by why they opened and how long they stayed open, the step times
// heartbeats carried, members removed, and each active member's latest step.
#include "coordinator/state/job_activity.hpp"
#include "coordinator/state/state.hpp"

#include "coordinator_support.hpp"

#include <gtest/gtest.h>

#include <string>

namespace cohort::coord {
namespace {

using testing::expect_replays;

Node node(std::string id) {
    Node n;
    n.address = id + ":29500";
    n.id = std::move(id);
    return n;
}

TEST(RoundCause, ReadsEveryReasonTheStateWrites) {
    EXPECT_EQ(round_cause("job created"), RoundCause::created);
    EXPECT_EQ(round_cause("node 'b' left"), RoundCause::left);
    EXPECT_EQ(round_cause("node 'b' failed"), RoundCause::failed);
    EXPECT_EQ(round_cause("node 'b' failed: exit 9"), RoundCause::failed);
    EXPECT_EQ(round_cause("node 'b' failed: reported dead by node 'a' (generation 3): closed"), RoundCause::failed);
    EXPECT_EQ(round_cause("3 nodes failed, 'a' and others"), RoundCause::failed);
    EXPECT_EQ(round_cause("node 'a' joined again while in generation 4"), RoundCause::rejoined);
    EXPECT_EQ(round_cause("2 node(s) waiting to join the world of 3"), RoundCause::grew);
    EXPECT_EQ(round_cause("requested by node 'a'"), RoundCause::requested);
    // Ids may hold quotes and the words that follow them.
    EXPECT_EQ(round_cause("node 'it' left' failed: x"), RoundCause::failed);
    EXPECT_EQ(round_cause("node 'x' left"), RoundCause::left);
    EXPECT_EQ(round_cause("node 'x'"), RoundCause::other);
    EXPECT_EQ(round_cause(""), RoundCause::other);
    EXPECT_EQ(round_cause("the moon"), RoundCause::other);
    EXPECT_EQ(to_string(RoundCause::grew), "grew");
}

TEST(Histogram, CountsCumulativeBuckets) {
    static constexpr std::array<double, 3> kBounds{1, 2, 5};
    Histogram h(kBounds);
    for (double v : {0.5, 1.0, 1.5, 4.0, 9.0}) h.observe(v);
    EXPECT_EQ(h.cumulative(0), 2u);  // 0.5 and 1.0: a bound is inclusive
    EXPECT_EQ(h.cumulative(1), 3u);
    EXPECT_EQ(h.cumulative(2), 4u);
    EXPECT_EQ(h.cumulative(3), 5u);
    EXPECT_EQ(h.count(), 5u);
    EXPECT_DOUBLE_EQ(h.sum(), 16.0);
}

class CoordinatorActivity : public ::testing::Test {
protected:
    void TearDown() override { expect_replays(state); }

    void create(uint32_t min_nodes, uint32_t max_nodes) {
        JobSettings s;
        s.min_nodes = min_nodes;
        s.max_nodes = max_nodes;
        s.rejoin = RejoinPolicy::automatic;
        state.create_job("train", s, t);
    }
    void join(std::string id) { state.join("train", node(std::move(id)), t); }
    const JobActivity& activity() const { return state.job("train").activity; }
    uint64_t rounds(RoundCause cause) const { return activity().rounds(cause).count(); }
    const std::string& last_reason() const { return state.job("train").rounds().back().reason; }

    CoordinatorState state;
    double t = 100.0;
};

TEST_F(CoordinatorActivity, RoundsAreCountedByWhyTheyOpenedWithTheirDurations) {
    create(2, 2);
    join("a");
    t += 2;  // the first round stays open 2 s
    join("b");
    ASSERT_EQ(state.job("train").generation(), 1u);
    EXPECT_EQ(rounds(RoundCause::created), 1u);
    EXPECT_NEAR(activity().rounds(RoundCause::created).sum(), 2.0, 1e-9);
    EXPECT_EQ(activity().rounds(RoundCause::created).cumulative(3), 0u);  // le=1
    EXPECT_EQ(activity().rounds(RoundCause::created).cumulative(4), 1u);  // le=2.5

    state.leave("train", "b", t);
    t += 0.2;
    join("a");
    join("b");
    EXPECT_EQ(round_cause(last_reason()), RoundCause::left) << last_reason();
    EXPECT_EQ(rounds(RoundCause::left), 1u);
    EXPECT_NEAR(activity().rounds(RoundCause::left).sum(), 0.2, 1e-9);

    state.request_round("train", "a", t);
    join("a");
    join("b");
    EXPECT_EQ(rounds(RoundCause::requested), 1u) << last_reason();

    join("a");  // a restarted process: joins again while the world runs
    join("b");
    EXPECT_EQ(rounds(RoundCause::rejoined), 1u) << last_reason();

    // b falls silent; a keeps beating and is alone until b comes back.
    t += 3;
    state.heartbeat("train", "a", state.job("train").generation(), std::nullopt, t);
    t += 3;
    state.tick(t);
    ASSERT_EQ(state.job("train").find_member("b")->state, MemberState::failed);
    join("a");
    join("b");
    EXPECT_EQ(rounds(RoundCause::failed), 1u) << last_reason();
    EXPECT_EQ(activity().removals(MemberState::failed), 1u);
    EXPECT_EQ(activity().removals(MemberState::left), 1u);
    EXPECT_EQ(activity().removals(MemberState::timed_out), 0u);

    EXPECT_EQ(state.job("train").generation(), 5u);
    EXPECT_EQ(rounds(RoundCause::grew) + rounds(RoundCause::other), 0u);
    const JobMetrics m = state.metrics().front();
    EXPECT_EQ(m.activity.rounds(RoundCause::failed).count(), 1u);
}

TEST_F(CoordinatorActivity, AWaitingNodeGrowsTheWorld) {
    create(2, 3);
    join("a");
    join("b");
    t += 3;
    state.tick(t);  // last_call: a world of 2
    ASSERT_EQ(state.job("train").generation(), 1u);
    join("c");
    join("a");
    join("b");
    EXPECT_EQ(state.job("train").world().size(), 3u);
    EXPECT_EQ(rounds(RoundCause::grew), 1u) << last_reason();
}

TEST_F(CoordinatorActivity, StepTimesAndEachMembersLatestStep) {
    create(2, 2);
    join("a");
    join("b");
    HeartbeatMetrics batch;
    batch.step = 12;
    batch.step_time = 0.2;
    batch.samples_per_sec = 640;
    for (uint64_t s = 10; s <= 12; ++s) {
        StepSample sample;
        sample.step = s;
        sample.step_time = 0.05 * static_cast<double>(s - 9);  // 0.05, 0.1, 0.15
        batch.samples.push_back(sample);
    }
    state.heartbeat("train", "a", 1, batch, t);
    HeartbeatMetrics latest;  // no batch: the latest step counts once
    latest.step = 7;
    latest.step_time = 3.0;
    state.heartbeat("train", "b", 1, latest, t);
    state.heartbeat("train", "b", 1, std::nullopt, t);  // no metrics: nothing observed

    const Histogram& steps = activity().steps();
    EXPECT_EQ(steps.count(), 4u);
    EXPECT_NEAR(steps.sum(), 0.05 + 0.1 + 0.15 + 3.0, 1e-12);
    EXPECT_EQ(steps.cumulative(5), 1u);   // le=0.05
    EXPECT_EQ(steps.cumulative(6), 2u);   // le=0.1
    EXPECT_EQ(steps.cumulative(10), 3u);  // le=2.5: 3.0 is above it
    EXPECT_EQ(steps.cumulative(11), 4u);  // le=5
    const JobMetrics m = state.metrics().front();
    ASSERT_EQ(m.steps.size(), 2u);
    EXPECT_EQ(m.steps[0].member, "a");
    EXPECT_EQ(m.steps[0].step, 12u);
    EXPECT_EQ(m.steps[0].step_time, 0.2);
    EXPECT_EQ(m.steps[0].samples_per_sec, 640.0);
    EXPECT_EQ(m.steps[1].member, "b");
    EXPECT_EQ(m.steps[1].step, 7u);
    EXPECT_FALSE(m.steps[1].samples_per_sec.has_value());
}

}  // namespace
}  // namespace cohort::coord
