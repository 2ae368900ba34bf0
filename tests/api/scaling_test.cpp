// The elastic policy: the shipped rules/elastic.yaml through the
// AutoScaler (relaunch, replace, restart, scale up), its budgets, the host
// blacklist, min_nodes, and user packs that override it. Time is passed in,
// never slept.
#include "support.hpp"

#include <cohort/scaling.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace cohort::test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Three workers: w0 on h0, w1 and w2 on h1; h2 has two free slots.
ClusterView three_workers() {
    return {{{"w0", "h0", {1, 4}}, {"w1", "h1", {1, 4}}, {"w2", "h1", {1, 4}}}, {{"h0", 0}, {"h1", 0}, {"h2", 2}}};
}

ScalingOptions options(int min_nodes, int max_nodes) {
    ScalingOptions o;
    o.min_nodes = min_nodes;
    o.max_nodes = max_nodes;
    o.node_resources = {1, 4};
    return o;
}

ScalingEvent failed(const std::string& node, int exit_code = 1) {
    ScalingEvent e;
    e.kind = EventKind::failed;
    e.node = node;
    e.exit_code = exit_code;
    return e;
}

ScalingEvent event(EventKind kind, const std::string& node = {}) {
    ScalingEvent e;
    e.kind = kind;
    e.node = node;
    return e;
}

std::vector<StepKind> kinds(const ScalingPlan& plan) {
    std::vector<StepKind> out;
    for (const PlanStep& step : plan.steps) out.push_back(step.kind);
    return out;
}

std::string all_warnings(const ScalingPlan& plan) {
    std::string out;
    for (const std::string& w : plan.warnings) out += w + "\n";
    return out;
}

