// KubernetesScheduler against the API-server double: pods made from the
// template, each way a pod ends classified into its own cause, stuck
// Pending and image pull errors given up on after pending_timeout,
// capacity when an unschedulable pod gets a node, and the watch surviving
// dropped streams, 410 Gone and deletions it did not see, without a
// worker's end being missed or reported twice. Waits are bounded by
// generous deadlines, never asserted as timings.
#include "k8s_double/api_server.hpp"
#include "k8s_double/pod_store.hpp"

#include <cohort/error.hpp>
#include <cohort/kubernetes.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <boost/json/array.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <unistd.h>

namespace cohort::test {
namespace {

using namespace std::chrono_literals;
using k8s_double::ApiServer;
using k8s_double::PodFate;
using k8s_double::PodStore;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
namespace json = boost::json;

WorkerSpec worker(const std::string& id) {
    return {id, {"python3", "train.py"}, {{"COHORT_MEMBER", id}}, {}};
}

WorkerSpec from_step(const PlanStep& step) {
    static int next = 0;
    return worker(step.node.empty() ? "new" + std::to_string(next++) : step.node);
}

struct Cluster {
    PodStore store{"default"};
    ApiServer server{store, [] {
                         k8s_double::ServerOptions o;
                         o.bookmark_interval = std::chrono::milliseconds(100);
                         return o;
                     }()};

    KubernetesOptions options(const std::string& job = "test") const {
        KubernetesOptions o;
        o.cluster.server = server.url();
        o.cluster.ns = "default";
        o.image = "registry.invalid/trainer:1";
        o.job = job;
        o.grace = 0s;
        o.request_timeout = 5s;
        return o;
    }

