// Creating, opening and unlinking the shared-memory segment.
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
#include <random>
#include <utility>

namespace cohort::comm::shm {
using detail::format_size;

namespace {

std::byte* map(int fd, std::size_t bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    return p == MAP_FAILED ? nullptr : static_cast<std::byte*>(p);
}

std::string shm_hint() {
    return fmt::format(
        "/dev/shm has {} free; give the container more (docker run --shm-size) or lower "
        "COHORT_SHM_SIZE (0 turns shared memory off)",
        format_size(shm_free_bytes()));
}

}  // namespace

Segment& Segment::operator=(Segment&& other) noexcept {
    if (this != &other) {
        this->~Segment();
        name_ = std::move(other.name_);
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        linked_ = std::exchange(other.linked_, false);
        unlinked_ = std::exchange(other.unlinked_, false);
    }
    return *this;
}

Segment::~Segment() {
    if (linked_) unlink();
    if (data_ != nullptr) munmap(data_, size_);
    data_ = nullptr;
}

void Segment::unlink() noexcept {
    if (name_.empty() || unlinked_) return;
    unlinked_ = true;
    linked_ = false;
    shm_unlink(name_.c_str());  // ENOENT: another rank was first
}

Segment Segment::create(const std::string& name, std::size_t bytes) {
    const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0)
        throw Error(Errc::unavailable,
                    fmt::format("cannot create the shared-memory segment /dev/shm{}: {}", name, std::strerror(errno)));
    Segment s;
    s.name_ = name;
    s.linked_ = true;
    s.size_ = bytes;
    std::string failed;
    if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
        failed = fmt::format("sizing it to {} failed: {}", format_size(bytes), std::strerror(errno));
    } else if (const int err = posix_fallocate(fd, 0, static_cast<off_t>(bytes)); err != 0) {
        // Without the reservation a full tmpfs answers the first touch of a
        // missing page with SIGBUS.
        failed = fmt::format("reserving {} failed: {}", format_size(bytes), std::strerror(err));
    } else if ((s.data_ = map(fd, bytes)) == nullptr) {
        failed = fmt::format("mapping {} failed: {}", format_size(bytes), std::strerror(errno));
    }
    close(fd);
    if (!failed.empty()) {
        s.size_ = 0;  // nothing mapped; the destructor unlinks the name
        throw Error(Errc::unavailable,
                    fmt::format("shared-memory segment /dev/shm{}: {}; {}", name, failed, shm_hint()));
    }
    return s;
}

Segment Segment::open(const std::string& name, std::size_t bytes) {
    const int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0)
        throw Error(Errc::unavailable,
                    fmt::format("cannot open the shared-memory segment /dev/shm{} the host's first rank created: {} "
                                "(do the ranks see different /dev/shm, as containers with their own IPC namespace "
                                "do?)",
                                name, std::strerror(errno)));
    struct stat st {};
    Segment s;
    s.name_ = name;  // not linked_: only its creator removes it on failure
    std::string failed;
    if (fstat(fd, &st) != 0) {
        failed = std::strerror(errno);
    } else if (static_cast<std::size_t>(st.st_size) != bytes) {
        failed = fmt::format("it has {} bytes, not the {} announced", st.st_size, bytes);
    } else if ((s.data_ = map(fd, bytes)) == nullptr) {
        failed = fmt::format("mapping it failed: {}", std::strerror(errno));
    }
    close(fd);
    if (!failed.empty())
        throw Error(Errc::unavailable, fmt::format("shared-memory segment /dev/shm{}: {}", name, failed));
    s.size_ = bytes;
    return s;
}

std::string fresh_segment_name() {
    std::random_device device;
    const uint64_t value = (uint64_t(device()) << 32) ^ device();
    return fmt::format("/cohort-{:016x}", value);
}

std::size_t shm_free_bytes() {
    struct statvfs fs {};
    if (statvfs("/dev/shm", &fs) != 0) return 0;
    return std::size_t(fs.f_bavail) * fs.f_frsize;
}

}  // namespace cohort::comm::shm
