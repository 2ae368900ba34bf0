// How --restart all reads the job's state: which changes break the world
// a launcher's workers run in, which count as failures, and what is left
// alone; and that its rule pack loads and restarts the group on a failure.
#include "group_restart.hpp"

#include <cohort/scaling.hpp>

#include <gtest/gtest.h>

namespace {

using cohort_run::JobView;
using cohort_run::RunningWorld;
using cohort_run::world_change;

// Generation 3: a-0 and a-1 here, b-0 and b-1 on another launcher.
RunningWorld world() {
    RunningWorld w;
    w.generation = 3;
    w.members = {"a-0", "a-1", "b-0", "b-1"};
    w.local = {"a-0", "a-1"};
    w.max_workers = 4;
    return w;
}

JobView job(std::initializer_list<std::pair<const char*, const char*>> states, uint64_t generation = 3) {
    JobView j;
    j.generation = generation;
    for (const auto& [id, state] : states) j.members[id].state = state;
    return j;
}

TEST(GroupRestart, NothingChangedWhileEveryoneIsActive) {
    EXPECT_FALSE(world_change(job({{"a-0", "active"}, {"a-1", "active"}, {"b-0", "active"}, {"b-1", "active"}}),
                              world()));
}

TEST(GroupRestart, AFailedPeerElsewhereIsAFailure) {
    const auto c = world_change(job({{"a-0", "active"}, {"a-1", "active"}, {"b-0", "failed"}, {"b-1", "active"}}),
                                world());
    ASSERT_TRUE(c);
    EXPECT_TRUE(c->failure);
    EXPECT_EQ(c->member, "b-0");
    EXPECT_NE(c->why.find("worker b-0 of generation 3 is failed"), std::string::npos) << c->why;
}

TEST(GroupRestart, APeerThatJoinedAgainWasRestartedByItsLauncher) {
    const auto c = world_change(job({{"a-0", "active"}, {"a-1", "active"}, {"b-0", "active"}, {"b-1", "waiting"}}),
                                world());
    ASSERT_TRUE(c);
    EXPECT_TRUE(c->failure);
    EXPECT_EQ(c->member, "b-1");
    EXPECT_NE(c->why.find("was restarted by its launcher"), std::string::npos) << c->why;
}

TEST(GroupRestart, StaleAndNewerGenerationsBreakTheWorld) {
    EXPECT_TRUE(world_change(job({{"b-0", "stale"}}), world()).value().failure);
    const auto newer = world_change(job({{"b-0", "active"}}, 4), world());
    ASSERT_TRUE(newer);
    EXPECT_TRUE(newer->failure);
    EXPECT_NE(newer->why.find("generation 4 formed without"), std::string::npos) << newer->why;
}

TEST(GroupRestart, APeerThatFinishedBreaksNothing) {
    EXPECT_FALSE(world_change(job({{"a-0", "active"}, {"a-1", "active"}, {"b-0", "left"}, {"b-1", "left"}}),
                              world()));
}

TEST(GroupRestart, OwnWorkersAreTheLaunchersBusiness) {
    EXPECT_FALSE(world_change(job({{"a-0", "failed"}, {"a-1", "waiting"}, {"b-0", "active"}, {"b-1", "active"}}),
                              world()));
}

TEST(GroupRestart, ANewcomerBelowMaxWorkersIsGrowthNotFailure) {
    RunningWorld w = world();
    w.members = {"a-0", "a-1"};
    w.max_workers = 4;
    const auto c = world_change(job({{"a-0", "active"}, {"a-1", "active"}, {"c-0", "waiting"}}), w);
    ASSERT_TRUE(c);
    EXPECT_FALSE(c->failure);
    EXPECT_EQ(c->member, "c-0");
    // At max_workers no round could admit it: the world stays.
    w.max_workers = 2;
    EXPECT_FALSE(world_change(job({{"a-0", "active"}, {"a-1", "active"}, {"c-0", "waiting"}}), w));
}

TEST(GroupRestart, NoWorldYetNoChange) {
    EXPECT_FALSE(world_change(job({{"b-0", "failed"}}), RunningWorld{}));
}

TEST(GroupRestart, ThePackRestartsTheGroupOnAFailureAndChargesTheBudget) {
    cohort::ScalingOptions so;
    so.max_nodes = 2;
    so.max_node_relaunches = 1;
    so.max_job_relaunches = 1;
    so.blacklist.after_failures = 0;
    cohort::AutoScaler scaler(so, cohort_run::group_restart_rules());
    cohort::ClusterView cluster;
    cluster.nodes = {{"a-0", "a", {}}};
    cluster.hosts = {{"a", 1}};
    cohort::ScalingEvent failed;
    failed.node = "b-0";  // a worker of another launcher
    failed.detail = "worker b-0 of generation 3 is failed";
    const cohort::ScalingPlan first = scaler.on_event(failed, cluster, 1.0);
    ASSERT_EQ(first.steps.size(), 1u) << cohort::describe(first);
    EXPECT_EQ(first.steps[0].kind, cohort::StepKind::restart_all);
    const cohort::ScalingPlan second = scaler.on_event(failed, cluster, 2.0);
    EXPECT_TRUE(second.steps.empty()) << cohort::describe(second);
    ASSERT_FALSE(second.warnings.empty());
    EXPECT_NE(second.warnings.front().find("not restarted"), std::string::npos) << second.warnings.front();
    cohort::ScalingEvent slow;
    slow.kind = cohort::EventKind::straggler;
    slow.node = "a-0";
    EXPECT_TRUE(scaler.on_event(slow, cluster, 3.0).steps.empty());
}

}  // namespace
