// WorkloadRegistry: registering workloads, their live figures, per-process
// GPU memory, bad arguments, and dropping workloads whose process ended
// (real child processes, reaped and zombie).
#include "support.hpp"

#include <cohort/workloads.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

namespace cohort::test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Workload workload(std::string id, int64_t pid = ::getpid()) {
    Workload w;
    w.id = std::move(id);
    w.pid = pid;
    w.gpus = {0, 1};
    w.memory_bytes = 40ull << 30;
    w.priority = 5;
    w.dataset_files = {"/data/train-000.tar", "/data/train-001.tar"};
    w.model_files = {"/models/llama.pt"};
    w.access = AccessPattern::random;
    return w;
}

// A child process that lives until end() is called (it waits on a pipe).
class Child {
public:
    Child() {
        int fds[2];
        EXPECT_EQ(::pipe(fds), 0);
        pid_ = ::fork();
        if (pid_ == 0) {
            ::close(fds[1]);
            char c;
            while (::read(fds[0], &c, 1) > 0) {
            }
            ::_exit(0);
        }
        ::close(fds[0]);
        write_end_ = fds[1];
    }
    ~Child() {
        end();
        reap();
    }
    pid_t pid() const { return pid_; }
    void end() {
        if (write_end_ >= 0) ::close(write_end_);
        write_end_ = -1;
    }
    // Waits until the child has exited but leaves it a zombie (unreaped).
    void wait_exited() {
        siginfo_t info{};
        ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOWAIT), 0);
    }
    void reap() {
        if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
        pid_ = -1;
    }

private:
    pid_t pid_ = -1;
    int write_end_ = -1;
};

TEST(WorkloadRegistry, KeepsWhatAWorkloadDeclares) {
    WorkloadRegistry registry;
    registry.add(workload("train"));
    const auto found = registry.find("train");
    ASSERT_TRUE(found);
    EXPECT_EQ(found->workload.pid, ::getpid());
    EXPECT_THAT(found->workload.gpus, ElementsAre(0u, 1u));
    EXPECT_EQ(found->workload.memory_bytes, 40ull << 30);
    EXPECT_EQ(found->workload.priority, 5);
    EXPECT_EQ(found->workload.model_files.at(0), "/models/llama.pt");
    EXPECT_EQ(to_string(found->workload.access), "random");
    EXPECT_EQ(registry.size(), 1u);
    EXPECT_FALSE(registry.find("eval"));
}

TEST(WorkloadRegistry, ListsByIdAndRemoves) {
    WorkloadRegistry registry;
    registry.add(workload("b"));
    registry.add(workload("a"));
    const auto all = registry.list();
    ASSERT_EQ(all.size(), 2u);
    EXPECT_EQ(all[0].workload.id, "a");
    EXPECT_EQ(all[1].workload.id, "b");
    registry.remove("a");
    EXPECT_FALSE(registry.find("a"));
    EXPECT_EQ(registry.size(), 1u);
    EXPECT_THAT(error_message(Errc::not_found, [&] { registry.remove("a"); }),
                HasSubstr("WorkloadRegistry::remove: no workload 'a' is registered"));
}

TEST(WorkloadRegistry, UpdatesLiveFigures) {
    WorkloadRegistry registry;
    registry.add(workload("train"));
    registry.update("train", WorkloadFigures{.io_bytes_per_second = 2.5e9, .batch_size = 256, .epoch_seconds = 1800});
    const auto found = registry.find("train");
    ASSERT_TRUE(found);
    EXPECT_EQ(found->figures.io_bytes_per_second, 2.5e9);
    EXPECT_EQ(found->figures.batch_size, 256u);
    EXPECT_EQ(found->figures.epoch_seconds, 1800);
    EXPECT_THAT(error_message(Errc::invalid_argument,
                              [&] { registry.update("train", WorkloadFigures{.io_bytes_per_second = -1}); }),
                HasSubstr("workload 'train': io_bytes_per_second must be a number >= 0, got -1"));
    EXPECT_THAT(
        error_message(Errc::invalid_argument, [&] { registry.update("train", WorkloadFigures{.epoch_seconds = -3}); }),
        HasSubstr("epoch_seconds must be a number >= 0"));
    EXPECT_THAT(error_message(Errc::not_found, [&] { registry.update("eval", {}); }),
                HasSubstr("no workload 'eval' is registered"));
}

