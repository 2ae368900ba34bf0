// A kubelet for the double: runs each pod's first container as a local
// process (its command and args, with its env on top of the double's own),
// writes the pod's status as it starts and ends, and kills the process
// when the pod is deleted. `capacity` bounds how many pods run at once;
// pods past it stay Pending as Unschedulable until room frees up, as on a
// full cluster. A pod of the pause image with no command runs nothing.
#pragma once

#include "pod_store.hpp"

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include <sys/types.h>

namespace cohort::k8s_double {

class PodRunner {
public:
    PodRunner(PodStore& store, int capacity);
    ~PodRunner();  // kills every process it started
    PodRunner(const PodRunner&) = delete;
    PodRunner& operator=(const PodRunner&) = delete;

    void set_capacity(int capacity);
    // SIGKILLs the pod's process and reports it OOMKilled (exit 137); false
    // when the pod runs no process here.
    bool oom_kill(const std::string& name);

private:
    struct Process {
        pid_t pid = -1;
        bool oom = false;
        std::chrono::steady_clock::time_point kill_at{};  // deleted: SIGKILL then
        bool deleted = false;
    };
    void loop();
    void step();
    void start(const std::string& name, const boost::json::object& pod);

    PodStore& store_;
    std::mutex mu_;
    int capacity_;
    std::map<std::string, Process> running_;
    std::set<std::string> seen_;  // pods already started or marked Unschedulable here
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

}  // namespace cohort::k8s_double