// A pack in a file of its own, removed when the test ends.
class PackFile {
public:
    explicit PackFile(const std::string& text)
        : path_(std::filesystem::temp_directory_path() /
                ("cohort_elastic_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++) + ".yaml")) {
        std::ofstream(path_) << text;
    }
    ~PackFile() { std::filesystem::remove(path_); }
    const std::filesystem::path& path() const { return path_; }

private:
    static inline int counter_ = 0;
    std::filesystem::path path_;
};

// ------------------------------------------------------------------ the pack

TEST(ElasticPack, LoadsFromTheSourceTreeWithEveryRuleAndVariable) {
    const std::filesystem::path path = AutoScaler::default_rules_path();
    EXPECT_EQ(path.filename(), "elastic.yaml");
    const std::filesystem::path source =
        std::filesystem::path(COHORT_TEST_DATA_DEFAULT).parent_path().parent_path() / "rules" / "elastic.yaml";
    const RuleSet set = RuleSet::from_file(source);
    EXPECT_THAT(set.warnings(), IsEmpty());
    std::vector<std::string> ids;
    for (const Rule& rule : set.rules()) ids.push_back(rule.id);
    EXPECT_THAT(ids, ElementsAre("remove_worker_never_started", "relaunch_failed_node", "restart_workers_on_hang",
                                 "replace_persistent_straggler", "scale_up_on_capacity", "remove_worker_of_lost_node"));
    for (const char* name : {"event", "cause", "node", "host", "detail", "exit_code", "node_relaunches",
                             "job_relaunches", "max_node_relaunches", "max_job_relaunches", "nodes", "min_nodes",
                             "max_nodes", "free_slots", "host_blacklisted", "straggler_score", "straggler_for"})
        EXPECT_TRUE(set.variables().contains(name)) << name;
    EXPECT_EQ(set.variables().size(), 17u);
}

// ------------------------------------------------------------------ failures

TEST(AutoScaler, RelaunchesAFailedNodeInPlace) {
    AutoScaler scaler(options(2, 4));
    const ScalingPlan plan = scaler.on_event(failed("w1"), three_workers(), 0);
    ASSERT_THAT(kinds(plan), ElementsAre(StepKind::relaunch)) << describe(plan);
    const PlanStep& step = plan.steps[0];
    EXPECT_EQ(step.node, "w1");
    EXPECT_EQ(step.host, "h1");
    EXPECT_EQ(step.resources, (Resources{1, 4}));
    EXPECT_EQ(step.rule, "relaunch_failed_node");
    EXPECT_THAT(step.reason, HasSubstr("node w1 failed (exit code 1)"));
    EXPECT_THAT(step.reason, HasSubstr("relaunch 1 of 3 (job: 1 of 10)"));
    EXPECT_THAT(plan.warnings, IsEmpty());
    EXPECT_EQ(plan.nodes_after, 3);
    EXPECT_FALSE(plan.below_min_nodes);
    EXPECT_EQ(scaler.budget().node_used("w1"), 1);
}

// A worker whose node was lost (a cluster scheduler's cause) is relaunched
// elsewhere while a host has room, and removed when none has: the node is
// gone, retrying it would spend the budget for nothing.
TEST(AutoScaler, AWorkerOfALostNodeMovesOrIsRemovedWhenNoHostHasRoom) {
    AutoScaler scaler(options(1, 4));
    ScalingEvent lost = failed("w1", -1);
    lost.cause = ExitCause::node_lost;
    lost.host = "h1";
    const ScalingPlan moved = scaler.on_event(lost, three_workers(), 0);  // h2 has 2 free slots
    ASSERT_THAT(kinds(moved), ElementsAre(StepKind::relaunch)) << describe(moved);
    EXPECT_EQ(moved.steps[0].rule, "relaunch_failed_node");
    EXPECT_EQ(scaler.last_evaluation().fired.size(), 1u);

    ClusterView full = three_workers();
    full.hosts = {{"h0", 0}, {"h2", 0}};  // h1 is gone from the view: the launcher drops lost nodes
    const ScalingPlan removed = scaler.on_event(lost, full, 1);
    ASSERT_THAT(kinds(removed), ElementsAre(StepKind::remove)) << describe(removed);
    EXPECT_EQ(removed.steps[0].rule, "remove_worker_of_lost_node");

    // Any other cause with no room is still relaunched in place.
    ScalingEvent oom = failed("w0", 137);
    oom.cause = ExitCause::out_of_memory;
    const ScalingPlan again = scaler.on_event(oom, full, 2);
    ASSERT_THAT(kinds(again), ElementsAre(StepKind::relaunch)) << describe(again);
}

TEST(AutoScaler, TheCauseIsARuleVariable) {
    PackFile pack(R"(version: 1
variables: {event: string, cause: string}
rules:
  - id: no_relaunch_when_preempted
    condition: event == 'failed' AND cause == 'preempted'
    actions: [{type: remove, target: node}]
)");
    AutoScaler scaler(options(1, 4), pack.path());
    ScalingEvent e = failed("w1");
    e.cause = ExitCause::preempted;
    EXPECT_THAT(kinds(scaler.on_event(e, three_workers(), 0)), ElementsAre(StepKind::remove));
    EXPECT_THAT(kinds(scaler.on_event(failed("w2"), three_workers(), 1)), IsEmpty());
    EXPECT_EQ(to_string(ExitCause::none), "none");
    EXPECT_EQ(to_string(ExitCause::node_lost), "node_lost");
    EXPECT_EQ(to_string(ExitCause::out_of_memory), "oom");
    EXPECT_EQ(to_string(ExitCause::preempted), "preempted");
    EXPECT_EQ(to_string(ExitCause::pending_timeout), "pending_timeout");
    EXPECT_EQ(to_string(ExitCause::api_error), "api_error");
}

// A worker whose pod never started (a scheduler's pending_timeout or
// image_pull) is removed, not relaunched into the same wait.
TEST(AutoScaler, RemovesAWorkerThatNeverStarted) {
    AutoScaler scaler(options(2, 4));
    for (const auto& [cause, detail] :
         {std::pair{ExitCause::pending_timeout, "pod job-w1-0 never started: Pending for more than 300 s"},
          std::pair{ExitCause::image_pull, "pod job-w1-0 never started: ImagePullBackOff"}}) {
        ScalingEvent event = failed("w1");
        event.exit_code.reset();
        event.cause = cause;
        event.detail = detail;
        const ScalingPlan plan = scaler.on_event(event, three_workers(), 0);
        ASSERT_THAT(kinds(plan), ElementsAre(StepKind::remove)) << describe(plan);
        EXPECT_EQ(plan.steps[0].rule, "remove_worker_never_started");
        EXPECT_EQ(plan.nodes_after, 2);
    }
    EXPECT_EQ(scaler.budget().node_used("w1"), 0);
}

// The engine keeps state per rule, not per node: two nodes failing one after
// the other at the same instant must each get their relaunch.
TEST(AutoScaler, TwoNodesFailingAtTheSameTimeAreBothRelaunched) {
    AutoScaler scaler(options(1, 4));
    const ScalingPlan first = scaler.on_event(failed("w0"), three_workers(), 5);
    const ScalingPlan second = scaler.on_event(failed("w2"), three_workers(), 5);
    ASSERT_THAT(kinds(first), ElementsAre(StepKind::relaunch));
    ASSERT_THAT(kinds(second), ElementsAre(StepKind::relaunch)) << describe(second);
    EXPECT_EQ(first.steps[0].node, "w0");
    EXPECT_EQ(second.steps[0].node, "w2");
}

TEST(AutoScaler, ANodePastItsRelaunchBudgetIsRemovedWithTheReason) {
    ScalingOptions o = options(3, 4);
    o.max_node_relaunches = 2;
    o.blacklist.after_failures = 0;  // only the budget is under test
    AutoScaler scaler(o);
    EXPECT_THAT(kinds(scaler.on_event(failed("w1"), three_workers(), 0)), ElementsAre(StepKind::relaunch));
    EXPECT_THAT(kinds(scaler.on_event(failed("w1"), three_workers(), 10)), ElementsAre(StepKind::relaunch));
    const ScalingPlan plan = scaler.on_event(failed("w1"), three_workers(), 20);
    ASSERT_THAT(kinds(plan), ElementsAre(StepKind::remove)) << describe(plan);
    EXPECT_EQ(plan.steps[0].node, "w1");
    EXPECT_THAT(plan.steps[0].reason, HasSubstr("node w1: relaunch budget 2 used up"));
    EXPECT_EQ(scaler.budget().node_used("w1"), 2);
    // Two workers left of min_nodes 3: the plan says so.
    EXPECT_EQ(plan.nodes_after, 2);
    EXPECT_TRUE(plan.below_min_nodes);
    EXPECT_THAT(all_warnings(plan), HasSubstr("the job will have 2 workers, below min_nodes 3"));
    // Another node still has its own budget.
    EXPECT_THAT(kinds(scaler.on_event(failed("w0"), three_workers(), 30)), ElementsAre(StepKind::relaunch));
}

TEST(AutoScaler, TheJobBudgetCapsRelaunchesAcrossNodes) {
    ScalingOptions o = options(1, 4);
    o.max_job_relaunches = 2;
    o.blacklist.after_failures = 0;
    AutoScaler scaler(o);
    EXPECT_THAT(kinds(scaler.on_event(failed("w0"), three_workers(), 0)), ElementsAre(StepKind::relaunch));
    EXPECT_THAT(kinds(scaler.on_event(failed("w1"), three_workers(), 1)), ElementsAre(StepKind::relaunch));
    const ScalingPlan plan = scaler.on_event(failed("w2"), three_workers(), 2);
    ASSERT_THAT(kinds(plan), ElementsAre(StepKind::remove)) << describe(plan);
    EXPECT_THAT(plan.steps[0].reason, HasSubstr("job: relaunch budget 2 used up"));
    EXPECT_EQ(scaler.budget().job_used(), 2);
    EXPECT_FALSE(plan.below_min_nodes);
}

TEST(AutoScaler, AFinishedWorkerIsNotReplacedAndNotAWarning) {
    AutoScaler scaler(options(3, 3));
    const ScalingPlan plan = scaler.on_event(event(EventKind::exited_ok, "w0"), three_workers(), 0);
    EXPECT_THAT(plan.steps, IsEmpty());
    EXPECT_THAT(plan.warnings, IsEmpty());
    EXPECT_EQ(plan.nodes_after, 2);
}

// ------------------------------------------------------------------ blacklist

TEST(HostBlacklist, RepeatedFailuresBlacklistWithACooldownThatDoublesAndIsCapped) {
    HostBlacklist list({.after_failures = 2,
                        .window = std::chrono::seconds(300),
                        .base_cooldown = std::chrono::seconds(30),
                        .max_cooldown = std::chrono::seconds(100)});
    EXPECT_FALSE(list.record_failure("h1", 0));
    EXPECT_FALSE(list.blacklisted("h1", 0));
    EXPECT_TRUE(list.record_failure("h1", 10));
    EXPECT_EQ(list.until("h1", 10), 40.0);
    EXPECT_TRUE(list.blacklisted("h1", 39.9));
    EXPECT_FALSE(list.blacklisted("h1", 40));  // expired
    EXPECT_THAT(list.hosts(20), ElementsAre("h1"));
    EXPECT_THAT(list.hosts(40), IsEmpty());
    // A failure while off counts for nothing; the count started again.
    EXPECT_FALSE(list.record_failure("h1", 20));
    EXPECT_FALSE(list.record_failure("h1", 50));
    EXPECT_TRUE(list.record_failure("h1", 60));
    EXPECT_EQ(list.until("h1", 60), 120.0);  // 30 * 2
    EXPECT_EQ(list.times_blacklisted("h1"), 2);
    EXPECT_FALSE(list.record_failure("h1", 200));
    EXPECT_TRUE(list.record_failure("h1", 210));
    EXPECT_EQ(list.until("h1", 210), 310.0);  // 30 * 4 capped at 100
    // Failures further apart than the window do not add up.
    EXPECT_FALSE(list.record_failure("h2", 0));
    EXPECT_FALSE(list.record_failure("h2", 301));
    EXPECT_FALSE(list.blacklisted("h2", 301));
}

TEST(HostBlacklist, RefusesBadOptions) {
    EXPECT_THAT(error_message(Errc::invalid_argument,
                              [] {
                                  HostBlacklist({.base_cooldown = std::chrono::seconds(60),
                                                 .max_cooldown = std::chrono::seconds(10)});
                              }),
                HasSubstr("max_cooldown (10s) finite and at least base_cooldown"));
}

TEST(AutoScaler, AHostThatKeepsFailingIsAvoidedUntilItsCooldownEnds) {
    AutoScaler scaler(options(1, 4));  // blacklist after 2 failures in 300 s, 30 s then 60 s
    const ScalingPlan first = scaler.on_event(failed("w1"), three_workers(), 0);
    ASSERT_THAT(kinds(first), ElementsAre(StepKind::relaunch));
    EXPECT_EQ(first.steps[0].host, "h1");

    const ScalingPlan second = scaler.on_event(failed("w2"), three_workers(), 10);
    ASSERT_THAT(kinds(second), ElementsAre(StepKind::relaunch)) << describe(second);
    EXPECT_EQ(second.steps[0].host, "h2");  // moved off h1
    EXPECT_THAT(second.steps[0].reason, HasSubstr("away from blacklisted h1"));
    EXPECT_THAT(all_warnings(second), HasSubstr("host h1 blacklisted until 40 after 2 failures within 300s"));
    EXPECT_THAT(second.avoid_hosts, ElementsAre("h1"));
    EXPECT_TRUE(scaler.blacklist().blacklisted("h1", 39));
    EXPECT_FALSE(scaler.blacklist().blacklisted("h1", 40));

    // After the cooldown, h1 takes its workers again...
    const ScalingPlan later = scaler.on_event(failed("w1"), three_workers(), 45);
    ASSERT_THAT(kinds(later), ElementsAre(StepKind::relaunch));
    EXPECT_EQ(later.steps[0].host, "h1");
    EXPECT_THAT(later.avoid_hosts, IsEmpty());
    // ...and failing twice more puts it off for twice as long.
    scaler.on_event(failed("w2"), three_workers(), 50);
    EXPECT_EQ(scaler.blacklist().until("h1", 50), 110.0);
}

TEST(AutoScaler, ARelaunchWithNowhereToGoRemovesTheNodeAndSaysWhy) {
    ClusterView full = three_workers();
    full.hosts[2].free_slots = 0;
    AutoScaler scaler(options(3, 4));
    scaler.on_event(failed("w1"), full, 0);
    const ScalingPlan plan = scaler.on_event(failed("w2"), full, 1);
    ASSERT_THAT(kinds(plan), ElementsAre(StepKind::remove)) << describe(plan);
    EXPECT_THAT(plan.steps[0].reason, HasSubstr("host h1 is blacklisted until 31 and no other host has a free slot"));
    EXPECT_TRUE(plan.below_min_nodes);
    EXPECT_EQ(scaler.budget().node_used("w2"), 0);  // nothing relaunched, nothing charged
}

// ------------------------------------------------------------------ stragglers, hangs

TEST(AutoScaler, AStragglerIsReplacedOnAnotherHost) {
    // The coordinator reports a straggler once its score has stayed under
    // the threshold for straggler_for: the shipped pack replaces it at once.
    AutoScaler scaler(options(1, 4));
    ScalingEvent slow = event(EventKind::straggler, "w1");
    slow.straggler_score = 0.5;
    slow.straggler_seconds = 30;
    const ScalingPlan plan = scaler.on_event(slow, three_workers(), 1);
    ASSERT_THAT(kinds(plan), ElementsAre(StepKind::remove, StepKind::launch)) << describe(plan);
    EXPECT_EQ(plan.steps[0].node, "w1");
    EXPECT_EQ(plan.steps[1].node, "");  // the launcher names the new worker
    EXPECT_EQ(plan.steps[1].host, "h2");
    EXPECT_EQ(plan.steps[1].resources, (Resources{1, 4}));
    EXPECT_EQ(plan.steps[1].rule, "replace_persistent_straggler");
    EXPECT_EQ(plan.nodes_after, 3);
    EXPECT_EQ(scaler.budget().job_used(), 1);
    EXPECT_THAT(plan.steps[0].reason, HasSubstr("node w1 is a straggler (it steps at 0.5 times the median rate)"));
}

// A site that wants more patience says so in its own pack; when the event
// does not say how long the node has straggled, the scaler measures it.
TEST(AutoScaler, MeasuresHowLongANodeHasStraggledWhenTheEventDoesNotSay) {
    std::ifstream in(AutoScaler::default_rules_path());
    std::stringstream text;
    text << in.rdbuf();
    std::string pack = text.str();
    const std::string plain = "condition: event == 'straggler'\n";
    ASSERT_NE(pack.find(plain), std::string::npos);
    pack.replace(pack.find(plain), plain.size(), "condition: event == 'straggler' AND straggler_for >= 2m\n");
    AutoScaler scaler(options(1, 4), RuleSet::from_string(pack, Format::yaml, "patient.yaml"));  // straggler_gap 60 s
    ScalingEvent slow = event(EventKind::straggler, "w1");
    slow.straggler_score = 0.3;
    // A gap of 100 s starts a new run: at 150 it has straggled 50 s.
    EXPECT_THAT(scaler.on_event(slow, three_workers(), 0).steps, IsEmpty());
    EXPECT_THAT(scaler.on_event(slow, three_workers(), 100).steps, IsEmpty());
    EXPECT_THAT(scaler.on_event(slow, three_workers(), 150).steps, IsEmpty());
    EXPECT_THAT(scaler.on_event(slow, three_workers(), 200).steps, IsEmpty());
    const ScalingPlan plan = scaler.on_event(slow, three_workers(), 220);  // 120 s since 100
    EXPECT_THAT(kinds(plan), ElementsAre(StepKind::remove, StepKind::launch)) << describe(plan);
}

TEST(AutoScaler, AHangRestartsAllWorkersWithinTheJobBudget) {
    ScalingOptions o = options(1, 4);
    o.max_job_relaunches = 1;
    AutoScaler scaler(o);
    const ScalingPlan plan = scaler.on_event(event(EventKind::job_hung), three_workers(), 0);
    ASSERT_THAT(kinds(plan), ElementsAre(StepKind::restart_all));
    EXPECT_EQ(plan.steps[0].rule, "restart_workers_on_hang");
    EXPECT_THAT(plan.steps[0].reason, HasSubstr("the job hung; restart 1 of 1"));
    EXPECT_EQ(plan.nodes_after, 3);

    const ScalingPlan again = scaler.on_event(event(EventKind::hung, "w1"), three_workers(), 10);
    EXPECT_THAT(again.steps, IsEmpty());
    EXPECT_THAT(all_warnings(again), HasSubstr("workers not restarted: job: relaunch budget 1 used up"));
}

TEST(AutoScaler, AHungWorkerRestartsAllWorkers) {
    AutoScaler scaler(options(1, 4));
    EXPECT_THAT(kinds(scaler.on_event(event(EventKind::hung, "w2"), three_workers(), 0)),
                ElementsAre(StepKind::restart_all));
}

// ------------------------------------------------------------------ capacity

TEST(AutoScaler, CapacityScalesUpToMaxNodes) {
    AutoScaler scaler(options(2, 5));
    ClusterView cluster = three_workers();
    cluster.hosts[2].free_slots = 1;
    ScalingEvent room = event(EventKind::capacity);
    room.host = "h3";
    room.free_slots = 4;
    const ScalingPlan plan = scaler.on_event(room, cluster, 0);
    ASSERT_THAT(kinds(plan), ElementsAre(StepKind::launch, StepKind::launch)) << describe(plan);
    EXPECT_EQ(plan.steps[0].host, "h3");  // most free slots first
    EXPECT_EQ(plan.steps[1].host, "h3");
    EXPECT_EQ(plan.steps[0].resources, (Resources{1, 4}));
    EXPECT_THAT(plan.steps[1].reason, HasSubstr("worker 5 of max_nodes 5"));
    EXPECT_EQ(plan.nodes_after, 5);
    EXPECT_THAT(plan.warnings, IsEmpty());
}

TEST(AutoScaler, CapacityWithoutHostListIsBoundedByTheFreeSlotsReported) {
    AutoScaler scaler(options(1, 5));
    ClusterView cluster = three_workers();
    cluster.hosts.clear();
    ScalingEvent room = event(EventKind::capacity);
    room.free_slots = 1;
    const ScalingPlan plan = scaler.on_event(room, cluster, 0);
    ASSERT_THAT(kinds(plan), ElementsAre(StepKind::launch)) << describe(plan);
    EXPECT_EQ(plan.steps[0].host, "");  // the scheduler chooses
    EXPECT_THAT(all_warnings(plan), HasSubstr("launched 1 of the 2 workers wanted: no more free slots"));
}

TEST(AutoScaler, NoScaleUpAtMaxNodes) {
    AutoScaler scaler(options(1, 3));
    ScalingEvent room = event(EventKind::capacity);
    room.free_slots = 8;
    const ScalingPlan plan = scaler.on_event(room, three_workers(), 0);
    EXPECT_THAT(plan.steps, IsEmpty()) << describe(plan);
    EXPECT_EQ(describe(plan), "no change");
}

// ------------------------------------------------------------------ user packs

constexpr const char* kRemoveStragglers = R"(version: 1
variables: {event: string}
rules:
  - id: drop_stragglers
    condition: event == 'straggler'
    actions: [{type: remove, target: node}]
)";

