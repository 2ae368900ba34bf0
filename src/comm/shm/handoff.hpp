// Hands the segment's descriptor from the host's first rank to the others:
// a Unix socket in the abstract namespace (no file anywhere, gone with the
// process), named with 64 random bits that only the store carries, passes
// it with SCM_RIGHTS; SO_PEERCRED turns away processes of other users.
// Ranks in different network namespaces cannot reach each other's abstract
// sockets, so they do not share memory (they fall back).
#pragma once

#include <chrono>
#include <functional>
#include <string>

namespace cohort::comm::shm {

using Deadline = std::chrono::steady_clock::time_point;

class Handoff {
public:
    // Listens on a fresh name; Error(unavailable) if it cannot.
    Handoff();
    Handoff(const Handoff&) = delete;
    Handoff& operator=(const Handoff&) = delete;
    ~Handoff();

    const std::string& name() const { return name_; }
    // Gives `fd` to every rank that connects, until `done()` says every
    // rank has what it needs (checked every few milliseconds) or the
    // deadline passes.
    void serve(int fd, const std::function<bool()>& done, Deadline deadline);

private:
    int listener_ = -1;
    std::string name_;
};

// Connects to the first rank's `name` and receives the descriptor;
// Error(unavailable) saying why not, Error(timeout) at the deadline.
int fetch_descriptor(const std::string& name, int from_rank, Deadline deadline);

}  // namespace cohort::comm::shm
