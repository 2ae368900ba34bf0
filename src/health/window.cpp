// NodeWindow: one member's bounded history, fed by its heartbeats.
#include "health/window.hpp"

#include "health/gpu_evidence.hpp"

#include <algorithm>

#include <boost/json/parse.hpp>

namespace cohort::health {

NodeWindow::NodeWindow(const Settings& settings) : capacity_(settings.window), seconds_(settings.window_seconds) {}

void NodeWindow::set_limits(const Settings& settings) {
    capacity_ = settings.window;
    seconds_ = settings.window_seconds;
}

void NodeWindow::reset() {
    *this = NodeWindow(Settings{.window = capacity_, .window_seconds = seconds_});
}

void NodeWindow::add(const HeartbeatMetrics& report, double received_at) {
    last_heartbeat_ = received_at;
    for (const StepSample& s : reported_steps(report, received_at)) add_step(s);
    while (samples_.size() > capacity_) samples_.pop_front();
    while (!samples_.empty() && samples_.front().time < received_at - seconds_) samples_.pop_front();
    if (report.collective_seq) collective_seq_ = report.collective_seq;
    if (report.in_collective) in_collective_ = report.in_collective;
    if (!report.gpu_json.empty()) {
        if (report.gpu_json != gpu_text_) {
            // The protocol's reader checked that it is JSON.
            boost::system::error_code ec;
            gpu_ = boost::json::parse(report.gpu_json, ec);
            gpu_text_ = report.gpu_json;
        }
        gpu_at_ = received_at;
        note_xids(received_at);
    }
}

void NodeWindow::add_step(const StepSample& s) {
    if (!step_ || s.step > *step_) {
        // Xids from before the step advanced cannot explain a later stall.
        xids_.clear();
        step_ = s.step;
        step_advanced_at_ = s.time;
        samples_.push_back(s);
        return;
    }
    if (!samples_.empty() && s.step == samples_.back().step) {
        // The latest step usually comes twice (in `samples` and at the top
        // level): keep the first, with its exact time, and fill its gaps.
        StepSample& held = samples_.back();
        if (!held.step_time) held.step_time = s.step_time;
        if (!held.samples_per_sec) held.samples_per_sec = s.samples_per_sec;
        if (!held.data_wait) held.data_wait = s.data_wait;
        if (!held.collective_wait) held.collective_wait = s.collective_wait;
    }
    // Anything else is a step already seen, perhaps one that left the window.
}

void NodeWindow::note_xids(double received_at) {
    for (XidNote& x : read_xids(gpu_, received_at)) {
        const bool known = std::any_of(xids_.begin(), xids_.end(), [&](const XidNote& y) {
            return y.gpu == x.gpu && y.xid == x.xid && y.probe_time == x.probe_time;
        });
        if (known) continue;  // a stale sample resends the events of the last good one
        if (xids_.size() == kMaxXids) xids_.erase(xids_.begin());
        xids_.push_back(std::move(x));
    }
}

}  // namespace cohort::health
