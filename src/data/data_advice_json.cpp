// The DataAdvisor's JSON: the one reader of its options and measurements
// (the C ABI, Python and cohort-plan --advise all pass them so) and the
// writer of its advice.
#include "core/json_fields.hpp"
#include "core/json_text.hpp"

#include <cohort/data_advisor.hpp>
#include <cohort/error.hpp>
#include <cohort/units.hpp>

#include <fmt/format.h>
#include <boost/json.hpp>

namespace cohort {

namespace json = boost::json;

namespace {

constexpr Errc kBad = Errc::invalid_argument;

json::value parse_text(std::string_view text, std::string_view where) {
    try {
        return json::parse(text);
    } catch (const std::exception& e) {
        throw Error(kBad, fmt::format("{}: not JSON: {}", where, e.what()));
    }
}

// A byte count: a whole number, or a size such as "8GiB".
uint64_t bytes_field(const detail::FieldReader& r, std::string_view key) {
    const json::value& v = r.value(key);
    if (v.is_string()) {
        auto size = parse_size(v.get_string());
        if (!size) r.fail(key, fmt::format("expected a size such as 8GiB, got '{}'", std::string_view(v.get_string())));
        return *size;
    }
    return r.uint(key);
}

DataMeasurement read_measurement(const json::value& value, const std::string& where) {
    detail::FieldReader r(value, where, kBad);
    r.allow({"data_wait_fraction", "data_wait", "prefetch_hit_rate", "read_bytes_per_second", "step_time",
             "samples_per_second", "prefetch_depth"});
    DataMeasurement m;
    if (r.has("step_time")) m.step_time = r.number("step_time");
    if (r.has("data_wait_fraction")) {
        if (r.has("data_wait")) r.fail("give data_wait_fraction or data_wait (seconds, with step_time), not both");
        m.data_wait_fraction = r.number("data_wait_fraction");
    } else if (r.has("data_wait")) {
        const double wait = r.number("data_wait");
        if (!m.step_time)
            r.fail("data_wait", "needs step_time to be a fraction of the step (or give data_wait_fraction)");
        if (!(*m.step_time > 0)) r.fail("step_time", fmt::format("must be > 0, got {}", *m.step_time));
        if (!(wait >= 0 && wait <= *m.step_time))
            r.fail("data_wait", fmt::format("must be in [0, step_time {}], got {}", *m.step_time, wait));
        m.data_wait_fraction = wait / *m.step_time;
    }
    if (r.has("prefetch_hit_rate")) m.prefetch_hit_rate = r.number("prefetch_hit_rate");
    if (r.has("read_bytes_per_second")) m.read_bytes_per_second = r.number("read_bytes_per_second");
    if (r.has("samples_per_second")) m.samples_per_second = r.number("samples_per_second");
    if (r.has("prefetch_depth")) {
        // The range (1 to 64) is the advisor's check, for the C++ API too.
        const uint64_t depth = r.uint("prefetch_depth");
        if (depth > UINT32_MAX) r.fail("prefetch_depth", fmt::format("must be in 1..64 batches, got {}", depth));
        m.prefetch_depth = static_cast<uint32_t>(depth);
    }
    return m;
}

DataMeasurements read_measurements(const json::value& value, const std::string& where) {
    detail::FieldReader r(value, where, kBad);
    r.allow({"job", "nodes"});
    DataMeasurements out;
    if (r.has("job")) out.job = read_measurement(r.value("job"), where + ": job");
    if (r.has("nodes")) {
        for (const auto& entry : r.object("nodes")) {
            const std::string id(entry.key());
            out.nodes[id] = read_measurement(entry.value(), fmt::format("{}: nodes.{}", where, id));
        }
    }
    return out;
}

json::object prefetch_json(uint32_t batches, uint64_t bytes, const std::string& reason) {
    return json::object{{"batches", batches}, {"bytes", bytes}, {"reason", reason}};
}

}  // namespace

DataMeasurements data_measurements_from_json(std::string_view text, std::string_view where) {
    return read_measurements(parse_text(text, where), std::string(where));
}

DataAdvisorOptions data_advisor_options_from_json(std::string_view text, std::string_view where_view) {
    const std::string where(where_view);
    const json::value value = parse_text(text, where);
    detail::FieldReader r(value, where, kBad);
    r.allow({"patterns", "style", "batch_size", "sample_bytes", "memory_budget_bytes", "disk_budget_bytes", "epochs",
             "access", "locality_threshold", "prefetch_factor_floor", "measurements"});
    DataAdvisorOptions o;
    if (r.has("patterns")) {
        std::size_t i = 0;
        for (const json::value& p : r.array("patterns"))
            o.patterns.push_back(detail::json_string(p, fmt::format("{}: patterns[{}]", where, i++), kBad));
    }
    if (r.has("style")) {
        const std::string style = r.string("style");
        auto parsed = parse_collective_style(style);
        if (!parsed) r.fail("style", fmt::format("unknown style '{}' (expected allreduce or parameter_server)", style));
        o.style = *parsed;
    }
    if (!r.has("batch_size")) r.fail("missing field 'batch_size' (samples per batch on one node)");
    o.batch_size = r.uint("batch_size");
    if (r.has("sample_bytes")) o.sample_bytes = bytes_field(r, "sample_bytes");
    if (!r.has("memory_budget_bytes"))
        r.fail("missing field 'memory_budget_bytes' (memory per node for prefetch and cache)");
    o.memory_budget_bytes = bytes_field(r, "memory_budget_bytes");
    if (r.has("disk_budget_bytes")) o.disk_budget_bytes = bytes_field(r, "disk_budget_bytes");
    if (r.has("epochs")) {
        const uint64_t epochs = r.uint("epochs");
        if (epochs == 0 || epochs > UINT32_MAX)
            r.fail("epochs", fmt::format("must be in 1..{}, got {}", UINT32_MAX, epochs));
        o.epochs = static_cast<uint32_t>(epochs);
    }
    if (r.has("access")) {
        const std::string access = r.string("access");
        if (access == "random")
            o.access = AccessPattern::random;
        else if (access != "sequential")
            r.fail("access", fmt::format("unknown access '{}' (expected sequential or random)", access));
    }
    if (r.has("locality_threshold")) o.locality_threshold = r.number("locality_threshold");
    if (r.has("prefetch_factor_floor")) o.prefetch_factor_floor = r.number("prefetch_factor_floor");
    if (r.has("measurements")) o.measurements = read_measurements(r.value("measurements"), where + ": measurements");
    return o;
}

std::string DataAdvice::to_json() const {
    json::object root;
    root["style"] = std::string(cohort::to_string(style));
    root["batch_size"] = batch_size;
    root["sample_bytes"] = sample_bytes;
    root["sample_bytes_reason"] = sample_bytes_reason;
    root["batch_bytes"] = batch_bytes;
    json::array file_list;
    for (const std::string& f : files) file_list.push_back(json::string(f));
    root["files"] = std::move(file_list);
    root["bytes"] = bytes;
    root["baseline"] = json::object{{"prefetch_batches", baseline.prefetch_batches},
                                    {"cache", baseline.cache},
                                    {"locality_threshold", baseline.locality_threshold},
                                    {"prefetch_reason", baseline.prefetch_reason},
                                    {"cache_reason", baseline.cache_reason}};
    json::object prefetch = prefetch_json(prefetch_batches, prefetch_bytes, prefetch_reason);
    prefetch["measured"] = measured;
    root["prefetch"] = std::move(prefetch);
    root["cache"] = json::object{{"enabled", cache}, {"reason", cache_reason}};
    json::array high;
    for (const std::string& n : high_locality_nodes) high.push_back(json::string(n));
    root["high_locality"] = json::object{
        {"nodes", std::move(high)}, {"threshold", baseline.locality_threshold}, {"reason", locality_reason}};
    json::array node_list;
    for (const NodeDataAdvice& n : nodes) {
        json::object p = prefetch_json(n.prefetch_batches, n.prefetch_bytes, n.prefetch_reason);
        p["measured"] = n.measured;
        node_list.push_back(json::object{{"node", n.node},
                                         {"prefetch", std::move(p)},
                                         {"locality", n.locality},
                                         {"high_locality", n.high_locality},
                                         {"shards", n.shards},
                                         {"bytes", n.bytes},
                                         {"cache", json::object{{"memory_bytes", n.cache_memory_bytes},
                                                                {"disk_bytes", n.cache_disk_bytes},
                                                                {"reason", n.cache_reason}}}});
    }
    root["nodes"] = std::move(node_list);
    json::array shard_list;
    shard_list.reserve(shards.size());
    for (const ShardDataAdvice& s : shards) {
        shard_list.push_back(json::object{
            {"shard", s.shard},
            {"bytes", s.bytes},
            {"preferred_node", s.preferred_node},
            {"locality", s.locality},
            {"node_reason", s.node_reason},
            {"prefetch", prefetch_json(s.prefetch_batches, s.prefetch_bytes, s.prefetch_reason)},
            {"cache", json::object{{"strategy", std::string(cohort::to_string(s.cache))}, {"reason", s.cache_reason}}},
            {"priority", json::object{{"value", s.priority}, {"reason", s.priority_reason}}}});
    }
    root["shards"] = std::move(shard_list);
    return detail::to_text(root);
}

}  // namespace cohort
