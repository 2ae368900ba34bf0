// File names and POSIX file operations of the coordinator's data directory.
#include "coordinator/journal/data_dir.hpp"

#include <cohort/error.hpp>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>
#include <system_error>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

namespace cohort::coord::journal {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail(std::string_view what, const fs::path& path, int err) {
    throw Error(Errc::io, fmt::format("{} {}: {} (check the data directory's permissions and free space)", what,
                                      path.string(), std::strerror(err)));
}

int open_or_fail(const fs::path& path, int flags, std::string_view what) {
    return open_private(path, flags, what);
}

void sync_fd(int fd, const fs::path& path) {
#if defined(__linux__)
    const int rc = ::fdatasync(fd);
#else
    const int rc = ::fsync(fd);
#endif
    if (rc != 0) fail("cannot fsync", path, errno);
}

void write_all(int fd, std::string_view bytes, const fs::path& path) {
    while (!bytes.empty()) {
        const ssize_t n = ::write(fd, bytes.data(), bytes.size());
        if (n < 0) {
            if (errno == EINTR) continue;
            fail("cannot write", path, errno);
        }
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
}

// "snapshot-00000000000000000012.json" with prefix "snapshot-", suffix ".json": 12.
std::optional<uint64_t> sequence_in(std::string_view name, std::string_view prefix, std::string_view suffix) {
    if (!name.starts_with(prefix) || !name.ends_with(suffix)) return std::nullopt;
    const std::string_view digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return std::nullopt;
    }
    uint64_t seq = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), seq);
    if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
    return seq;
}

}  // namespace

fs::path manifest_path(const fs::path& dir) {
    return dir / "manifest.json";
}

void create_data_directory(const fs::path& dir) {
    std::error_code ec;
    if (fs::is_directory(dir, ec)) return;
    if (dir.has_parent_path() && dir.parent_path() != dir) {
        fs::create_directories(dir.parent_path(), ec);
        if (ec) fail("cannot create the data directory's parent", dir.parent_path(), ec.value());
    }
    if (::mkdir(dir.c_str(), 0700) != 0) {
        if (errno == EEXIST && fs::is_directory(dir, ec)) return;  // another process made it first
        fail("cannot create the data directory", dir, errno);
    }
    // mkdir(2) applies the umask, which may have taken bits the owner needs.
    if (::chmod(dir.c_str(), 0700) != 0) fail("cannot set the mode of the data directory", dir, errno);
}

int open_private(const fs::path& path, int flags, std::string_view what) {
    for (;;) {
        const int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0600);
        if (fd < 0) {
            if (errno == EINTR) continue;
            fail(what, path, errno);
        }
        // A file opened to be written is the coordinator's own: 0600 whatever
        // the umask, and a file an older version made 0644 is tightened too.
        if ((flags & O_CREAT) != 0 && ::fchmod(fd, 0600) != 0) {
            const int err = errno;
            ::close(fd);
            fail("cannot set the mode (0600) of", path, err);
        }
        return fd;
    }
}

fs::path snapshot_path(const fs::path& dir, uint64_t seq) {
    return dir / fmt::format("snapshot-{:020}.json", seq);
}

fs::path journal_path(const fs::path& dir, uint64_t seq) {
    return dir / fmt::format("journal-{:020}.jsonl", seq);
}

fs::path part_path(const fs::path& dir, uint64_t seq, std::size_t index) {
    return dir / fmt::format("part-{:020}-{:06}.json", seq, index);
}

std::optional<uint64_t> part_sequence(std::string_view name) {
    // part-<20 digits>-<at least 6 digits>.json
    constexpr std::size_t kSeqEnd = 5 + 20;
    if (name.size() < kSeqEnd + 1 + 6 + 5 || name[kSeqEnd] != '-') return std::nullopt;
    const auto seq = sequence_in(name.substr(0, kSeqEnd), "part-", "");
    const auto index = sequence_in(name.substr(kSeqEnd), "-", ".json");
    if (!seq || !index) return std::nullopt;
    return seq;
}