TEST(AutoScaler, ARemovalBelowMinNodesIsAWarning) {
    AutoScaler scaler(options(3, 4), RuleSet::from_string(kRemoveStragglers));
    const ScalingPlan plan = scaler.on_event(event(EventKind::straggler, "w2"), three_workers(), 0);
    ASSERT_THAT(kinds(plan), ElementsAre(StepKind::remove));
    EXPECT_EQ(plan.nodes_after, 2);
    EXPECT_TRUE(plan.below_min_nodes);
    EXPECT_THAT(plan.warnings, ElementsAre("the job will have 2 workers, below min_nodes 3"));
}

TEST(AutoScaler, AUserPackFileReplacesTheDefaultPolicy) {
    const PackFile pack(R"(version: 1
variables: {event: string, node_relaunches: int}
rules:
  - id: replace_after_one_relaunch
    condition: event == 'failed' AND node_relaunches >= 1
    actions: [{type: replace}]
    priority: 10
  - id: relaunch_first
    condition: event == 'failed'
    actions: [{type: relaunch}]
  - id: grow_by_one
    condition: event == 'capacity'
    actions: [{type: scale_up, parameters: {count: 1}}]
)");
    ScalingOptions o = options(1, 8);
    o.blacklist.after_failures = 0;
    AutoScaler scaler(o, pack.path());
    EXPECT_EQ(scaler.rules().rules().size(), 3u);
    EXPECT_THAT(kinds(scaler.on_event(failed("w1"), three_workers(), 0)), ElementsAre(StepKind::relaunch));
    // Both rules fire now; the higher priority one decides for w1.
    const ScalingPlan plan = scaler.on_event(failed("w1"), three_workers(), 1);
    EXPECT_THAT(kinds(plan), ElementsAre(StepKind::remove, StepKind::launch)) << describe(plan);
    EXPECT_EQ(plan.steps[0].rule, "replace_after_one_relaunch");
    ScalingEvent room = event(EventKind::capacity);
    room.free_slots = 5;
    EXPECT_THAT(kinds(scaler.on_event(room, three_workers(), 2)), ElementsAre(StepKind::launch));
}