TEST(WorkloadRegistry, TakesPerProcessGpuMemoryFromASample) {
    WorkloadRegistry registry;
    registry.add(workload("train"));
    GpuSample sample;
    for (uint32_t index : {0u, 1u, 2u}) {
        GpuReading gpu;
        gpu.index = index;
        gpu.processes_state = FieldState::ok;
        gpu.processes.push_back(
            GpuProcess{static_cast<uint32_t>(::getpid()), "python", Reading<uint64_t>::of(10 + index)});
        gpu.processes.push_back(GpuProcess{1, "other", Reading<uint64_t>::of(1000)});
        sample.gpus.push_back(gpu);
    }
    sample.gpus[2].processes_state = FieldState::not_supported;  // a backend that cannot list them
    registry.observe_gpu_memory(sample);
    auto found = registry.find("train");
    ASSERT_TRUE(found);
    EXPECT_EQ(found->gpu_memory_bytes, (std::map<uint32_t, uint64_t>{{0, 10}, {1, 11}}));
    EXPECT_EQ(found->gpu_memory_total(), 21u);

    registry.observe_gpu_memory(std::map<int64_t, uint64_t>{{::getpid(), 77}});
    found = registry.find("train");
    ASSERT_TRUE(found);
    EXPECT_EQ(found->gpu_memory_bytes, (std::map<uint32_t, uint64_t>{{0, 77}}));
}

TEST(WorkloadRegistry, BadWorkloadsNameTheField) {
    WorkloadRegistry registry;
    const auto refused = [&](Workload w) { return error_message(Errc::invalid_argument, [&] { registry.add(w); }); };
    EXPECT_THAT(refused(workload("")), HasSubstr("id is empty"));
    EXPECT_THAT(refused(workload("x", 0)), HasSubstr("workload 'x': pid must be a process id > 0, got 0"));
    EXPECT_THAT(refused(workload("x", -4)), HasSubstr("pid must be a process id > 0, got -4"));
    Workload w = workload("x");
    w.memory_bytes = 0;
    EXPECT_THAT(refused(w), HasSubstr("memory_bytes (the expected GPU memory footprint) must be more than 0"));
    w = workload("x");
    w.gpus = {3, 1, 3};
    EXPECT_THAT(refused(w), HasSubstr("gpus lists GPU 3 twice"));
    w = workload("x");
    w.dataset_files.emplace_back();
    EXPECT_THAT(refused(w), HasSubstr("dataset_files holds an empty path"));
    w = workload("x");
    w.model_files = {""};
    EXPECT_THAT(refused(w), HasSubstr("model_files holds an empty path"));
    registry.add(workload("x"));
    EXPECT_THAT(refused(workload("x")), HasSubstr("workload 'x' is already registered"));
    EXPECT_EQ(registry.size(), 1u);
}

TEST(WorkloadRegistry, RefusesAProcessThatIsNotRunning) {
    Child child;
    const pid_t pid = child.pid();
    child.end();
    child.reap();
    WorkloadRegistry registry;
    EXPECT_THAT(error_message(Errc::not_found, [&] { registry.add(workload("gone", pid)); }),
                HasSubstr("workload 'gone': process " + std::to_string(pid) + " is not running"));
}

TEST(WorkloadRegistry, PruneDropsAWorkloadWhoseProcessExited) {
    Child child;
    WorkloadRegistry registry;
    registry.add(workload("child", child.pid()));
    registry.add(workload("me"));
    EXPECT_TRUE(registry.prune().empty());
    child.end();
    child.reap();
    EXPECT_THAT(registry.prune(), ElementsAre("child"));
    EXPECT_FALSE(registry.find("child"));
    EXPECT_TRUE(registry.find("me"));
}

TEST(WorkloadRegistry, AZombieCountsAsEndedOnLookup) {
    Child child;
    WorkloadRegistry registry;
    registry.add(workload("child", child.pid()));
    child.end();
    child.wait_exited();  // exited, not reaped: kill(pid, 0) still succeeds
    EXPECT_FALSE(registry.find("child"));
    EXPECT_EQ(registry.size(), 0u);
}

TEST(WorkloadRegistry, ListDropsEndedWorkloadsThroughACustomCheck) {
    std::set<int64_t> dead;
    std::mutex mutex;
    WorkloadRegistry registry(WorkloadRegistryOptions{.alive = [&](int64_t pid) {
        std::lock_guard lock(mutex);
        return !dead.contains(pid);
    }});
    registry.add(workload("a", 100));
    registry.add(workload("b", 200));
    {
        std::lock_guard lock(mutex);
        dead.insert(100);
    }
    const auto all = registry.list();
    ASSERT_EQ(all.size(), 1u);
    EXPECT_EQ(all[0].workload.id, "b");
}

TEST(WorkloadRegistry, IsSafeToUseFromSeveralThreads) {
    WorkloadRegistry registry;
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&registry, t] {
            for (int i = 0; i < 50; ++i) {
                const std::string id = "w" + std::to_string(t) + "-" + std::to_string(i);
                registry.add(workload(id));
                registry.update(id, WorkloadFigures{.batch_size = static_cast<uint64_t>(i)});
                registry.list();
                if (i % 2 == 0) registry.remove(id);
            }
        });
    }
    for (auto& thread : threads) thread.join();
    EXPECT_EQ(registry.size(), 100u);
}

}  // namespace
}  // namespace cohort::test
