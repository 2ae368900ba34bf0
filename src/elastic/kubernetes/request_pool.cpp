// The request pool: worker threads, one queue, one token bucket.
#include "elastic/kubernetes/request_pool.hpp"

#include <algorithm>

namespace cohort::k8s {

RequestPool::RequestPool(int threads, double rate, int burst)
    : rate_(rate > 0 ? rate : 1e9),
      burst_(std::max(1, burst)),
      tokens_(std::max(1, burst)),
      refilled_(std::chrono::steady_clock::now()) {
    for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { run(); });
}

RequestPool::~RequestPool() {
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
}

void RequestPool::submit(std::function<void()> task, bool urgent) {
    {
        std::lock_guard lock(mu_);
        (urgent ? urgent_ : queue_).push_back(std::move(task));
    }
    cv_.notify_one();
}

bool RequestPool::wait_idle(std::chrono::steady_clock::time_point until) {
    std::unique_lock lock(mu_);
    return idle_cv_.wait_until(lock, until, [this] { return urgent_.empty() && queue_.empty() && busy_ == 0; });
}

// Waits (releasing the lock) until the bucket holds a token, and takes it.
void RequestPool::take_token(std::unique_lock<std::mutex>& lock) {
    for (;;) {
        const auto now = std::chrono::steady_clock::now();
        tokens_ = std::min(burst_, tokens_ + std::chrono::duration<double>(now - refilled_).count() * rate_);
        refilled_ = now;
        if (tokens_ >= 1) {
            tokens_ -= 1;
            return;
        }
        const auto wait = std::chrono::duration<double>((1 - tokens_) / rate_);
        cv_.wait_for(lock, std::chrono::duration_cast<std::chrono::microseconds>(wait) + std::chrono::microseconds(1));
    }
}

void RequestPool::run() {
    std::unique_lock lock(mu_);
    for (;;) {
        cv_.wait(lock, [this] { return stopping_ || !urgent_.empty() || !queue_.empty(); });
        if (urgent_.empty() && queue_.empty()) return;  // stopping, and nothing left to send
        auto& from = urgent_.empty() ? queue_ : urgent_;
        std::function<void()> task = std::move(from.front());
        from.pop_front();
        ++busy_;
        take_token(lock);
        lock.unlock();
        task();
        lock.lock();
        --busy_;
        if (urgent_.empty() && queue_.empty() && busy_ == 0) idle_cv_.notify_all();
    }
}

}  // namespace cohort::k8s
