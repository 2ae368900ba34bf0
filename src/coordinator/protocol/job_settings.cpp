// Job settings as JSON, both ways.
#include "coordinator/protocol/job_settings.hpp"

#include "core/json_fields.hpp"

#include <fmt/format.h>

namespace cohort::coord::protocol {

namespace json = boost::json;

namespace {

std::optional<uint32_t> count(const detail::FieldReader& reader, std::string_view key) {
    if (!reader.has(key)) return std::nullopt;
    const uint64_t v = reader.uint(key);
    if (v > UINT32_MAX) reader.fail(key, fmt::format("{} is past {}", v, UINT32_MAX));
    return static_cast<uint32_t>(v);
}

std::optional<double> number(const detail::FieldReader& reader, std::string_view key) {
    if (!reader.has(key)) return std::nullopt;
    return reader.number(key);
}

std::optional<std::string> text(const detail::FieldReader& reader, std::string_view key) {
    if (!reader.has(key)) return std::nullopt;
    return reader.string(key);
}

template <class T>
void put(json::object& o, std::string_view key, const std::optional<T>& value) {
    if (value) o[key] = *value;
}

cohort::HealthSettings health_from_json(const json::value& value, std::string_view where, ReadAs as) {
    detail::FieldReader reader(value, std::string(where), as.code);
    if (as.strict) {
        reader.allow({"window", "window_seconds", "recent", "min_samples", "straggler_threshold", "straggler_for",
                      "reference", "hang_timeout", "gpu_temperature_limit"});
    }
    cohort::HealthSettings h;
    h.window = count(reader, "window");
    h.window_seconds = number(reader, "window_seconds");
    h.recent = count(reader, "recent");
    h.min_samples = count(reader, "min_samples");
    h.straggler_threshold = number(reader, "straggler_threshold");
    h.straggler_for = number(reader, "straggler_for");
    h.reference = text(reader, "reference");
    h.hang_timeout = number(reader, "hang_timeout");
    h.gpu_temperature_limit = number(reader, "gpu_temperature_limit");
    return h;
}

json::object to_json(const cohort::HealthSettings& h) {
    json::object o;
    put(o, "window", h.window);
    put(o, "window_seconds", h.window_seconds);
    put(o, "recent", h.recent);
    put(o, "min_samples", h.min_samples);
    put(o, "straggler_threshold", h.straggler_threshold);
    put(o, "straggler_for", h.straggler_for);
    put(o, "reference", h.reference);
    put(o, "hang_timeout", h.hang_timeout);
    put(o, "gpu_temperature_limit", h.gpu_temperature_limit);
    return o;
}

}  // namespace

json::object to_json(const cohort::JobSettings& s) {
    json::object o;
    put(o, "min_nodes", s.min_nodes);
    put(o, "max_nodes", s.max_nodes);
    put(o, "last_call", s.last_call);
    put(o, "node_unit", s.node_unit);
    put(o, "join_timeout", s.join_timeout);
    put(o, "heartbeat_interval", s.heartbeat_interval);
    put(o, "failure_timeout", s.failure_timeout);
    put(o, "rejoin", s.rejoin);
    json::object health = to_json(s.health);
    if (!health.empty()) o["health"] = std::move(health);
    return o;
}

cohort::JobSettings job_settings_from_json(const json::value& value, std::string_view where, ReadAs as) {
    detail::FieldReader reader(value, std::string(where), as.code);
    if (as.strict) {
        reader.allow({"min_nodes", "max_nodes", "last_call", "node_unit", "join_timeout", "heartbeat_interval",
                      "failure_timeout", "rejoin", "health"});
    }
    cohort::JobSettings s;
    s.min_nodes = count(reader, "min_nodes");
    s.max_nodes = count(reader, "max_nodes");
    s.last_call = number(reader, "last_call");
    s.node_unit = count(reader, "node_unit");
    s.join_timeout = number(reader, "join_timeout");
    s.heartbeat_interval = number(reader, "heartbeat_interval");
    s.failure_timeout = number(reader, "failure_timeout");
    s.rejoin = text(reader, "rejoin");
    if (const json::value* health = reader.find("health")) {
        s.health = health_from_json(*health, fmt::format("{}: health", where), as);
    }
    return s;
}

}  // namespace cohort::coord::protocol