    // Waits until the pod exists, for at most 20 s.
    bool has(const std::string& pod) const {
        const auto deadline = std::chrono::steady_clock::now() + 20s;
        while (!store.pod(pod)) {
            if (std::chrono::steady_clock::now() > deadline) return false;
            std::this_thread::sleep_for(2ms);
        }
        return true;
    }
    bool gone(const std::string& pod) const {
        const auto deadline = std::chrono::steady_clock::now() + 20s;
        while (store.pod(pod)) {
            if (std::chrono::steady_clock::now() > deadline) return false;
            std::this_thread::sleep_for(2ms);
        }
        return true;
    }
};

std::vector<WorkerExit> wait_exits(Scheduler& scheduler, std::size_t count) {
    std::vector<WorkerExit> out;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (out.size() < count && std::chrono::steady_clock::now() < deadline) {
        for (WorkerExit& exit : scheduler.poll()) out.push_back(std::move(exit));
        if (out.size() < count) std::this_thread::sleep_for(2ms);
    }
    EXPECT_EQ(out.size(), count) << "exits that came back before the deadline";
    return out;
}

// Polls for a while and returns what came: to check nothing more does.
std::vector<WorkerExit> settle(Scheduler& scheduler, std::chrono::milliseconds d = 400ms) {
    std::vector<WorkerExit> out;
    const auto until = std::chrono::steady_clock::now() + d;
    while (std::chrono::steady_clock::now() < until) {
        for (WorkerExit& exit : scheduler.poll()) out.push_back(std::move(exit));
        std::this_thread::sleep_for(5ms);
    }
    return out;
}

std::string label(const json::object& pod, const char* key) {
    return std::string(pod.at("metadata").at("labels").at(key).as_string());
}

TEST(KubernetesScheduler, CreatesPodsFromTheTemplateWithCohortsLabelsEnvAndOwner) {
    Cluster k;
    k.store.create(json::object{
        {"metadata", json::object{{"name", "launcher"}}},
        {"spec", json::object{{"containers", json::array{json::object{{"name", "l"}, {"image", "cohort"}}}}}}});
    const auto dir = std::filesystem::temp_directory_path() / ("cohort_k8s_tpl_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "pod.yaml") << R"(apiVersion: v1
kind: Pod
metadata:
  labels: {team: vision}
spec:
  restartPolicy: Always
  containers:
  - name: trainer
    image: registry.invalid/vision:7
    args: ["--old"]
    env:
    - {name: COHORT_MEMBER, value: "overridden"}
    - {name: NCCL_DEBUG, value: "INFO"}
    resources: {limits: {nvidia.com/gpu: 1}}
)";
    KubernetesOptions o = k.options("Vision_Job");
    o.pod_template = dir / "pod.yaml";
    o.owner_pod = "launcher";
    KubernetesScheduler s(o, from_step);
    EXPECT_EQ(s.name(), "kubernetes");
    s.launch(worker("node-A.0"));
    EXPECT_EQ(s.pod_name("node-A.0"), "vision-job-node-a-0-0");
    ASSERT_TRUE(k.has("vision-job-node-a-0-0"));
    const json::object pod = *k.store.pod("vision-job-node-a-0-0");
    EXPECT_EQ(label(pod, "team"), "vision");
    EXPECT_EQ(label(pod, "cohort.dev/job"), "vision-job");
    EXPECT_EQ(label(pod, "cohort.dev/worker"), "node-a-0");
    EXPECT_EQ(pod.at("metadata").at("annotations").at("cohort.dev/worker-id"), "node-A.0");
    const json::object& ref = pod.at("metadata").at("ownerReferences").as_array().at(0).as_object();
    EXPECT_EQ(ref.at("name"), "launcher");
    EXPECT_EQ(ref.at("uid"), k.store.pod("launcher")->at("metadata").at("uid"));
    EXPECT_EQ(pod.at("spec").at("restartPolicy"), "Never");
    const json::object& c = pod.at("spec").at("containers").as_array().at(0).as_object();
    EXPECT_EQ(c.at("image"), "registry.invalid/vision:7");
    EXPECT_EQ(c.at("command"), (json::array{"python3", "train.py"}));
    EXPECT_FALSE(c.contains("args"));
    // The pod's IP (downward API) comes before cohort's variables, which may name it as $(COHORT_POD_IP).
    const json::object pod_ip{{"name", "COHORT_POD_IP"},
                              {"valueFrom", json::object{{"fieldRef", json::object{{"fieldPath", "status.podIP"}}}}}};
    EXPECT_EQ(c.at("env"), (json::array{json::object{{"name", "NCCL_DEBUG"}, {"value", "INFO"}}, pod_ip,
                                        json::object{{"name", "COHORT_MEMBER"}, {"value", "node-A.0"}}}));
    EXPECT_TRUE(c.contains("resources"));
    EXPECT_EQ(s.pod_ip("node-A.0"), "") << "Pending: no IP yet";
    k.store.set_fate("vision-job-node-a-0-0", PodFate::running);
    EXPECT_EQ(s.pod_ip("node-A.0"), "10.1.0.7");
    EXPECT_EQ(s.pod_ip("no-such-worker"), "");
    s.stop_all(0s);
    EXPECT_TRUE(k.gone("vision-job-node-a-0-0"));
    std::filesystem::remove_all(dir);
}

TEST(KubernetesScheduler, BadTemplatesAndOwnersSayWhatIsWrong) {
    Cluster k;
    const auto dir = std::filesystem::temp_directory_path() / ("cohort_k8s_bad_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "deploy.yaml") << "kind: Deployment\nspec: {}\n";
    std::ofstream(dir / "noimage.json") << R"({"containers": [{"name": "w"}]})";
    KubernetesOptions o = k.options();
    o.pod_template = dir / "deploy.yaml";
    try {
        KubernetesScheduler s(o, from_step);
        ADD_FAILURE() << "a Deployment was taken as a pod template";
    } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("kind must be Pod"));
    }
    o.pod_template = dir / "noimage.json";
    o.image.clear();
    try {
        KubernetesScheduler s(o, from_step);
        ADD_FAILURE() << "a container without an image was accepted";
    } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("has no image"));
    }
    o = k.options();
    o.owner_pod = "not-there";
    try {
        KubernetesScheduler s(o, from_step);
        ADD_FAILURE() << "a missing owner pod was accepted";
    } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("cannot read the owner pod not-there"));
        EXPECT_THAT(e.what(), HasSubstr("not found"));
    }
    std::filesystem::remove_all(dir);
}