TEST(AutoScaler, RefusesAPackItCannotCarryOut) {
    const ScalingOptions o = options(1, 4);
    auto load = [&](const std::string& text) {
        return error_message(Errc::parse, [&] { AutoScaler(o, RuleSet::from_string(text, Format::yaml, "p.yaml")); });
    };
    EXPECT_THAT(load("version: 1\nrules:\n  - id: r\n    condition: event == 'failed'\n"
                     "    actions: [{type: relaunh}]\n"),
                HasSubstr("uses action type 'relaunh', which has no handler (did you mean 'relaunch'?)"));
    EXPECT_THAT(load("version: 1\nrules:\n  - id: r\n    condition: modes < 3\n    actions: [{type: scale_up}]\n"),
                HasSubstr("p.yaml:3:5: rule 'r': the policy uses variable 'modes', which the auto-scaler does not "
                          "set (did you mean 'nodes'?)"));
    EXPECT_THAT(load("version: 1\nvariables: {nodes: string}\nrules:\n  - id: r\n    condition: nodes == 'x'\n"
                     "    actions: [{type: scale_up}]\n"),
                HasSubstr("declares variable 'nodes' as string, but the auto-scaler sets it as int"));
    EXPECT_THAT(load("version: 1\nrules:\n  - id: r\n    condition: event == 'failed'\n"
                     "    actions: [{type: relaunch, target: w3}]\n"),
                HasSubstr("rule 'r': action 'relaunch' acts on the event's node: its target must be 'node' or left "
                          "out, not 'w3'"));
    EXPECT_THAT(load("version: 1\nrules:\n  - id: r\n    condition: event == 'capacity'\n"
                     "    actions: [{type: scale_up, parameters: {count: 0}}]\n"),
                HasSubstr("parameter 'count' must be a whole number of workers, 1 or more"));
    EXPECT_THAT(load("version: 1\nrules:\n  - id: r\n    condition: event == 'capacity'\n"
                     "    actions: [{type: scale_up, parameters: {cuont: 2}}]\n"),
                HasSubstr("takes one parameter, 'count', not 'cuont'"));
}

