// What a Work handle shares with the progress thread.
#pragma once

#include <cohort/error.hpp>
#include <cohort/work.hpp>

#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>

namespace cohort {

struct Work::State {
    explicit State(std::string what_) : what(std::move(what_)) {}
    void finish(std::exception_ptr failure);

    std::string what;  // "allreduce", for messages
    std::mutex mutex;
    std::condition_variable cv;
    bool done = false;
    std::exception_ptr error;
};

}  // namespace cohort
