#include "status_bar.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

namespace cohort_run {

namespace {

// "1.2k" above a thousand: the row is narrow.
std::string compact(double value) {
    if (value >= 1e6) return fmt::format("{:.1f}M", value / 1e6);
    if (value >= 1e5) return fmt::format("{:.0f}k", value / 1e3);
    if (value >= 1e3) return fmt::format("{:.1f}k", value / 1e3);
    return fmt::format("{:.1f}", value);
}

std::string clock(double seconds) {
    const auto s = static_cast<long>(std::max(0.0, seconds));
    return s >= 3600 ? fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
                     : fmt::format("{:02}:{:02}", s / 60, s % 60);
}

}  // namespace

std::string status_text(const StatusView& v, int width) {
    std::string head = fmt::format("{} {} gen {} world {}", clock(v.elapsed), v.phase.empty() ? "starting" : v.phase,
                                   v.generation, v.world_size);
    std::string tail =
        fmt::format(" {} steps/s {} samples/s", v.steps_per_sec ? compact(*v.steps_per_sec) : std::string("-"),
                    compact(v.samples_per_sec));
    if (v.failures > 0) tail += fmt::format(" failures {}", v.failures);
    std::string bar;
    if (v.epochs > 0) {
        const double done =
            v.shards_total == 0
                ? 0.0
                : std::min(1.0, static_cast<double>(v.shards_done) / static_cast<double>(v.shards_total));
        const std::string label = fmt::format(" epoch {}/{}", v.epoch, v.epochs);
        const std::string count = fmt::format(" {:.0f}% {}/{}", std::floor(done * 100), v.shards_done, v.shards_total);
        // What is left for the bar inside " [" and "]"; below 10 cells it is not worth drawing.
        const int room = width - static_cast<int>(head.size() + label.size() + count.size() + tail.size()) - 3;
        std::string cells;
        if (room >= 10) {
            const int cells_n = std::min(room, 40);
            const int filled = static_cast<int>(std::floor(done * cells_n));
            cells = " [" + std::string(filled, '#') + std::string(cells_n - filled, '-') + "]";
        }
        bar = label + cells + count;
    }
    std::string line = head + bar + tail;
    if (width > 0 && static_cast<int>(line.size()) > width) line.resize(static_cast<std::size_t>(width));
    return line;
}

std::optional<double> StepRate::update(double now, uint64_t step) {
    if (!started_ || step < step_) {
        started_ = true;
        since_ = now;
        from_ = step_ = step;
        rate_.reset();
        return rate_;
    }
    step_ = step;
    if (now - since_ >= window_ / 2) {
        rate_ = static_cast<double>(step_ - from_) / (now - since_);
        if (now - since_ >= window_) {
            since_ = now;
            from_ = step_;
        }
    }
    return rate_;
}

StatusBar::StatusBar(int fd, bool wanted) : fd_(fd) {
    if (!wanted || ::isatty(fd) != 1) return;
    const char* term = std::getenv("TERM");
    if (term != nullptr && std::string_view(term) == "dumb") return;
    int rows = 0, cols = 0;
    if (!size(rows, cols) || rows < 3) return;
    on_ = true;
    reserve(rows);
}

StatusBar::~StatusBar() {
    close();
}

bool StatusBar::size(int& rows, int& cols) const {
    winsize ws{};
    if (::ioctl(fd_, TIOCGWINSZ, &ws) != 0) return false;
    rows = ws.ws_row;
    cols = ws.ws_col;
    return rows > 0 && cols > 0;
}

// Rows 1..rows-1 scroll; the last is the status row. The newline first
// makes room when the cursor is on the last row; setting the region moves
// the cursor home, so it is saved and restored around it.
void StatusBar::reserve(int rows) {
    write(rows_ == 0 ? fmt::format("\n\0337\033[1;{}r\0338\033[1A", rows - 1)
                     : fmt::format("\0337\033[1;{}r\0338", rows - 1));
    rows_ = rows;
}

void StatusBar::draw(const StatusView& view) {
    if (!on_) return;
    int rows = 0, cols = 0;
    if (!size(rows, cols)) return;
    if (rows != rows_) reserve(rows);
    write(fmt::format("\0337\033[{};1H\033[2K\033[7m{}\033[0m\0338", rows_, status_text(view, cols - 1)));
}

void StatusBar::close() {
    if (!on_) return;
    on_ = false;
    write(fmt::format("\0337\033[r\033[{};1H\033[2K\0338", rows_));
}

void StatusBar::write(const std::string& bytes) const {
    // stdio first: an event line still in its buffer belongs above the row.
    std::fflush(stdout);
    std::string_view left = bytes;
    for (int tries = 0; !left.empty() && tries < 100; ++tries) {
        const ssize_t n = ::write(fd_, left.data(), left.size());
        if (n > 0) {
            left.remove_prefix(static_cast<std::size_t>(n));
        } else if (n < 0 && errno != EINTR && errno != EAGAIN) {
            return;  // the terminal went away: nothing to draw on
        }
    }
}

}  // namespace cohort_run
