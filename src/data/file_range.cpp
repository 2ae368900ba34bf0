// pread loops with EINTR handling and short-file detection.
#include "data/file_range.hpp"

#include <cohort/error.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

namespace cohort::data {

namespace {

class Fd {
public:
    explicit Fd(int fd) : fd_(fd) {}
    ~Fd() {
        if (fd_ >= 0) ::close(fd_);
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
    Fd& operator=(Fd&&) = delete;
    int get() const { return fd_; }

private:
    int fd_;
};

[[noreturn]] void fail(const std::filesystem::path& path, uint64_t offset, std::string_view what) {
    throw Error(Errc::io, fmt::format("{} at offset {}: {}", path.string(), offset, what));
}

Fd open_source(const std::filesystem::path& path, uint64_t offset) {
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) fail(path, offset, fmt::format("cannot open: {}", std::strerror(errno)));
    return fd;
}

// Reads up to out.size() bytes at `offset`; fewer only at the end of the file.
std::size_t pread_all(int fd, const std::filesystem::path& path, uint64_t offset, std::span<std::byte> out) {
    std::size_t done = 0;
    while (done < out.size()) {
        const ssize_t n = ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail(path, offset + done, fmt::format("read failed: {}", std::strerror(errno)));
        if (n == 0) break;
        done += static_cast<std::size_t>(n);
    }
    return done;
}

[[noreturn]] void short_file(const std::filesystem::path& path, uint64_t offset, uint64_t length, uint64_t got) {
    fail(path, offset,
         fmt::format("the file ends after {} of the {} bytes asked for (it is {} bytes long); check the range", got,
                     length, offset + got));
}

}  // namespace

void read_range(const std::filesystem::path& path, uint64_t offset, std::span<std::byte> out) {
    Fd fd = open_source(path, offset);
    const std::size_t got = pread_all(fd.get(), path, offset, out);
    if (got < out.size()) short_file(path, offset, out.size(), got);
}

void stage_range(const std::filesystem::path& path, uint64_t offset, uint64_t length,
                 const std::filesystem::path& target) {
    Fd in = open_source(path, offset);
    std::filesystem::path part = target;
    part += ".part";
    Fd out(::open(part.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (out.get() < 0)
        throw Error(Errc::io, fmt::format("{}: cannot create the staging file: {}; check staging_dir", part.string(),
                                          std::strerror(errno)));
    std::vector<std::byte> chunk(std::min<uint64_t>(length, uint64_t{1} << 20));
    uint64_t done = 0;
    try {
        while (done < length) {
            const auto want = static_cast<std::size_t>(std::min<uint64_t>(chunk.size(), length - done));
            const std::size_t got = pread_all(in.get(), path, offset + done, std::span(chunk).first(want));
            if (got < want) short_file(path, offset, length, done + got);
            for (std::size_t written = 0; written < got;) {
                const ssize_t n = ::write(out.get(), chunk.data() + written, got - written);
                if (n < 0 && errno == EINTR) continue;
                if (n < 0)
                    throw Error(Errc::io, fmt::format("{}: writing the staging file failed: {}", part.string(),
                                                      std::strerror(errno)));
                written += static_cast<std::size_t>(n);
            }
            done += got;
        }
    } catch (...) {
        ::unlink(part.c_str());
        throw;
    }
    if (std::rename(part.c_str(), target.c_str()) != 0) {
        const int error = errno;
        ::unlink(part.c_str());
        throw Error(Errc::io, fmt::format("{}: cannot rename the staging file to {}: {}", part.string(),
                                          target.string(), std::strerror(error)));
    }
}

}  // namespace cohort::data
