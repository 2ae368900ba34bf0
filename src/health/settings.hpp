// How the coordinator judges a training job's health: how much history it
// keeps per member, when a slow member counts as a straggler and when a
// stalled one counts as hung. Durations are seconds on the coordinator's
// clock. They are part of a job's settings, whose JSON the coordinator's
// protocol reads and writes (HealthSettings).
#pragma once

#include <cohort/coordinator_protocol.hpp>
#include <cohort/error.hpp>

#include <cstddef>
#include <optional>
#include <string_view>

namespace cohort::health {

// What a node's busy time is compared with for its relative score.
enum class Reference : int {
    median = 0,  // the median node: a score says how far below the typical node it is
    best = 1,    // the fastest node: every node but one scores below 1
};

std::string_view to_string(Reference reference) noexcept;
std::optional<Reference> parse_reference(std::string_view text) noexcept;

struct Settings {
    std::size_t window = 120;          // step samples kept per member
    double window_seconds = 120;       // and none older than this
    std::size_t recent = 10;           // the latest samples that make a node's current busy time
    std::size_t min_samples = 3;       // fewer and a node gets no score
    double straggler_threshold = 0.7;  // a relative score below this is slow...
    double straggler_for = 30;         // ...and a straggler once it stays slow this long
    Reference reference = Reference::median;
    // A member whose step has not advanced this long is hung. Five minutes
    // outlasts what stops steps in a healthy job (a checkpoint save, an
    // evaluation pass, the first step's compilation); a job whose checkpoints
    // take longer must raise it.
    double hang_timeout = 300;
    double gpu_temperature_limit = 90;  // celsius; at or over it a GPU is a suspect

    bool operator==(const Settings&) const = default;
};

// Error(invalid_argument) "health settings: <field> must be ..., not ...".
void validate(const Settings& settings);

// The settings as a job's settings spell them (every field set), and back:
// unset fields keep their defaults and the result is validated; Error(code)
// "<where>: <field> must be ..." otherwise.
HealthSettings published(const Settings& settings);
Settings resolve(const HealthSettings& settings, std::string_view where = "health settings",
                 Errc code = Errc::invalid_argument);

}  // namespace cohort::health