// ------------------------------------------------------------------ bad input, output

TEST(AutoScaler, RefusesBadOptionsAndEvents) {
    EXPECT_THAT(error_message(Errc::invalid_argument, [] { AutoScaler scaler(options(3, 2)); }),
                HasSubstr("min_nodes (3) must be 0 or more and max_nodes (2) at least 1 and at least min_nodes"));
    AutoScaler scaler(options(1, 4));
    EXPECT_THAT(
        error_message(Errc::invalid_argument, [&] { scaler.on_event(event(EventKind::failed), three_workers(), 0); }),
        HasSubstr("a 'failed' event needs the node it is about"));
    scaler.on_event(failed("w0"), three_workers(), 10);
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { scaler.on_event(failed("w1"), three_workers(), 9); }),
                HasSubstr("time 9 is before the previous event's time 10"));
}

// COHORT_RULES_DIR comes first, so an operator can swap the default
// policy without rebuilding; a folder without the pack falls through.
TEST(AutoScaler, CohortRulesDirOverridesTheShippedPack) {
    const auto dir = std::filesystem::temp_directory_path() / ("cohort_elastic_dir_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "elastic.yaml") << kRemoveStragglers;
    const char* before = std::getenv("COHORT_RULES_DIR");
    const std::string saved = before != nullptr ? before : "";
    ::setenv("COHORT_RULES_DIR", dir.c_str(), 1);
    const std::filesystem::path found = AutoScaler::default_rules_path();
    const ScalingPlan plan = AutoScaler(options(1, 4)).on_event(event(EventKind::straggler, "w2"), three_workers(), 0);
    ::setenv("COHORT_RULES_DIR", "/nonexistent-cohort-rules", 1);
    const std::filesystem::path fallback = AutoScaler::default_rules_path();
    if (before != nullptr)
        ::setenv("COHORT_RULES_DIR", saved.c_str(), 1);
    else
        ::unsetenv("COHORT_RULES_DIR");
    std::filesystem::remove_all(dir);
    EXPECT_EQ(found, dir / "elastic.yaml");
    EXPECT_THAT(kinds(plan), ElementsAre(StepKind::remove));
    EXPECT_NE(fallback, dir / "elastic.yaml");
    EXPECT_EQ(fallback.filename(), "elastic.yaml");
}

TEST(ScalingPlan, DescribeAndJson) {
    AutoScaler scaler(options(4, 4));
    const ScalingPlan plan = scaler.on_event(failed("w1", 137), three_workers(), 0);
    EXPECT_EQ(describe(plan),
              "relaunch w1 on h1 (1 GPU, 4 CPUs): node w1 failed (exit code 137); relaunch 1 of 3 (job: 1 of 10) "
              "[rule relaunch_failed_node]\n"
              "warning: the job will have 3 workers, below min_nodes 4");
    EXPECT_EQ(
        to_json(plan),
        R"j({"steps":[{"kind":"relaunch","node":"w1","host":"h1","resources":{"gpus":1,"cpus":4},)j"
        R"j("rule":"relaunch_failed_node","reason":"node w1 failed (exit code 137); relaunch 1 of 3 (job: 1 of 10)"}],)j"
        R"j("warnings":["the job will have 3 workers, below min_nodes 4"],"avoid_hosts":[],"nodes_after":3,)j"
        R"j("below_min_nodes":true})j");
}

TEST(RelaunchBudget, CountsPerNodeAndPerJob) {
    RelaunchBudget budget(1, 2);
    EXPECT_EQ(budget.refusal("w0"), "");
    budget.charge("w0");
    EXPECT_EQ(budget.refusal("w0"), "node w0: relaunch budget 1 used up");
    EXPECT_EQ(budget.refusal("w1"), "");
    budget.charge({});  // a restart counts against the job only
    EXPECT_EQ(budget.node_used("w1"), 0);
    EXPECT_EQ(budget.refusal("w1"), "job: relaunch budget 2 used up");
    EXPECT_THAT(error_message(Errc::invalid_argument, [] { RelaunchBudget(-1, 2); }),
                HasSubstr("budgets must be 0 or more"));
}

}  // namespace
}  // namespace cohort::test
