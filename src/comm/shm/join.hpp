// Set-up of a host's shared memory, through the store the ranks met in: the
// host's first rank creates the segment and posts where to fetch it (a
// local socket, handoff.hpp), the others fetch and map it, every rank posts
// whether it could, and all of them read every answer, so they take the
// same decision: the whole host uses the segment, or nobody does and the
// peers fall back to direct copies or TCP.
#pragma once

#include "comm/shm/group.hpp"

#include <cohort/store.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace cohort::comm::shm {

struct Joined {
    std::unique_ptr<Group> group;  // null: no shared memory for this rank
    std::string unavailable;       // why not, when it was wanted; "" otherwise
    // With a group: every rank of it copies directly from every other
    // (each said so in its answer), so all of them know it alike.
    bool direct_everywhere = false;
};

// Ranks with this rank's host label form the group. `bytes` is the
// segment's size (0: shared memory off); `direct`: this rank copies
// directly from every other rank of its host. Throws Error(timeout) when a
// rank of the host never answers before `deadline`.
Joined join(Store& store, const std::vector<std::string>& hosts, int rank, std::size_t bytes, bool direct,
            std::chrono::microseconds spin, std::chrono::steady_clock::time_point deadline);

}  // namespace cohort::comm::shm
