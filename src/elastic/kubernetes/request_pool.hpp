// Requests to the API server issued concurrently under a rate limit, so a
// mass relaunch is not serialised (DLRover's issue 1690: 20 s per pod)
// and does not flood the server either: up to `threads` in flight, a token
// bucket of `rate` per second with `burst` at once, as client-go's
// QPS/Burst. Urgent tasks (creates: a worker waits for them) go before
// the others (deletes); within each, in the order submitted.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace cohort::k8s {

class RequestPool {
public:
    RequestPool(int threads, double rate, int burst);
    // Runs what is queued, then joins.
    ~RequestPool();
    RequestPool(const RequestPool&) = delete;
    RequestPool& operator=(const RequestPool&) = delete;

    void submit(std::function<void()> task, bool urgent = false);
    // Waits until every submitted task has finished, or `until`; true when they have.
    bool wait_idle(std::chrono::steady_clock::time_point until);

private:
    void run();
    void take_token(std::unique_lock<std::mutex>& lock);

    std::mutex mu_;
    std::condition_variable cv_, idle_cv_;
    std::deque<std::function<void()>> urgent_, queue_;
    int busy_ = 0;
    bool stopping_ = false;
    double rate_;
    double burst_;
    double tokens_;
    std::chrono::steady_clock::time_point refilled_;
    std::vector<std::thread> threads_;
};

}  // namespace cohort::k8s
