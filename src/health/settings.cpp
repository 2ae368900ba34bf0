// Health settings: validation and JSON.
#include "health/settings.hpp"

#include "coordinator/state/json_fields.hpp"

#include <cmath>
#include <string>

#include <fmt/format.h>

namespace cohort::health {

namespace json = boost::json;

namespace {

// More samples per member than this costs memory on a large job for no
// better estimate of its speed.
constexpr std::size_t kMaxWindow = 100000;
// A year: any longer and a duration is a unit mistake (milliseconds?).
constexpr double kMaxSeconds = 365.0 * 24 * 3600;

// Where the settings came from and the code to fail with: invalid_argument
// for what a client sent, parse for what the coordinator wrote itself.
struct Origin {
    std::string_view where;
    Errc code;
};

void check(bool ok, Origin where, std::string_view what) {
    if (!ok) throw Error(where.code, fmt::format("{}: {}", where.where, what));
}

void check_seconds(Origin where, std::string_view name, double value, bool zero_allowed) {
    check(std::isfinite(value) && value >= 0 && (zero_allowed || value > 0), where,
          fmt::format("{} must be {} seconds, not {}", name, zero_allowed ? "0 or more" : "more than 0", value));
    check(value <= kMaxSeconds, where,
          fmt::format("{} is {} s, more than a year; durations are in seconds", name, value));
}

void check_settings(const Settings& s, Origin where) {
    check(s.window >= 1 && s.window <= kMaxWindow, where,
          fmt::format("window must be from 1 to {} samples, not {}", kMaxWindow, s.window));
    check_seconds(where, "window_seconds", s.window_seconds, false);
    check(s.recent >= 1, where, "recent must be at least 1 sample, not 0");
    check(s.min_samples >= 1, where, "min_samples must be at least 1, not 0");
    check(s.min_samples <= s.window, where,
          fmt::format("min_samples ({}) is above window ({}), so no node could get a score; lower min_samples",
                      s.min_samples, s.window));
    check(std::isfinite(s.straggler_threshold) && s.straggler_threshold > 0 && s.straggler_threshold <= 1, where,
          fmt::format("straggler_threshold must be more than 0 and at most 1, not {}", s.straggler_threshold));
    check_seconds(where, "straggler_for", s.straggler_for, true);
    check_seconds(where, "hang_timeout", s.hang_timeout, false);
    check(std::isfinite(s.gpu_temperature_limit) && s.gpu_temperature_limit > 0, where,
          fmt::format("gpu_temperature_limit must be more than 0 celsius, not {}", s.gpu_temperature_limit));
}

}  // namespace

std::string_view to_string(Reference reference) noexcept {
    switch (reference) {
        case Reference::median:
            return "median";
        case Reference::best:
            return "best";
    }
    return "?";
}

std::optional<Reference> parse_reference(std::string_view text) noexcept {
    if (text == "median") return Reference::median;
    if (text == "best") return Reference::best;
    return std::nullopt;
}

void validate(const Settings& settings) {
    check_settings(settings, {"health settings", Errc::invalid_argument});
}

json::object to_json(const Settings& s) {
    json::object o;
    o["window"] = s.window;
    o["window_seconds"] = s.window_seconds;
    o["recent"] = s.recent;
    o["min_samples"] = s.min_samples;
    o["straggler_threshold"] = s.straggler_threshold;
    o["straggler_for"] = s.straggler_for;
    o["reference"] = to_string(s.reference);
    o["hang_timeout"] = s.hang_timeout;
    o["gpu_temperature_limit"] = s.gpu_temperature_limit;
    return o;
}

Settings settings_from_json(const json::value& value, std::string_view where, Errc code) {
    coord::FieldReader reader(value, std::string(where), code);
    reader.allow({"window", "window_seconds", "recent", "min_samples", "straggler_threshold", "straggler_for",
                  "reference", "hang_timeout", "gpu_temperature_limit"});
    Settings s;
    // Counts are clamped before the range check so a huge value is reported,
    // not wrapped.
    const auto count = [&](std::string_view key, std::size_t fallback) {
        const uint64_t v = reader.uint_or(key, fallback);
        if (v > kMaxWindow) reader.fail(key, fmt::format("must be at most {}, not {}", kMaxWindow, v));
        return static_cast<std::size_t>(v);
    };
    s.window = count("window", s.window);
    s.window_seconds = reader.number_or("window_seconds", s.window_seconds);
    s.recent = count("recent", s.recent);
    s.min_samples = count("min_samples", s.min_samples);
    s.straggler_threshold = reader.number_or("straggler_threshold", s.straggler_threshold);
    s.straggler_for = reader.number_or("straggler_for", s.straggler_for);
    if (reader.has("reference")) {
        const std::string text = reader.string("reference");
        const auto parsed = parse_reference(text);
        if (!parsed) reader.fail("reference", fmt::format("must be \"median\" or \"best\", not \"{}\"", text));
        s.reference = *parsed;
    }
    s.hang_timeout = reader.number_or("hang_timeout", s.hang_timeout);
    s.gpu_temperature_limit = reader.number_or("gpu_temperature_limit", s.gpu_temperature_limit);
    check_settings(s, {where, code});
    return s;
}

}  // namespace cohort::health
