// A member's recent training history as its heartbeats told it: a bounded
// window of step samples, when its step last advanced, where it stands in
// the collectives, and its latest GPU sample. The coordinator keeps one per
// live member and feeds it every heartbeat; Tracker reads them on each tick.
#pragma once

#include "health/sample.hpp"
#include "health/settings.hpp"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/value.hpp>

namespace cohort::health {

// An Xid error a member's GPU sample carried. Samples list only the events
// since the previous sample, so the window remembers them.
struct XidNote {
    uint32_t gpu = 0;
    uint64_t xid = 0;
    double probe_time = 0;   // the event's time on the member's clock: tells a resent event from a new one
    double received_at = 0;  // coordinator's clock
    std::string detail;

    bool operator==(const XidNote&) const = default;
};

class NodeWindow {
public:
    explicit NodeWindow(const Settings& settings = {});

    // Takes the window bounds from `settings`; they apply from the next add.
    void set_limits(const Settings& settings);

    // One heartbeat's metrics, received at `received_at` (seconds, the
    // coordinator's clock). Samples at or below the newest step held are
    // merged into it (absent timings filled in) or dropped, so the window
    // holds each step once, in order.
    void add(const HeartbeatMetrics& metrics, double received_at);

    // Forgets everything: for a member that restarts from a checkpoint, whose
    // steps would otherwise be dropped until they pass the old ones.
    void reset();

    const std::deque<StepSample>& samples() const { return samples_; }
    // The highest step ever reported (kept when its sample leaves the window)
    // and when it was reached; empty until the member reports a step.
    std::optional<uint64_t> step() const { return step_; }
    double step_advanced_at() const { return step_advanced_at_; }
    std::optional<uint64_t> collective_seq() const { return collective_seq_; }
    std::optional<bool> in_collective() const { return in_collective_; }
    // The latest GPU sample as sent (null: none yet) and when it came.
    const boost::json::value& gpu() const { return gpu_; }
    double gpu_at() const { return gpu_at_; }
    // Xid events reported since the heartbeat in which the step last
    // advanced: the ones that may explain a stall. At most kMaxXids.
    std::span<const XidNote> xids() const { return xids_; }
    std::optional<double> last_heartbeat() const { return last_heartbeat_; }

    static constexpr std::size_t kMaxXids = 16;

private:
    void add_step(const StepSample& sample);
    void note_xids(double received_at);

    std::size_t capacity_;
    double seconds_;
    std::deque<StepSample> samples_;
    std::optional<uint64_t> step_;
    double step_advanced_at_ = 0;
    std::optional<uint64_t> collective_seq_;
    std::optional<bool> in_collective_;
    boost::json::value gpu_;
    std::string gpu_text_;  // gpu_ as sent: a sample resent unchanged is not parsed again
    double gpu_at_ = 0;
    std::vector<XidNote> xids_;
    std::optional<double> last_heartbeat_;
};

// A live member as Tracker::evaluate sees it. `member` and `window` must
// outlive the call.
struct NodeInput {
    std::string_view member;
    uint32_t rank = 0;
    const NodeWindow* window = nullptr;
};

}  // namespace cohort::health
