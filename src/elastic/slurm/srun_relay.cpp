// The relay thread polls with a short timeout so that finish() can stop it
// even when something other than srun still holds the pipe's write end.
#include "elastic/slurm/srun_relay.hpp"

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>

#include <poll.h>
#include <unistd.h>

namespace cohort::detail {
namespace {

constexpr std::size_t kKeptLines = 64;
constexpr std::size_t kLongestLine = 16384;  // a longer one is passed through in pieces, and not kept

void write_all(int fd, const char* data, std::size_t size) {
    while (size > 0) {
        const ssize_t n = ::write(fd, data, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;  // stderr closed: the launcher has nowhere to say it
        data += n;
        size -= static_cast<std::size_t>(n);
    }
}

bool is_slurm_line(const std::string& line) {
    // slurmstepd names itself "slurmstepd:" or "slurmstepd-NODE:".
    return line.starts_with("srun: ") || line.starts_with("slurmstepd") || line.find("***") != std::string::npos;
}

}  // namespace

struct SrunRelay::State {
    int fd = -1;
    std::atomic<bool> stop{false};
    std::mutex mutex;
    std::condition_variable ended_cv;
    bool ended = false;
    std::deque<std::string> lines;

    void keep(std::string line) {
        if (!is_slurm_line(line)) return;
        std::lock_guard lock(mutex);
        lines.push_back(std::move(line));
        if (lines.size() > kKeptLines) lines.pop_front();
    }

    void run() {
        std::string pending;
        char buffer[4096];
        while (!stop.load()) {
            pollfd p{fd, POLLIN, 0};
            const int ready = ::poll(&p, 1, 50);
            if (ready < 0 && errno != EINTR) break;
            if (ready <= 0) continue;
            const ssize_t n = ::read(fd, buffer, sizeof buffer);
            if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            if (n <= 0) break;
            write_all(2, buffer, static_cast<std::size_t>(n));
            pending.append(buffer, static_cast<std::size_t>(n));
            std::size_t newline;
            while ((newline = pending.find('\n')) != std::string::npos) {
                keep(pending.substr(0, newline));
                pending.erase(0, newline + 1);
            }
            if (pending.size() > kLongestLine) pending.clear();
        }
        if (!pending.empty()) keep(std::move(pending));
        std::lock_guard lock(mutex);
        ended = true;
        ended_cv.notify_all();
    }
};

SrunRelay::SrunRelay(int fd) : state_(std::make_shared<State>()) {
    state_->fd = fd;
    thread_ = std::thread([state = state_] { state->run(); });
}

SrunRelay::~SrunRelay() {
    finish(std::chrono::milliseconds(0));
}

std::vector<std::string> SrunRelay::finish(std::chrono::milliseconds wait) {
    {
        std::unique_lock lock(state_->mutex);
        state_->ended_cv.wait_for(lock, wait, [&] { return state_->ended; });
    }
    state_->stop = true;
    if (thread_.joinable()) thread_.join();
    if (state_->fd >= 0) {
        ::close(state_->fd);
        state_->fd = -1;
    }
    std::lock_guard lock(state_->mutex);
    return {state_->lines.begin(), state_->lines.end()};
}

}  // namespace cohort::detail
