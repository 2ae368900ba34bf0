// Job::sample_history: once a second, after a health evaluation, a point
// per active member (from its heartbeat window and its health) and one for
// the job (percentiles over those points, shard progress).
#include "coordinator/state/job.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

namespace cohort::coord {

namespace json = boost::json;

namespace {

std::optional<double> number(const json::object& o, std::string_view key) {
    const json::value* v = o.if_contains(key);
    if (v == nullptr) return std::nullopt;
    if (v->is_double()) return v->get_double();
    if (v->is_int64()) return static_cast<double>(v->get_int64());
    if (v->is_uint64()) return static_cast<double>(v->get_uint64());
    return std::nullopt;  // {"state": ...}: not available
}

// The member's GPUs in its latest sample (GpuSample::to_json, or a list of
// them): memory summed, utilisation averaged, the hottest temperature.
void read_gpu(const json::value& sample, MemberPoint& p) {
    const json::object* root = nullptr;
    if (sample.is_object()) {
        root = &sample.get_object();
    } else if (sample.is_array() && !sample.get_array().empty() && sample.get_array().back().is_object()) {
        root = &sample.get_array().back().get_object();
    }
    const json::value* gpus = root != nullptr ? root->if_contains("gpus") : nullptr;
    if (gpus == nullptr || !gpus->is_array()) return;
    double used = 0, total = 0, util = 0, hottest = -1e9;
    int n_mem = 0, n_util = 0, n_temp = 0;
    for (const json::value& g : gpus->get_array()) {
        if (!g.is_object()) continue;
        const json::object& o = g.get_object();
        const auto u = number(o, "memory_used_bytes"), t = number(o, "memory_total_bytes");
        if (u && t) {
            used += *u;
            total += *t;
            ++n_mem;
        }
        if (const auto x = number(o, "gpu_utilization_percent")) {
            util += *x;
            ++n_util;
        }
        if (const auto c = number(o, "temperature_celsius")) {
            hottest = std::max(hottest, *c);
            ++n_temp;
        }
    }
    if (n_mem > 0) {
        p.gpu_memory_used = static_cast<float>(used);
        p.gpu_memory_total = static_cast<float>(total);
    }
    if (n_util > 0) p.gpu_utilization = static_cast<float>(util / n_util);
    if (n_temp > 0) p.gpu_temperature = static_cast<float>(hottest);
}

float percentile(std::vector<float>& values, double q) {
    if (values.empty()) return kNoValue;
    const auto k = static_cast<std::ptrdiff_t>(std::ceil(q * static_cast<double>(values.size())) - 1);
    const auto at = values.begin() + std::clamp<std::ptrdiff_t>(k, 0, static_cast<std::ptrdiff_t>(values.size()) - 1);
    std::nth_element(values.begin(), at, values.end());
    return *at;
}

}  // namespace

void Job::sample_history(double now) {
    // Steps that ended after the previous point count towards this one.
    const double since = history_.series().empty() ? -1e300 : history_.series().back().time;
    JobPoint job;
    job.time = now;
    job.active = count(MemberState::active);
    job.waiting = count(MemberState::waiting);
    std::vector<float> step_times;
    double rate = 0;
    bool any_rate = false;
    for (const health::NodeHealth& h : health_.nodes) {
        const health::NodeWindow* w = window(h.member);
        if (w == nullptr) continue;
        MemberPoint p;
        p.time = now;
        p.step = w->step().value_or(0);
        double time_sum = 0, rate_sum = 0;
        int time_n = 0, rate_n = 0;
        const auto& samples = w->samples();
        for (auto it = samples.rbegin(); it != samples.rend() && it->time > since; ++it) {
            if (it->step_time) {
                time_sum += *it->step_time;
                ++time_n;
            }
            if (it->samples_per_sec) {
                rate_sum += *it->samples_per_sec;
                ++rate_n;
            }
        }
        if (time_n > 0) p.step_time = static_cast<float>(time_sum / time_n);
        if (rate_n > 0) p.samples_per_sec = static_cast<float>(rate_sum / rate_n);
        if (h.relative_score) p.score = static_cast<float>(*h.relative_score);
        p.straggler = h.straggler;
        if (!w->gpu().is_null()) read_gpu(w->gpu(), p);
        history_.add(h.member, p);
        if (std::isfinite(p.step_time)) step_times.push_back(p.step_time);
        if (std::isfinite(p.samples_per_sec)) {
            rate += p.samples_per_sec;
            any_rate = true;
        }
    }
    job.step_time_p50 = percentile(step_times, 0.5);
    job.step_time_p90 = percentile(step_times, 0.9);
    job.step_time_max = step_times.empty() ? kNoValue : *std::max_element(step_times.begin(), step_times.end());
    if (any_rate) job.samples_per_sec = static_cast<float>(rate);
    if (shards_) {
        for (const EpochProgress& e : shards_->progress()) {
            job.shards_todo += e.todo;
            job.shards_leased += e.leased;
            job.shards_done += e.done;
        }
    }
    job.stragglers = static_cast<uint32_t>(health_.stragglers.size());
    job.hung = health_.hung;
    history_.add(job);
}

}  // namespace cohort::coord
