// Work handles: a future for one queued operation.
#include "comm/work_state.hpp"

#include "comm/engine.hpp"
#include "core/deadline.hpp"

#include <fmt/format.h>

namespace cohort {

void Work::State::finish(std::exception_ptr failure) {
    {
        std::lock_guard lock(mutex);
        error = std::move(failure);
        done = true;
    }
    cv.notify_all();
}

bool Work::test() const {
    if (!state_) return true;
    std::lock_guard lock(state_->mutex);
    return state_->done;
}

void Work::wait() const {
    if (!state_) return;
    std::unique_lock lock(state_->mutex);
    state_->cv.wait(lock, [&] { return state_->done; });
    if (state_->error) std::rethrow_exception(state_->error);
}

void Work::wait_for(std::chrono::milliseconds limit) const {
    if (!state_) return;
    std::unique_lock lock(state_->mutex);
    const auto limit_at = detail::deadline_after(limit);
    if (!state_->cv.wait_until(lock, limit_at, [&] { return state_->done; }))
        throw Error(Errc::timeout, fmt::format("{} not finished after {:g} s (it goes on until its own timeout)",
                                               state_->what, limit.count() / 1000.0));
    if (state_->error) std::rethrow_exception(state_->error);
}

}  // namespace cohort
