// Reading a member's GPU sample for hang evidence.
#include "health/gpu_evidence.hpp"

#include <optional>

#include <fmt/format.h>
#include <boost/json.hpp>

namespace cohort::health {

namespace json = boost::json;

namespace {

// The newest sample: the object itself, or the last object of a list.
const json::object* latest_sample(const json::value& gpu) {
    if (gpu.is_object()) return &gpu.get_object();
    if (!gpu.is_array()) return nullptr;
    const json::array& list = gpu.get_array();
    for (auto it = list.rbegin(); it != list.rend(); ++it) {
        if (it->is_object()) return &it->get_object();
    }
    return nullptr;
}

// A number, or nothing: fields that are not ok come as {"state": ...}.
std::optional<double> number(const json::object& o, std::string_view key) {
    const json::value* v = o.if_contains(key);
    if (v == nullptr) return std::nullopt;
    if (v->is_double()) return v->get_double();
    if (v->is_int64()) return static_cast<double>(v->get_int64());
    if (v->is_uint64()) return static_cast<double>(v->get_uint64());
    return std::nullopt;
}

std::string text(const json::object& o, std::string_view key) {
    const json::value* v = o.if_contains(key);
    return v != nullptr && v->is_string() ? std::string(v->get_string()) : std::string();
}

uint32_t gpu_index(const json::object& gpu) {
    const double index = number(gpu, "index").value_or(0);
    return index >= 0 && index < 65536 ? static_cast<uint32_t>(index) : 0;
}

// Calls f(gpu object) for each GPU of the latest sample.
template <class F>
void for_each_gpu(const json::value& sample, F&& f) {
    const json::object* root = latest_sample(sample);
    const json::value* gpus = root != nullptr ? root->if_contains("gpus") : nullptr;
    if (gpus == nullptr || !gpus->is_array()) return;
    for (const json::value& gpu : gpus->get_array()) {
        if (gpu.is_object()) f(gpu.get_object());
    }
}

std::string gib(double bytes) {
    return fmt::format("{:.1f} GiB", bytes / (1024.0 * 1024 * 1024));
}

}  // namespace

std::vector<XidNote> read_xids(const json::value& gpu, double received_at) {
    std::vector<XidNote> notes;
    for_each_gpu(gpu, [&](const json::object& g) {
        const json::value* events = g.if_contains("xid_events");
        if (events == nullptr || !events->is_array()) return;
        for (const json::value& e : events->get_array()) {
            if (!e.is_object()) continue;
            const auto xid = number(e.get_object(), "xid");
            if (!xid || *xid < 0) continue;
            notes.push_back(XidNote{gpu_index(g), static_cast<uint64_t>(*xid),
                                    number(e.get_object(), "time").value_or(0), received_at,
                                    text(e.get_object(), "detail")});
        }
    });
    return notes;
}

std::vector<std::string> gpu_faults(const json::value& gpu, std::span<const XidNote> xids, const Settings& settings) {
    std::vector<std::string> faults;
    for (const XidNote& x : xids) {
        std::string line = fmt::format("GPU {} reported Xid {}", x.gpu, x.xid);
        if (!x.detail.empty()) line += fmt::format(" ({})", x.detail);
        faults.push_back(std::move(line));
    }
    std::vector<std::string> hot;
    for_each_gpu(gpu, [&](const json::object& g) {
        const auto busy = number(g, "gpu_utilization_percent");
        const auto used = number(g, "memory_used_bytes");
        if (busy && *busy <= 0 && used && *used > kHeldMemoryBytes) {
            faults.push_back(fmt::format("GPU {} at 0 % utilisation with {} held", gpu_index(g), gib(*used)));
        }
        const auto celsius = number(g, "temperature_celsius");
        if (celsius && *celsius >= settings.gpu_temperature_limit) {
            hot.push_back(fmt::format("GPU {} at {:g} °C, at or over the {:g} °C limit", gpu_index(g), *celsius,
                                      settings.gpu_temperature_limit));
        }
    });
    faults.insert(faults.end(), hot.begin(), hot.end());
    return faults;
}

std::string gpu_overview(const json::value& gpu, double gpu_at, double now) {
    const json::object* root = latest_sample(gpu);
    if (root == nullptr) return "no GPU samples";
    const std::string age = fmt::format(" (sample {:.0f} s old)", now - gpu_at);
    const std::string health = text(*root, "health");
    if (!health.empty() && health != "ok") {
        const std::string error = text(*root, "error");
        return fmt::format("GPU probe {}{}{}", health, error.empty() ? "" : ": " + error, age);
    }
    std::string line;
    for_each_gpu(gpu, [&](const json::object& g) {
        line += fmt::format("{}GPU {}:", line.empty() ? "" : "; ", gpu_index(g));
        std::string sep = " ";
        if (const auto busy = number(g, "gpu_utilization_percent")) {
            line += fmt::format("{}{:g} % utilisation", sep, *busy);
            sep = ", ";
        }
        if (const auto used = number(g, "memory_used_bytes")) {
            line += sep + gib(*used) + " held";
            sep = ", ";
        }
        if (const auto celsius = number(g, "temperature_celsius")) {
            line += fmt::format("{}{:g} °C", sep, *celsius);
            sep = ", ";
        }
        if (sep == " ") line += " no readings";
    });
    if (line.empty()) line = "GPU sample lists no GPUs";
    return line + age;
}

}  // namespace cohort::health