struct FateCase {
    PodFate fate;
    int exit_code;
    ExitKind kind;
    ExitCause cause;
    const char* message;
};

TEST(KubernetesScheduler, EachWayAPodEndsIsItsOwnCause) {
    Cluster k;
    KubernetesScheduler s(k.options(), from_step);
    const std::vector<FateCase> cases = {
        {PodFate::succeeded, 0, ExitKind::exited, ExitCause::none, "exit code 0"},
        {PodFate::failed, 3, ExitKind::exited, ExitCause::none, "exit code 3 (Error) on node node-1"},
        {PodFate::oom_killed, 137, ExitKind::exited, ExitCause::out_of_memory, "OOMKilled: container 'worker'"},
        {PodFate::evicted, 137, ExitKind::exited, ExitCause::evicted, "evicted on node node-1: The node was low"},
        {PodFate::preempted, 143, ExitKind::exited, ExitCause::preempted, "preempted on node node-1"},
        {PodFate::node_lost, 0, ExitKind::signaled, ExitCause::node_lost, "node lost on node node-1: Taint manager"},
    };
    for (std::size_t i = 0; i < cases.size(); ++i) s.launch(worker("w" + std::to_string(i)));
    for (std::size_t i = 0; i < cases.size(); ++i) ASSERT_TRUE(k.has("test-w" + std::to_string(i) + "-0"));
    for (std::size_t i = 0; i < cases.size(); ++i) {
        const std::string pod = "test-w" + std::to_string(i) + "-0";
        k.store.set_fate(pod, PodFate::running);
        k.store.set_fate(pod, cases[i].fate, cases[i].exit_code);
    }
    auto exits = wait_exits(s, cases.size());
    std::sort(exits.begin(), exits.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
    ASSERT_EQ(exits.size(), cases.size());
    for (std::size_t i = 0; i < cases.size(); ++i) {
        SCOPED_TRACE(exits[i].id);
        EXPECT_EQ(exits[i].id, "w" + std::to_string(i));
        EXPECT_EQ(exits[i].kind, cases[i].kind);
        EXPECT_EQ(exits[i].cause, cases[i].cause) << to_string(exits[i].cause);
        if (cases[i].kind == ExitKind::exited) {
            EXPECT_EQ(exits[i].exit_code, cases[i].exit_code);
        }
        EXPECT_THAT(exits[i].message, HasSubstr(cases[i].message));
        EXPECT_EQ(exits[i].host, "node-1");
        EXPECT_FALSE(exits[i].stopped);
    }
    EXPECT_TRUE(exits[0].succeeded());
    EXPECT_THAT(s.running(), IsEmpty());
    // Ended pods are deleted; each end was reported once.
    for (std::size_t i = 0; i < cases.size(); ++i) EXPECT_TRUE(k.gone("test-w" + std::to_string(i) + "-0"));
    EXPECT_THAT(settle(s), IsEmpty());
}

TEST(KubernetesScheduler, APodDeletedBySomeoneElseIsReportedDeleted) {
    Cluster k;
    KubernetesScheduler s(k.options(), from_step);
    s.launch(worker("w0"));
    ASSERT_TRUE(k.has("test-w0-0"));
    k.store.set_fate("test-w0-0", PodFate::running);
    k.store.remove("test-w0-0");
    const auto exits = wait_exits(s, 1);
    ASSERT_EQ(exits.size(), 1u);
    EXPECT_EQ(exits[0].cause, ExitCause::deleted);
    EXPECT_THAT(exits[0].message, HasSubstr("pod deleted on node node-1"));
}

TEST(KubernetesScheduler, StuckPendingAndImagePullErrorsAreGivenUpAfterThePendingTimeout) {
    Cluster k;
    KubernetesOptions o = k.options();
    o.pending_timeout = 300ms;
    KubernetesScheduler s(o, from_step);
    s.launch(worker("stuck"));
    s.launch(worker("pull"));
    s.launch(worker("backoff"));
    ASSERT_TRUE(k.has("test-stuck-0") && k.has("test-pull-0") && k.has("test-backoff-0"));
    k.store.set_fate("test-stuck-0", PodFate::unschedulable);
    k.store.set_fate("test-pull-0", PodFate::image_pull_error, 0, "ErrImagePull");
    k.store.set_fate("test-backoff-0", PodFate::image_pull_error, 0, "ImagePullBackOff");
    auto exits = wait_exits(s, 3);
    std::sort(exits.begin(), exits.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
    ASSERT_EQ(exits.size(), 3u);
    EXPECT_EQ(exits[0].id, "backoff");  // ImagePullBackOff: at once
    EXPECT_EQ(exits[0].cause, ExitCause::image_pull);
    EXPECT_EQ(exits[0].kind, ExitKind::not_started);
    EXPECT_EQ(exits[1].id, "pull");  // ErrImagePull: may be transient, so after the timeout
    EXPECT_EQ(exits[1].cause, ExitCause::image_pull);
    EXPECT_EQ(exits[2].id, "stuck");
    EXPECT_EQ(exits[2].cause, ExitCause::pending_timeout);
    EXPECT_EQ(exits[2].kind, ExitKind::not_started);
    EXPECT_THAT(exits[2].message, HasSubstr("Pending for more than 0.3 s (Unschedulable: 0/3 nodes are available"));
    EXPECT_TRUE(k.gone("test-stuck-0") && k.gone("test-pull-0") && k.gone("test-backoff-0"));
}

TEST(KubernetesScheduler, AWorkerGivenUpLeavesAPlaceholderWhoseSchedulingIsCapacity) {
    Cluster k;
    KubernetesOptions o = k.options();
    o.pending_timeout = 300ms;
    KubernetesScheduler s(o, from_step);
    s.launch(worker("w0"));
    s.launch(worker("w1"));
    ASSERT_TRUE(k.has("test-w0-0") && k.has("test-w1-0"));
    k.store.set_fate("test-w0-0", PodFate::running);
    k.store.set_fate("test-w1-0", PodFate::unschedulable);
    const auto exits = wait_exits(s, 1);
    ASSERT_EQ(exits.size(), 1u);
    EXPECT_EQ(exits[0].cause, ExitCause::pending_timeout);
    ASSERT_TRUE(k.has("test-placeholder-0"));
    const json::object placeholder = *k.store.pod("test-placeholder-0");
    EXPECT_EQ(label(placeholder, "cohort.dev/role"), "placeholder");
    EXPECT_EQ(label(placeholder, "cohort.dev/job"), "test");
    const json::object& c = placeholder.at("spec").at("containers").as_array().at(0).as_object();
    EXPECT_EQ(c.at("image"), "registry.k8s.io/pause:3.9");
    EXPECT_FALSE(c.contains("command"));
    EXPECT_FALSE(c.contains("env"));
    EXPECT_THAT(s.capacity(), IsEmpty());  // still waiting for room
    k.store.set_fate("test-placeholder-0", PodFate::unschedulable);
    k.store.add_node("node-9");  // room: the placeholder is scheduled
    std::vector<ScalingEvent> events;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (events.empty() && std::chrono::steady_clock::now() < deadline) {
        s.poll();
        events = s.capacity();
        std::this_thread::sleep_for(2ms);
    }
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].kind, EventKind::capacity);
    EXPECT_EQ(events[0].host, "node-9");
    EXPECT_EQ(events[0].free_slots, 1);
    EXPECT_TRUE(k.gone("test-placeholder-0"));
    EXPECT_THAT(s.running(), ::testing::ElementsAre("w0"));
}

