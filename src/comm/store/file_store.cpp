// The file:// store: one file per key in a folder every rank can reach.
// Writes are atomic (temp file + rename), so readers need no lock; changes
// hold an flock on DIR/.lock so add and compare_and_set are atomic across
// processes.
#include "comm/store/backends.hpp"
#include "core/hash.hpp"

#include <cohort/error.hpp>
#include <cohort/store.hpp>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

namespace cohort::detail {

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

constexpr auto kFirstPoll = std::chrono::milliseconds(1);
constexpr auto kLastPoll = std::chrono::milliseconds(50);
constexpr auto kLockPoll = std::chrono::milliseconds(4);

// Percent-encodes all but [A-Za-z0-9._-] and a leading '.', so a name is
// never ".", ".." or one of the store's own dot files. Names past NAME_MAX's
// reach keep a prefix and a 64-bit hash of the key; the '~' cannot appear in
// an encoded name, so they never collide with a short one.
std::string file_name(std::string_view key) {
    std::string name;
    for (std::size_t i = 0; i < key.size(); ++i) {
        const auto c = static_cast<unsigned char>(key[i]);
        const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                           c == '-' || (c == '.' && i > 0);
        if (plain) {
            name += static_cast<char>(c);
        } else {
            name += fmt::format("%{:02X}", c);
        }
    }
    if (name.size() > 200) name = fmt::format("{}~{:016x}", name.substr(0, 160), hash_string(key));
    return name;
}

std::string errno_text(int error) {
    return std::strerror(error);
}

class Fd {
public:
    explicit Fd(int fd) : fd_(fd) {}
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    ~Fd() {
        if (fd_ >= 0) ::close(fd_);
    }
    int get() const { return fd_; }
    int release() { return std::exchange(fd_, -1); }

private:
    int fd_;
};

class FileStore final : public Store {
public:
    FileStore(fs::path dir, const StoreOptions& options)
        : dir_(std::move(dir)), address_("file://" + dir_.string()), timeout_(options.timeout) {
        std::error_code ec;
        fs::create_directories(dir_, ec);
        if (ec || !fs::is_directory(dir_)) {
            throw Error(Errc::io, fmt::format("store {}: cannot create the folder {}: {}", address_, dir_.string(),
                                              ec ? ec.message() : "a file is in the way"));
        }
        Fd check(open_lock_file());  // fail here rather than at the first set
    }

    void set(std::string_view key, std::string_view value) override {
        check_key(address_, key);
        check_value(address_, key, value);
        const WriterLock lock(*this);
        write(key, value);
    }

    std::string get(std::string_view key, std::chrono::milliseconds timeout) override {
        check_key(address_, key);
        const auto deadline = deadline_after(timeout);
        for (auto delay = kFirstPoll;; delay = std::min(delay * 2, kLastPoll)) {
            if (auto value = read(key)) return std::move(*value);
            if (!pause(delay, deadline)) break;
        }
        throw Error(Errc::timeout,
                    fmt::format("store {}: key {} not set after {}", address_, quote(key), format_duration(timeout)));
    }

    std::optional<std::string> try_get(std::string_view key) override {
        check_key(address_, key);
        return read(key);
    }

    int64_t add(std::string_view key, int64_t delta) override {
        check_key(address_, key);
        const WriterLock lock(*this);
        const auto text = read(key);
        const auto current = text ? parse_stored_integer(*text) : std::optional<int64_t>(0);
        if (!current) {
            throw Error(Errc::invalid_argument, fmt::format("store {}: add: the value of key {} is not an integer: {}",
                                                            address_, quote(key), quote(text->substr(0, 40))));
        }
        int64_t sum = 0;
        if (__builtin_add_overflow(*current, delta, &sum)) {
            throw Error(Errc::invalid_argument,
                        fmt::format("store {}: add: {} + {} overflows key {}", address_, *current, delta, quote(key)));
        }
        write(key, std::to_string(sum));
        return sum;
    }

    std::string compare_and_set(std::string_view key, const std::optional<std::string>& expected,
                                std::string_view desired) override {
        check_key(address_, key);
        if (expected) check_value(address_, key, *expected);
        check_value(address_, key, desired);
        const WriterLock lock(*this);
        auto current = read(key);
        if (current != expected) return current.value_or(std::string());
        write(key, desired);
        return std::string(desired);
    }

    void wait(std::span<const std::string> keys, std::chrono::milliseconds timeout) override {
        for (const auto& k : keys) check_key(address_, k);
        const auto deadline = deadline_after(timeout);
        std::vector<std::string> missing(keys.begin(), keys.end());
        for (auto delay = kFirstPoll;; delay = std::min(delay * 2, kLastPoll)) {
            std::erase_if(missing, [&](const std::string& k) { return exists(k); });
            if (missing.empty()) return;
            if (!pause(delay, deadline)) break;
        }
        throw Error(Errc::timeout, fmt::format("store {}: {} of {} keys not set after {}: {}", address_, missing.size(),
                                               keys.size(), format_duration(timeout), quote_keys(missing)));
    }

