// Helpers shared by the training-health tests: members fed step samples and
// GPU samples as their heartbeats would carry them.
#pragma once

#include "coordinator/protocol/metrics.hpp"
#include "coordinator/state/json_parse.hpp"
#include "core/json_text.hpp"
#include "health/sample.hpp"
#include "health/tracker.hpp"
#include "health/window.hpp"

#include <cohort/gpu.hpp>

#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <boost/json.hpp>

namespace cohort::health::testing {

// A heartbeat's metrics as the coordinator's route reads them.
inline HeartbeatMetrics report(std::string_view text) {
    return coord::protocol::read<HeartbeatMetrics>(coord::parse_json(text), "metrics", coord::protocol::kRequest);
}

struct Member {
    std::string id;
    uint32_t rank = 0;
    NodeWindow window;
};

// A job's members, kept at stable addresses for NodeInput.
struct Job {
    std::deque<Member> members;

    Member& add(uint32_t rank, const Settings& settings = {}) {
        return members.emplace_back(Member{fmt::format("w{}", rank), rank, NodeWindow(settings)});
    }
    std::vector<NodeInput> inputs() const {
        std::vector<NodeInput> in;
        for (const Member& m : members) in.push_back(NodeInput{m.id, m.rank, &m.window});
        return in;
    }
    Member& operator[](std::size_t i) { return members[i]; }
};

// `count` heartbeats, one a second from `t0`, each reporting the next step
// with `step_time` and `collective_wait`. Returns the time of the last one.
inline double feed(NodeWindow& w, int count, double step_time, double t0 = 0, double collective_wait = 0) {
    const uint64_t first = w.step().value_or(0) + 1;
    for (int i = 0; i < count; ++i) {
        HeartbeatMetrics r;
        r.step = first + static_cast<uint64_t>(i);
        r.step_time = step_time;
        if (collective_wait > 0) r.collective_wait = collective_wait;
        w.add(r, t0 + i);
    }
    return t0 + count - 1;
}

// A heartbeat with only collective state and a GPU sample.
inline void beat(NodeWindow& w, double at, std::optional<uint64_t> seq, bool inside, const GpuSample* gpu = nullptr) {
    HeartbeatMetrics r;
    r.collective_seq = seq;
    if (seq) r.in_collective = inside;
    if (gpu != nullptr) r.gpu_json = gpu->to_json();
    w.add(r, at);
}

inline GpuReading gpu_reading(uint32_t index, double utilization, double used_gib, double celsius) {
    GpuReading g;
    g.index = index;
    g.memory_total_bytes = Reading<uint64_t>::of(80ull << 30);
    g.memory_used_bytes = Reading<uint64_t>::of(static_cast<uint64_t>(used_gib * (1ull << 30)));
    g.gpu_utilization_percent = Reading<double>::of(utilization);
    g.temperature_celsius = Reading<double>::of(celsius);
    return g;
}

inline GpuSample gpu_sample(std::vector<GpuReading> gpus) {
    GpuSample s;
    s.time = 1700000000;
    s.backend = "nvml";
    s.gpus = std::move(gpus);
    return s;
}

}  // namespace cohort::health::testing