TEST(KubernetesScheduler, ACreateThatConflictsIsReportedNotStarted) {
    Cluster k;
    k.store.create(
        json::object{{"metadata", json::object{{"name", "test-w0-0"}}},
                     {"spec", json::object{{"containers", json::array{json::object{{"name", "x"}, {"image", "y"}}}}}}});
    KubernetesScheduler s(k.options(), from_step);
    s.launch(worker("w0"));
    const auto exits = wait_exits(s, 1);
    ASSERT_EQ(exits.size(), 1u);
    EXPECT_EQ(exits[0].kind, ExitKind::not_started);
    EXPECT_EQ(exits[0].cause, ExitCause::api_error);
    EXPECT_THAT(exits[0].message, HasSubstr("pod test-w0-0 already exists"));
    EXPECT_EQ(k.server.counts().conflicts, 1u);
    // The other run's pod is left alone; a relaunch takes the next name.
    ScalingPlan plan;
    plan.steps.push_back({StepKind::relaunch, "w0", "", {}, "", "again"});
    s.execute(plan);
    EXPECT_TRUE(k.has("test-w0-1"));
    EXPECT_TRUE(k.store.pod("test-w0-0").has_value());
}

TEST(KubernetesScheduler, RelaunchDeletesTheOldPodAndStartsANewOneAtOnce) {
    Cluster k;
    KubernetesScheduler s(k.options(), from_step);
    s.launch(worker("w0"));
    ASSERT_TRUE(k.has("test-w0-0"));
    k.store.set_fate("test-w0-0", PodFate::running);
    ScalingPlan plan;
    plan.steps.push_back({StepKind::relaunch, "w0", "", {}, "", "hung"});
    s.execute(plan);
    const auto exits = s.poll();
    ASSERT_EQ(exits.size(), 1u);
    EXPECT_TRUE(exits[0].stopped);
    EXPECT_THAT(exits[0].message, HasSubstr("stopped by the scheduler: pod test-w0-0 deleted (hung)"));
    EXPECT_EQ(s.pod_name("w0"), "test-w0-1");
    EXPECT_TRUE(k.gone("test-w0-0"));
    EXPECT_TRUE(k.has("test-w0-1"));
    // The old pod's DELETED event is not a second end.
    EXPECT_THAT(settle(s), IsEmpty());
    EXPECT_THAT(s.running(), ::testing::ElementsAre("w0"));
}