    bool remove(std::string_view key) override {
        check_key(address_, key);
        const WriterLock lock(*this);
        const fs::path path = dir_ / file_name(key);
        if (::unlink(path.c_str()) == 0) return true;
        if (errno == ENOENT) return false;
        throw Error(Errc::io,
                    fmt::format("store {}: cannot remove {}: {}", address_, path.string(), errno_text(errno)));
    }

    std::string address() const override { return address_; }
    std::string host() const override { return ""; }  // a folder: no network address

private:
    // Sleeps `delay`, cut short at the deadline; false once it has passed.
    static bool pause(std::chrono::milliseconds delay, Clock::time_point deadline) {
        const auto now = Clock::now();
        if (now >= deadline) return false;
        std::this_thread::sleep_until(std::min(now + delay, deadline));
        return true;
    }

    // The store's writer lock: an flock on DIR/.lock through a descriptor
    // of its own, so it excludes this process's other threads as well as
    // other processes (flock is per open file description). Polled, and
    // briefly, since it is held only for a read and a write: a stuck holder
    // costs a timeout, not a hang; a holder that dies releases it with its
    // descriptor.
    class WriterLock {
    public:
        explicit WriterLock(const FileStore& store) : fd_(store.open_lock_file()) {
            const auto deadline = deadline_after(store.timeout_);
            for (auto delay = kFirstPoll;; delay = std::min(delay * 2, kLockPoll)) {
                if (::flock(fd_.get(), LOCK_EX | LOCK_NB) == 0) return;
                if (errno != EWOULDBLOCK && errno != EINTR) {
                    throw Error(Errc::io, fmt::format("store {}: cannot lock {}: {}", store.address_,
                                                      store.lock_path().string(), errno_text(errno)));
                }
                if (!pause(delay, deadline)) break;
            }
            throw Error(Errc::timeout, fmt::format("store {}: {} stayed locked for {}", store.address_,
                                                   store.lock_path().string(), format_duration(store.timeout_)));
        }

    private:
        Fd fd_;  // closing it releases the lock
    };

    fs::path lock_path() const { return dir_ / ".lock"; }

    int open_lock_file() const {
        const int fd = ::open(lock_path().c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
        if (fd < 0) {
            throw Error(Errc::io, fmt::format("store {}: cannot open the lock file {}: {}", address_,
                                              lock_path().string(), errno_text(errno)));
        }
        return fd;
    }

    bool exists(const std::string& key) const {
        struct stat st {};
        return ::stat((dir_ / file_name(key)).c_str(), &st) == 0;
    }

    std::optional<std::string> read(std::string_view key) const {
        const fs::path path = dir_ / file_name(key);
        Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
        if (fd.get() < 0) {
            if (errno == ENOENT) return std::nullopt;
            throw Error(Errc::io,
                        fmt::format("store {}: cannot read {}: {}", address_, path.string(), errno_text(errno)));
        }
        std::string value;
        char buffer[65536];
        for (;;) {
            const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
            if (n == 0) break;
            if (n < 0) {
                if (errno == EINTR) continue;
                throw Error(Errc::io,
                            fmt::format("store {}: cannot read {}: {}", address_, path.string(), errno_text(errno)));
            }
            value.append(buffer, static_cast<std::size_t>(n));
        }
        return value;
    }

    // Readers see the old value or the new one, never a part of it.
    void write(std::string_view key, std::string_view value) {
        static std::atomic<uint64_t> sequence{0};
        const fs::path path = dir_ / file_name(key);
        const fs::path temp = dir_ / fmt::format(".tmp.{}.{}", ::getpid(), sequence.fetch_add(1));
        Fd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666));
        if (fd.get() < 0) {
            throw Error(Errc::io,
                        fmt::format("store {}: cannot create {}: {}", address_, temp.string(), errno_text(errno)));
        }
        std::size_t done = 0;
        while (done < value.size()) {
            const ssize_t n = ::write(fd.get(), value.data() + done, value.size() - done);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) return fail_write(temp, path, errno);
            done += static_cast<std::size_t>(n);
        }
        if (::close(fd.release()) != 0) return fail_write(temp, path, errno);
        if (::rename(temp.c_str(), path.c_str()) != 0) return fail_write(temp, path, errno);
    }

    [[noreturn]] void fail_write(const fs::path& temp, const fs::path& path, int error) const {
        ::unlink(temp.c_str());
        throw Error(Errc::io, fmt::format("store {}: cannot write {}: {}", address_, path.string(), errno_text(error)));
    }

    fs::path dir_;
    std::string address_;
    std::chrono::milliseconds timeout_;
};

}  // namespace

std::shared_ptr<Store> open_file_store(std::filesystem::path dir, const StoreOptions& options) {
    return std::make_shared<FileStore>(std::move(dir), options);
}

}  // namespace cohort::detail