DirectoryListing list_data_directory(const fs::path& dir) {
    create_data_directory(dir);
    std::error_code ec;
    DirectoryListing out;
    fs::directory_iterator it(dir, ec);
    if (ec) fail("cannot list the data directory", dir, ec.value());
    for (const fs::directory_entry& entry : it) {
        const std::string name = entry.path().filename().string();
        if (const auto seq = sequence_in(name, "snapshot-", ".json")) {
            out.snapshots.push_back(*seq);
        } else if (const auto seq_j = sequence_in(name, "journal-", ".jsonl")) {
            out.journals.push_back(*seq_j);
        } else if (part_sequence(name)) {
            out.parts.push_back(name);
        } else if (name == "manifest.json") {
            out.manifest = true;
        } else if ((name.starts_with("snapshot-") || name == "manifest.json.tmp") && name.ends_with(".tmp")) {
            out.temporaries.push_back(entry.path());
        }
    }
    std::sort(out.snapshots.begin(), out.snapshots.end());
    std::sort(out.journals.begin(), out.journals.end());
    std::sort(out.parts.begin(), out.parts.end());
    return out;
}

AppendFile::AppendFile(fs::path path) : path_(std::move(path)) {
    fd_ = open_or_fail(path_, O_WRONLY | O_CREAT | O_APPEND, "cannot open the journal");
}

AppendFile::AppendFile(AppendFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)) {}

AppendFile& AppendFile::operator=(AppendFile&& other) noexcept {
    if (this != &other) {
        close();
        path_ = std::move(other.path_);
        fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
}

AppendFile::~AppendFile() {
    close();
}

void AppendFile::write(std::string_view bytes) {
    write_all(fd_, bytes, path_);
}

void AppendFile::sync() {
    sync_fd(fd_, path_);
}

void AppendFile::close() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
}

std::string read_file(const fs::path& path) {
    const int fd = open_or_fail(path, O_RDONLY, "cannot open");
    std::string out;
    char buffer[1 << 16];
    for (;;) {
        const ssize_t n = ::read(fd, buffer, sizeof buffer);
        if (n < 0) {
            if (errno == EINTR) continue;
            const int err = errno;
            ::close(fd);
            fail("cannot read", path, err);
        }
        if (n == 0) break;
        out.append(buffer, static_cast<std::size_t>(n));
    }
    ::close(fd);
    return out;
}

void write_file_synced(const fs::path& path, std::string_view bytes) {
    const int fd = open_or_fail(path, O_WRONLY | O_CREAT | O_TRUNC, "cannot create");
    try {
        write_all(fd, bytes, path);
        if (::fsync(fd) != 0) fail("cannot fsync", path, errno);
    } catch (...) {
        ::close(fd);
        ::unlink(path.c_str());
        throw;
    }
    ::close(fd);
}

void replace_file_durably(const fs::path& path, std::string_view bytes) {
    fs::path tmp = path;
    tmp += ".tmp";
    write_file_synced(tmp, bytes);
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        fail(fmt::format("cannot rename {} to", tmp.string()), path, err);
    }
    sync_directory(path.parent_path());
}

void truncate_file(const fs::path& path, uint64_t size) {
    const int fd = open_or_fail(path, O_WRONLY, "cannot open");
    if (::ftruncate(fd, static_cast<off_t>(size)) != 0 || ::fsync(fd) != 0) {
        const int err = errno;
        ::close(fd);
        fail("cannot truncate", path, err);
    }
    ::close(fd);
}

void sync_directory(const fs::path& dir) {
    const int fd = open_or_fail(dir.empty() ? fs::path(".") : dir, O_RDONLY | O_DIRECTORY, "cannot open directory");
    const int rc = ::fsync(fd);
    const int err = errno;
    ::close(fd);
    if (rc != 0) fail("cannot fsync directory", dir, err);
}

void remove_file(const fs::path& path) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) fail("cannot remove", path, errno);
}

}  // namespace cohort::coord::journal