TEST(KubernetesScheduler, DroppedWatchesAnd410AreSurvivedWithoutMissingOrRepeatingAnEnd) {
    Cluster k;
    KubernetesScheduler s(k.options(), from_step);
    for (const char* id : {"a", "b", "c", "d"}) s.launch(worker(id));
    for (const char* pod : {"test-a-0", "test-b-0", "test-c-0", "test-d-0"}) ASSERT_TRUE(k.has(pod));
    // a ends, then the stream drops: the re-list repeats a's end.
    k.store.set_fate("test-a-0", PodFate::failed, 2);
    auto exits = wait_exits(s, 1);
    ASSERT_EQ(exits.size(), 1u);
    EXPECT_EQ(exits[0].id, "a");
    k.server.drop_watches();
    // b ends while the watch is down and the first lists fail.
    k.server.drop_next(2);
    k.store.set_fate("test-b-0", PodFate::oom_killed);
    exits = wait_exits(s, 1);
    ASSERT_EQ(exits.size(), 1u);
    EXPECT_EQ(exits[0].id, "b");
    EXPECT_EQ(exits[0].cause, ExitCause::out_of_memory);
    // History compacted and the watch told 410: c's end comes from the new list.
    k.store.compact();
    k.server.expire_watches();
    k.store.set_fate("test-c-0", PodFate::failed, 5);
    exits = wait_exits(s, 1);
    ASSERT_EQ(exits.size(), 1u);
    EXPECT_EQ(exits[0].id, "c");
    EXPECT_EQ(exits[0].exit_code, 5);
    // d is deleted while no watch runs (HTTP 410 on the next watch): only the list can tell.
    k.server.set_gone_as_http(true);
    k.server.drop_next(1);
    k.server.drop_watches();
    k.store.remove("test-d-0");
    exits = wait_exits(s, 1);
    ASSERT_EQ(exits.size(), 1u);
    EXPECT_EQ(exits[0].id, "d");
    EXPECT_EQ(exits[0].cause, ExitCause::deleted);
    EXPECT_THAT(settle(s), IsEmpty());
    EXPECT_THAT(s.running(), IsEmpty());
    EXPECT_GE(k.server.counts().lists, 3u);
}

