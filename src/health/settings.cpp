// Health settings: defaults and validation.
#include "health/settings.hpp"

#include <cmath>
#include <string>

#include <fmt/format.h>

namespace cohort::health {

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

HealthSettings published(const Settings& s) {
    HealthSettings h;
    h.window = static_cast<uint32_t>(s.window);
    h.window_seconds = s.window_seconds;
    h.recent = static_cast<uint32_t>(s.recent);
    h.min_samples = static_cast<uint32_t>(s.min_samples);
    h.straggler_threshold = s.straggler_threshold;
    h.straggler_for = s.straggler_for;
    h.reference = std::string(to_string(s.reference));
    h.hang_timeout = s.hang_timeout;
    h.gpu_temperature_limit = s.gpu_temperature_limit;
    return h;
}

Settings resolve(const HealthSettings& h, std::string_view where, Errc code) {
    Settings s;
    s.window = h.window.value_or(s.window);
    s.window_seconds = h.window_seconds.value_or(s.window_seconds);
    s.recent = h.recent.value_or(s.recent);
    s.min_samples = h.min_samples.value_or(s.min_samples);
    s.straggler_threshold = h.straggler_threshold.value_or(s.straggler_threshold);
    s.straggler_for = h.straggler_for.value_or(s.straggler_for);
    if (h.reference) {
        const auto parsed = parse_reference(*h.reference);
        if (!parsed) {
            throw Error(code,
                        fmt::format("{}: reference: must be \"median\" or \"best\", not \"{}\"", where, *h.reference));
        }
        s.reference = *parsed;
    }
    s.hang_timeout = h.hang_timeout.value_or(s.hang_timeout);
    s.gpu_temperature_limit = h.gpu_temperature_limit.value_or(s.gpu_temperature_limit);
    check_settings(s, {where, code});
    return s;
}

}  // namespace cohort::health
