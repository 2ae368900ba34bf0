// How long a mass relaunch of 32 workers takes to reach the API server
// with KubernetesScheduler's concurrent, rate-limited requests, against the
// anchor of one request at a time (DLRover's serialised relaunch, issue
// dlrover#1690), on the API-server double with added latency per request
// (a loaded API server answers a create in tens to hundreds of ms).
// Measured: from execute() of a plan of 32 relaunch steps until the
// 32nd new pod exists on the server (its create has been accepted).
//
//   bench_k8s_relaunch [--workers 32] [--runs 3]
#include "k8s_double/api_server.hpp"
#include "k8s_double/pod_store.hpp"

#include <cohort/kubernetes.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

cohort::WorkerSpec worker(const std::string& id) {
    return {id, {"python3", "train.py"}, {{"COHORT_MEMBER", id}}, {}};
}

// Seconds from execute() until every relaunched pod exists.
double relaunch_seconds(int workers, int concurrency, std::chrono::milliseconds latency) {
    cohort::k8s_double::PodStore store;
    cohort::k8s_double::ApiServer server(store);
    cohort::KubernetesOptions o;
    o.cluster.server = server.url();
    o.image = "registry.invalid/trainer:1";
    o.job = "bench";
    o.grace = 0s;
    o.max_concurrent_requests = concurrency;
    cohort::KubernetesScheduler scheduler(o, [](const cohort::PlanStep& step) { return worker(step.node); });
    for (int i = 0; i < workers; ++i) scheduler.launch(worker("w" + std::to_string(i)));
    const auto has_all = [&](int generation) {
        for (int i = 0; i < workers; ++i)
            if (!store.pod("bench-w" + std::to_string(i) + "-" + std::to_string(generation))) return false;
        return true;
    };
    const auto wait_all = [&](int generation) {
        const auto deadline = Clock::now() + 120s;
        while (!has_all(generation)) {
            if (Clock::now() > deadline) {
                std::fprintf(stderr, "bench_k8s_relaunch: pods did not appear within 120 s\n");
                std::exit(1);
            }
            std::this_thread::sleep_for(200us);
        }
    };
    wait_all(0);
    // The first launches spent the token bucket's burst; a relaunch comes
    // long after them, with the bucket full again.
    std::this_thread::sleep_for(1s);
    server.set_delay(latency);
    cohort::ScalingPlan plan;
    for (int i = 0; i < workers; ++i)
        plan.steps.push_back({cohort::StepKind::relaunch, "w" + std::to_string(i), "", {}, "", "bench"});
    const auto start = Clock::now();
    scheduler.execute(plan);
    wait_all(1);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    server.set_delay(0ms);
    scheduler.stop_all(0s);
    return seconds;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    int workers = 32, runs = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string arg = argv[i];
        if (arg == "--workers") {
            workers = std::atoi(argv[i + 1]);
        } else if (arg == "--runs") {
            runs = std::atoi(argv[i + 1]);
        } else {
            std::fprintf(stderr, "usage: bench_k8s_relaunch [--workers N] [--runs N]\n");
            return 2;
        }
    }
    if (workers < 1 || runs < 1) {
        std::fprintf(stderr, "bench_k8s_relaunch: --workers and --runs must be 1 or more\n");
        return 2;
    }
    std::printf("%d relaunches (delete + create each), median of %d runs, until every new pod exists\n\n", workers,
                runs);
    std::printf("%-22s %-24s %-24s %s\n", "API latency / request", "cohort (16 in flight)", "one at a time (anchor)",
                "anchor / cohort");
    for (const auto latency : {0ms, 50ms, 200ms}) {
        std::vector<double> cohort_s, serial_s;
        for (int r = 0; r < runs; ++r) {
            cohort_s.push_back(relaunch_seconds(workers, 16, latency));
            serial_s.push_back(relaunch_seconds(workers, 1, latency));
        }
        const double c = median(cohort_s), s = median(serial_s);
        std::printf("%-22s %-24s %-24s %.1fx\n", (std::to_string(latency.count()) + " ms").c_str(),
                    (std::to_string(c).substr(0, 5) + " s").c_str(), (std::to_string(s).substr(0, 5) + " s").c_str(),
                    s / c);
    }
    return 0;
}
