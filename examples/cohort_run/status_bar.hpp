// cohort-run's live status on a terminal: the bottom row shows the job's
// phase, generation, world size, a progress bar through the epoch, steps/s,
// samples/s and failures, while event lines and the workers' own output
// scroll above it (a scroll region that leaves the row alone). Off unless
// stdout is a terminal; then cohort-run prints plain lines as before.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace cohort_run {

struct StatusView {
    std::string phase;  // "forming", "rendezvous", "running"
    uint64_t generation = 0;
    uint32_t world_size = 0;
    uint32_t epoch = 0, epochs = 0;  // the epoch in progress, from 1; 0: no dataset
    uint64_t shards_done = 0, shards_total = 0;
    std::optional<double> steps_per_sec;  // empty until two readings apart
    double samples_per_sec = 0;
    int failures = 0;
    double elapsed = 0;  // seconds since cohort-run started
};

// The row, at most `width` columns, ASCII only; the progress bar takes the
// room the rest leaves.
std::string status_text(const StatusView& view, int width);

// Steps per second of the job's furthest member, over about the last
// `window` seconds; a step that goes back (a restart from a checkpoint)
// starts the count again.
class StepRate {
public:
    explicit StepRate(double window = 2.0) : window_(window) {}
    std::optional<double> update(double now, uint64_t step);

private:
    double window_;
    double since_ = 0;
    uint64_t from_ = 0, step_ = 0;
    bool started_ = false;
    std::optional<double> rate_;
};

class StatusBar {
public:
    // Draws on `fd` when `wanted`, fd is a terminal with at least 3 rows,
    // and TERM is not "dumb".
    StatusBar(int fd, bool wanted);
    ~StatusBar();
    StatusBar(const StatusBar&) = delete;
    StatusBar& operator=(const StatusBar&) = delete;

    bool on() const { return on_; }
    // Redraws the bottom row (and the scroll region, if the terminal was resized).
    void draw(const StatusView& view);
    // Gives the bottom row back to the terminal: the scroll region reset,
    // the row cleared. Drawing after it does nothing.
    void close();

private:
    bool size(int& rows, int& cols) const;
    void reserve(int rows);
    void write(const std::string& bytes) const;

    int fd_;
    bool on_ = false;
    int rows_ = 0;  // the terminal's rows when the region was last set
};

}  // namespace cohort_run
