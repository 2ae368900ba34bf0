// srun's stderr, passed through to the launcher's: srun writes there both
// the task's stderr and its own verdict on the step ("srun: error: host2:
// task 0: Exited with exit code 3"), which the scheduler reads back to tell
// a node failure, an OOM kill or a preemption from an ordinary exit.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace cohort::detail {

class SrunRelay {
public:
    // Reads `fd` (the read end of srun's stderr pipe; owned from now on)
    // on a thread of its own, so a task that writes much to stderr never
    // blocks on a launcher busy elsewhere.
    explicit SrunRelay(int fd);
    ~SrunRelay();
    SrunRelay(const SrunRelay&) = delete;
    SrunRelay& operator=(const SrunRelay&) = delete;

    // Waits up to `wait` for the end of srun's stderr (srun has exited: it
    // comes at once), stops reading and returns the lines srun and
    // slurmstepd wrote ("srun: ...", "slurmstepd-host1: ..."), the last 64.
    std::vector<std::string> finish(std::chrono::milliseconds wait);

    struct State;

private:
    std::shared_ptr<State> state_;
    std::thread thread_;
};

}  // namespace cohort::detail