TEST(KubernetesScheduler, ManyRelaunchesGoOutConcurrentlyAgainstASlowServer) {
    Cluster k;
    KubernetesOptions o = k.options();
    o.max_concurrent_requests = 16;
    KubernetesScheduler s(o, from_step);
    for (int i = 0; i < 32; ++i) s.launch(worker("w" + std::to_string(i)));
    for (int i = 0; i < 32; ++i) ASSERT_TRUE(k.has("test-w" + std::to_string(i) + "-0"));
    k.server.set_delay(100ms);
    ScalingPlan plan;
    for (int i = 0; i < 32; ++i) plan.steps.push_back({StepKind::relaunch, "w" + std::to_string(i), "", {}, "", "r"});
    s.execute(plan);  // returns before the pods exist
    EXPECT_FALSE(k.store.pod("test-w31-1").has_value());
    for (int i = 0; i < 32; ++i) EXPECT_TRUE(k.has("test-w" + std::to_string(i) + "-1"));
    EXPECT_EQ(wait_exits(s, 32).size(), 32u);  // the stopped ends
    k.server.set_delay(0ms);
    s.stop_all(0s);
    for (int i = 0; i < 32; ++i) EXPECT_TRUE(k.gone("test-w" + std::to_string(i) + "-1"));
}

TEST(KubernetesScheduler, SetLabelsPatchesThePodsLabels) {
    Cluster k;
    KubernetesScheduler s(k.options(), from_step);
    s.launch(worker("w0"));
    s.set_labels("w0", {{"rank", "3"}, {"stage", "warmup"}});  // before the create is answered
    ASSERT_TRUE(k.has("test-w0-0"));
    const auto labels = [&] { return k.store.pod("test-w0-0")->at("metadata").at("labels").as_object(); };
    auto deadline = std::chrono::steady_clock::now() + 20s;
    while (!labels().contains("rank") && std::chrono::steady_clock::now() < deadline) {
        s.poll();
        std::this_thread::sleep_for(2ms);
    }
    EXPECT_EQ(labels().at("rank"), "3");
    EXPECT_EQ(labels().at("stage"), "warmup");
    EXPECT_EQ(labels().at("cohort.dev/worker"), "w0");
    s.set_labels("w0", {{"stage", ""}, {"rank", "4"}});
    deadline = std::chrono::steady_clock::now() + 20s;
    while (labels().at("rank") != "4" && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(2ms);
    EXPECT_EQ(labels().at("rank"), "4");
    EXPECT_FALSE(labels().contains("stage"));
    EXPECT_GE(k.server.counts().patches, 2u);
    EXPECT_THAT(settle(s, 200ms), IsEmpty());  // a label change is no end
    try {
        s.set_labels("w0", {{"cohort.dev/job", "x"}});
        ADD_FAILURE() << "the scheduler's own label was patched";
    } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("label 'cohort.dev/job' is the scheduler's own"));
    }
    try {
        s.set_labels("nobody", {{"a", "b"}});
        ADD_FAILURE() << "a worker that is not running was labelled";
    } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("worker 'nobody' is not running"));
    }
}

TEST(KubernetesScheduler, AnUnreachableServerReportsTheCreateFailure) {
    KubernetesOptions o;
    o.cluster.server = "http://127.0.0.1:9";  // discard: nothing listens
    o.image = "x";
    o.request_timeout = 2s;
    KubernetesScheduler s(o, from_step);
    s.launch(worker("w0"));
    const auto exits = wait_exits(s, 1);
    ASSERT_EQ(exits.size(), 1u);
    EXPECT_EQ(exits[0].kind, ExitKind::not_started);
    EXPECT_EQ(exits[0].cause, ExitCause::api_error);
    EXPECT_THAT(exits[0].message, HasSubstr("cannot create pod cohort-w0-0"));
    EXPECT_THAT(exits[0].message, HasSubstr("127.0.0.1:9"));
}

}  // namespace
}  // namespace cohort::test
