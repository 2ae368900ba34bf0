// One POSIX shared-memory segment that the ranks of a host map. The first
// rank creates it under a fresh random name and reserves every page up
// front (posix_fallocate), so a /dev/shm too small for it is an error at
// set-up, never a SIGBUS in the middle of a collective. The name is unlinked
// as soon as every rank mapped it: from then on the kernel frees the memory
// when the last rank exits, however it exits.
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

    // Error(unavailable) saying what failed and how much /dev/shm has free.
    static Segment create(const std::string& name, std::size_t bytes);
    // Error(unavailable) when it is missing (another /dev/shm: a container
    // with its own IPC namespace) or has another size.
    static Segment open(const std::string& name, std::size_t bytes);

    // Removes the name (the mapping stays); a no-op once done. Any rank may
    // call it once every rank mapped the segment; a destroyed segment
    // removes the name itself only if this process created it.
    void unlink() noexcept;

    std::byte* data() const { return data_; }
    std::size_t size() const { return size_; }
    const std::string& name() const { return name_; }

private:
    std::string name_;
    std::byte* data_ = nullptr;
    std::size_t size_ = 0;
    bool linked_ = false;    // created here: the destructor removes the name
    bool unlinked_ = false;  // unlink() ran
};

// "cohort-<16 random hex digits>": unguessable, so another job on the host
// cannot create it first.
std::string fresh_segment_name();

// Free bytes in the file system behind shm_open (/dev/shm), or 0.
std::size_t shm_free_bytes();

}  // namespace cohort::comm::shm
