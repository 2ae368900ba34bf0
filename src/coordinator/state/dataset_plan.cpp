// Dataset plans: checks, JSON, and conversion from a ShardPlan.
#include "coordinator/state/dataset_plan.hpp"

#include "core/json_fields.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include <fmt/format.h>
#include <boost/json/array.hpp>

namespace cohort::coord {

namespace json = boost::json;

namespace {

[[noreturn]] void bad(std::string_view what) {
    throw Error(Errc::invalid_argument, fmt::format("dataset plan: {}", what));
}

}  // namespace

void validate(const DatasetPlan& plan) {
    if (plan.shards.empty()) bad("no shards; list at least one");
    if (plan.epochs < 1) bad("epochs must be at least 1, not 0");
    if (!std::isfinite(plan.lease_duration) || plan.lease_duration <= 0) {
        bad(fmt::format("lease_duration must be more than 0 seconds, not {}", plan.lease_duration));
    }
    std::unordered_set<std::string_view> ids;
    for (std::size_t i = 0; i < plan.shards.size(); ++i) {
        const ShardSpec& shard = plan.shards[i];
        if (shard.id.empty()) bad(fmt::format("shards[{}]: empty id", i));
        if (!ids.insert(shard.id).second) bad(fmt::format("shards[{}]: id '{}' appears twice", i, shard.id));
        for (const auto& host : shard.hosts) {
            if (host.empty()) bad(fmt::format("shards[{}] ('{}'): empty host name", i, shard.id));
        }
    }
}

json::object to_json(const DatasetPlan& plan) {
    json::array shards;
    shards.reserve(plan.shards.size());
    for (const ShardSpec& shard : plan.shards) {
        json::object o;
        o["id"] = shard.id;
        o["bytes"] = shard.bytes;
        if (!shard.hosts.empty()) {
            json::array hosts;
            for (const auto& host : shard.hosts) hosts.emplace_back(host);
            o["hosts"] = std::move(hosts);
        }
        shards.push_back(std::move(o));
    }
    json::object out;
    out["shards"] = std::move(shards);
    out["epochs"] = plan.epochs;
    out["shuffle"] = plan.shuffle;
    out["seed"] = plan.seed;
    out["lease_duration"] = plan.lease_duration;
    return out;
}

DatasetPlan plan_from_json(const json::value& value, Errc code) {
    detail::FieldReader reader(value, "dataset plan", code);
    reader.allow({"shards", "epochs", "shuffle", "seed", "lease_duration"});
    DatasetPlan plan;
    const uint64_t epochs = reader.uint_or("epochs", plan.epochs);
    if (epochs > UINT32_MAX) reader.fail("epochs", fmt::format("{} is too many", epochs));
    plan.epochs = static_cast<uint32_t>(epochs);
    plan.shuffle = reader.boolean_or("shuffle", plan.shuffle);
    plan.seed = reader.uint_or("seed", plan.seed);
    plan.lease_duration = reader.number_or("lease_duration", plan.lease_duration);
    const json::array& shards = reader.array("shards");
    plan.shards.reserve(shards.size());
    for (std::size_t i = 0; i < shards.size(); ++i) {
        const std::string where = fmt::format("dataset plan: shards[{}]", i);
        detail::FieldReader shard(shards[i], where, code);
        shard.allow({"id", "bytes", "hosts"});
        ShardSpec spec;
        spec.id = shard.string("id");
        spec.bytes = shard.uint_or("bytes", 0);
        if (shard.has("hosts")) {
            const json::array& hosts = shard.array("hosts");
            for (std::size_t h = 0; h < hosts.size(); ++h) {
                spec.hosts.push_back(detail::json_string(hosts[h], fmt::format("{}: hosts[{}]", where, h), code));
            }
        }
        plan.shards.push_back(std::move(spec));
    }
    try {
        validate(plan);
    } catch (const Error& e) {
        throw Error(code, e.what());
    }
    return plan;
}

DatasetPlan plan_from_shard_plan(const ShardPlan& sharding, uint32_t epochs) {
    DatasetPlan plan;
    plan.epochs = epochs;
    plan.shards.reserve(sharding.shard_count());
    for (uint64_t s = 0; s < sharding.shard_count(); ++s) {
        ShardSpec spec;
        spec.id = std::to_string(s);
        spec.bytes = sharding.shards().bytes(s);
        for (uint32_t owner : sharding.owners(s)) {
            const std::string& host = sharding.members()[owner].host_name();
            if (std::find(spec.hosts.begin(), spec.hosts.end(), host) == spec.hosts.end()) spec.hosts.push_back(host);
        }
        plan.shards.push_back(std::move(spec));
    }
    validate(plan);
    return plan;
}

}  // namespace cohort::coord
