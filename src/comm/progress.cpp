// Ordering blocking and asynchronous operations: before the first
// asynchronous call, operations run on the caller's thread (no hand-off,
// lowest latency); after it, everything goes through one progress thread
// in issue order.
#include "comm/communicator_impl.hpp"

#include <fmt/format.h>

namespace cohort {

void Communicator::Impl::execute(const char* what, std::function<void()> op) {
    bool queued;
    {
        std::lock_guard lock(queue_mutex);
        queued = progress_started || stopping;
    }
    if (queued) {
        submit(what, std::move(op)).wait();
        return;
    }
    std::lock_guard run(run_mutex);
    op();
}

Work Communicator::Impl::submit(const char* what, std::function<void()> op) {
    auto state = std::make_shared<Work::State>(what);
    std::lock_guard lock(queue_mutex);
    if (stopping) {
        state->finish(std::make_exception_ptr(
            Error(Errc::closed, fmt::format("{} on rank {}: the communicator is closed", what, options.rank))));
        return Work(state);
    }
    queue.push_back({std::move(op), state});
    if (!progress_started) {
        progress_started = true;
        progress = std::thread([this] {
            for (;;) {
                Task task;
                {
                    std::unique_lock wait(queue_mutex);
                    queue_cv.wait(wait, [&] { return stopping || !queue.empty(); });
                    if (queue.empty()) return;
                    task = std::move(queue.front());
                    queue.pop_front();
                }
                try {
                    std::lock_guard run(run_mutex);
                    task.op();
                    task.state->finish(nullptr);
                } catch (...) {
                    task.state->finish(std::current_exception());
                }
            }
        });
    }
    queue_cv.notify_one();
    return Work(state);
}

void Communicator::Impl::close() {
    {
        std::lock_guard lock(queue_mutex);
        if (closed) return;
        closed = true;
        stopping = true;
    }
    queue_cv.notify_all();
    // Queued operations still run (they were issued before close) unless the
    // engine breaks; then each fails at once.
    if (progress.joinable()) progress.join();
    std::lock_guard run(run_mutex);
    if (engine) engine->close(std::chrono::seconds(1));
}

Communicator::Impl::~Impl() {
    try {
        {
            std::lock_guard lock(abort_signal->mutex);
            abort_signal->engine = nullptr;
        }
        close();
    } catch (...) {  // a destructor must not throw; close() only fails on a broken mutex
    }
}

}  // namespace cohort
