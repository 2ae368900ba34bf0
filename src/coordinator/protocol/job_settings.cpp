// Job settings as JSON, both ways. The fields are named once, in the tables
// below; every one may be absent (the coordinator's default).
#include "coordinator/protocol/job_settings.hpp"

#include <fmt/format.h>

namespace cohort::coord::protocol {

namespace json = boost::json;

namespace {

constexpr auto kHealth = std::tuple{field("window", &cohort::HealthSettings::window),
                                    field("window_seconds", &cohort::HealthSettings::window_seconds),
                                    field("recent", &cohort::HealthSettings::recent),
                                    field("min_samples", &cohort::HealthSettings::min_samples),
                                    field("straggler_threshold", &cohort::HealthSettings::straggler_threshold),
                                    field("straggler_for", &cohort::HealthSettings::straggler_for),
                                    field("reference", &cohort::HealthSettings::reference),
                                    field("hang_timeout", &cohort::HealthSettings::hang_timeout),
                                    field("gpu_temperature_limit", &cohort::HealthSettings::gpu_temperature_limit)};

// "health" is read and written by hand, with kHealth.
constexpr auto kJob = std::tuple{field("min_nodes", &cohort::JobSettings::min_nodes),
                                 field("max_nodes", &cohort::JobSettings::max_nodes),
                                 field("last_call", &cohort::JobSettings::last_call),
                                 field("node_unit", &cohort::JobSettings::node_unit),
                                 field("join_timeout", &cohort::JobSettings::join_timeout),
                                 field("heartbeat_interval", &cohort::JobSettings::heartbeat_interval),
                                 field("failure_timeout", &cohort::JobSettings::failure_timeout),
                                 field("rejoin", &cohort::JobSettings::rejoin)};

}  // namespace

json::object write(const cohort::JobSettings& s) {
    json::object o = write_message(s, kJob);
    json::object health = write_message(s.health, kHealth);
    if (!health.empty()) o["health"] = std::move(health);
    return o;
}

template <>
cohort::JobSettings read<cohort::JobSettings>(const json::value& value, std::string_view where, ReadAs as) {
    const auto reader = reader_for(value, where, as, kJob, {"health"});
    cohort::JobSettings s;
    read_fields(reader, s, kJob);
    if (const json::value* health = reader.find("health")) {
        s.health = read_message<cohort::HealthSettings>(*health, fmt::format("{}: health", where), as, kHealth);
    }
    return s;
}

}  // namespace cohort::coord::protocol
