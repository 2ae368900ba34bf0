// The handle an asynchronous collective returns. Operations run in the
// order they were issued, on the communicator's progress thread.
#pragma once

#include <cohort/export.hpp>

#include <chrono>
#include <memory>

namespace cohort {

class COHORT_API Work {
public:
    Work() = default;  // an empty handle: done, nothing to wait for

    // True once the operation finished (successfully or not). Never blocks.
    bool test() const;
    // Blocks until the operation finishes; rethrows its Error. The
    // operation's own timeout bounds the wait.
    void wait() const;
    // As wait(), but gives up after `limit` with Error(timeout) while the
    // operation goes on (it still ends by its own timeout).
    void wait_for(std::chrono::milliseconds limit) const;

    struct State;
    explicit Work(std::shared_ptr<State> state) : state_(std::move(state)) {}

private:
    std::shared_ptr<State> state_;
};

}  // namespace cohort
