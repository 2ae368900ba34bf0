// Creating and mapping the shared-memory segment.
#include "comm/shm/segment.hpp"

#include "core/text.hpp"

#include <cohort/error.hpp>

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace cohort::comm::shm {
using detail::format_size;

namespace {

std::byte* map_shared(int fd, std::size_t bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    return p == MAP_FAILED ? nullptr : static_cast<std::byte*>(p);
}

constexpr const char* kAdvice =
    "give the container more (docker run --shm-size), or lower COHORT_SHM_SIZE (0 turns shared memory off)";

}  // namespace

std::string shm_budget_problem(std::size_t bytes) {
    struct statvfs fs {};
    if (statvfs("/dev/shm", &fs) != 0) return "";  // no /dev/shm: no budget to respect
    if ((fs.f_flag & ST_RDONLY) != 0) return fmt::format("/dev/shm is read-only; {}", kAdvice);
    const uint64_t free = uint64_t(fs.f_bavail) * fs.f_frsize;
    if (free < bytes)
        return fmt::format("/dev/shm has {} free, less than the segment's {}; {}", format_size(free),
                           format_size(bytes), kAdvice);
    return "";
}

Segment& Segment::operator=(Segment&& other) noexcept {
    if (this != &other) {
        this->~Segment();
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
}

Segment::~Segment() {
    close_fd();
    if (data_ != nullptr) munmap(data_, size_);
    data_ = nullptr;
}

void Segment::close_fd() noexcept {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
}

Segment Segment::create(std::size_t bytes) {
    if (const std::string problem = shm_budget_problem(bytes); !problem.empty())
        throw Error(Errc::unavailable, "shared-memory segment: " + problem);
    Segment s;
    s.fd_ = memfd_create("cohort-shm", MFD_CLOEXEC);
    if (s.fd_ < 0)
        throw Error(Errc::unavailable,
                    fmt::format("shared-memory segment: memfd_create failed: {}", std::strerror(errno)));
    std::string failed;
    if (ftruncate(s.fd_, static_cast<off_t>(bytes)) != 0) {
        failed = fmt::format("sizing it to {} failed: {}", format_size(bytes), std::strerror(errno));
    } else if (const int err = posix_fallocate(s.fd_, 0, static_cast<off_t>(bytes)); err != 0) {
        // Without the reservation, memory running out would surface as a
        // SIGBUS at the first touch of a missing page.
        failed = fmt::format("reserving {} failed: {}", format_size(bytes), std::strerror(err));
    } else if ((s.data_ = map_shared(s.fd_, bytes)) == nullptr) {
        failed = fmt::format("mapping {} failed: {}", format_size(bytes), std::strerror(errno));
    }
    if (!failed.empty()) throw Error(Errc::unavailable, "shared-memory segment: " + failed);
    s.size_ = bytes;
    return s;
}

Segment Segment::map(int fd, std::size_t bytes) {
    Segment s;
    s.fd_ = fd;  // closed with `s` on every path below
    struct stat st {};
    std::string failed;
    if (fstat(fd, &st) != 0) {
        failed = std::strerror(errno);
    } else if (static_cast<std::size_t>(st.st_size) != bytes) {
        failed = fmt::format("it has {} bytes, not the {} announced", st.st_size, bytes);
    } else if ((s.data_ = map_shared(fd, bytes)) == nullptr) {
        failed = fmt::format("mapping it failed: {}", std::strerror(errno));
    }
    if (!failed.empty()) throw Error(Errc::unavailable, "the host's shared-memory segment: " + failed);
    s.size_ = bytes;
    s.close_fd();
    return s;
}

}  // namespace cohort::comm::shm
