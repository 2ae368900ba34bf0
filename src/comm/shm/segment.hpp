// One shared-memory segment that the ranks of a host map: an anonymous
// memfd, which has no name anywhere, so nothing can be left behind
// however the ranks end; the kernel frees it when the last mapping and
// descriptor go. The host's first rank creates it and hands the
// descriptor to the others (handoff.hpp). Every page is reserved up front
// (posix_fallocate), so running out of memory is an error at set-up, never
// a SIGBUS in the middle of a collective.
#pragma once

#include <cstddef>
#include <string>

namespace cohort::comm::shm {

class Segment {
public:
    Segment() = default;
    Segment(Segment&& other) noexcept { *this = std::move(other); }
    Segment& operator=(Segment&& other) noexcept;
    Segment(const Segment&) = delete;
    Segment& operator=(const Segment&) = delete;
    ~Segment();

    // A new segment of `bytes`, with its descriptor kept open to hand out.
    // Error(unavailable) saying what failed. /dev/shm's room is the host's
    // budget for shared memory (what `docker run --shm-size` sets), so a
    // /dev/shm without room for `bytes`, or read-only, refuses it too.
    static Segment create(std::size_t bytes);
    // Maps the segment behind `fd` (taking it: it is closed here), which
    // must have `bytes`. Error(unavailable) otherwise.
    static Segment map(int fd, std::size_t bytes);

    // The descriptor to hand out (creator only; -1 once closed).
    int fd() const { return fd_; }
    // Closes the descriptor; the mapping stays.
    void close_fd() noexcept;

    std::byte* data() const { return data_; }
    std::size_t size() const { return size_; }

private:
    std::byte* data_ = nullptr;
    std::size_t size_ = 0;
    int fd_ = -1;
};

// Why /dev/shm has no room for a segment of `bytes`, or "".
std::string shm_budget_problem(std::size_t bytes);

}  // namespace cohort::comm::shm
