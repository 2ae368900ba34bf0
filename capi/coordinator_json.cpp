// The JSON the coordinator's C functions give back, and the heartbeat
// metrics they take, for capi/coordinator.cpp and capi/membership.cpp.
#include "coordinator_json.hpp"

#include "cohort.h"

#include <cohort/error.hpp>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <fmt/format.h>

#include <string_view>

namespace cohort::capi {

namespace json = boost::json;

std::string world_json(const cohort::MemberWorld& w, bool with_peers) {
    json::object o;
    o["active"] = w.active;
    o["generation"] = w.generation;
    if (w.active) {
        o["rank"] = w.rank;
        o["world_size"] = w.world_size;
        o["local_rank"] = w.local_rank;
        o["local_world_size"] = w.local_world_size;
        o["node_rank"] = w.node_rank;
        if (!with_peers) return json::serialize(o);
        json::array peers;
        for (const auto& p : w.peers) {
            json::object peer;
            peer["rank"] = p.rank;
            peer["id"] = p.id;
            peer["host"] = p.host;
            peer["address"] = p.address;
            peers.push_back(std::move(peer));
        }
        o["peers"] = std::move(peers);
    }
    return json::serialize(o);
}

std::string lease_json(const cohort::ShardLease& l) {
    json::object o;
    o["granted"] = l.granted;
    o["finished"] = l.finished;
    if (l.granted) {
        o["lease"] = l.lease;
        o["shard_id"] = l.shard_id;
        o["shard"] = l.shard;
        o["epoch"] = l.epoch;
        o["bytes"] = l.bytes;
        o["expiry"] = l.expiry;
    }
    return json::serialize(o);
}

cohort::HeartbeatMetrics metrics_from_text(const char* text, const char* fn) {
    boost::system::error_code ec;
    const json::value v = json::parse(text, ec);
    const auto bad = [&](std::string_view what) {
        return cohort::Error(cohort::Errc::invalid_argument, fmt::format("{}: metrics_json: {}", fn, what));
    };
    if (ec) throw bad(fmt::format("not JSON ({})", ec.message()));
    if (!v.is_object()) throw bad("must be an object");
    const auto number = [&](const json::object& o, std::string_view key, std::string_view where) {
        const json::value& x = o.at(key);
        if (!x.is_number() || x.to_number<double>() < 0) {
            throw bad(fmt::format("{}{} must be a number of at least 0", where, key));
        }
        return x.to_number<double>();
    };
    const auto count = [&](const json::object& o, std::string_view key, std::string_view where) {
        const json::value& x = o.at(key);
        if (x.is_uint64()) return x.get_uint64();
        if (x.is_int64() && x.get_int64() >= 0) return static_cast<uint64_t>(x.get_int64());
        throw bad(fmt::format("{}{} must be a whole number of at least 0", where, key));
    };
    cohort::HeartbeatMetrics m;
    for (const auto& [key, value] : v.as_object()) {
        const auto& o = v.as_object();
        if (key == "step") m.step = count(o, key, "");
        else if (key == "step_time") m.step_time = number(o, key, "");
        else if (key == "samples_per_sec") m.samples_per_sec = number(o, key, "");
        else if (key == "data_wait") m.data_wait = number(o, key, "");
        else if (key == "collective_wait") m.collective_wait = number(o, key, "");
        else if (key == "collective_seq") m.collective_seq = count(o, key, "");
        else if (key == "in_collective") {
            if (!value.is_bool()) throw bad("in_collective must be true or false");
            m.in_collective = value.get_bool();
        } else if (key == "gpu") m.gpu_json = json::serialize(value);
        else if (key == "samples") {
            if (!value.is_array()) throw bad("samples must be an array");
            for (std::size_t i = 0; i < value.as_array().size(); ++i) {
                const json::value& s = value.as_array()[i];
                const std::string where = fmt::format("samples[{}].", i);
                if (!s.is_object()) throw bad(fmt::format("samples[{}] must be an object", i));
                if (!s.as_object().contains("step")) throw bad(fmt::format("samples[{}].step is missing", i));
                cohort::StepSample sample;
                for (const auto& [k, x] : s.as_object()) {
                    const auto& so = s.as_object();
                    if (k == "age") sample.age = number(so, k, where);
                    else if (k == "step") sample.step = count(so, k, where);
                    else if (k == "step_time") sample.step_time = number(so, k, where);
                    else if (k == "samples_per_sec") sample.samples_per_sec = number(so, k, where);
                    else if (k == "data_wait") sample.data_wait = number(so, k, where);
                    else if (k == "collective_wait") sample.collective_wait = number(so, k, where);
                    else throw bad(fmt::format("{}{}: unknown field", where, std::string_view(k)));
                }
                m.samples.push_back(sample);
            }
        } else {
            throw bad(fmt::format("{}: unknown field", std::string_view(key)));
        }
    }
    return m;
}

int32_t shard_outcome(const ShardDone& done) {
    if (done.outcome == "counted") return COHORT_SHARD_COUNTED;
    if (done.outcome == "counted_late") return COHORT_SHARD_COUNTED_LATE;
    if (done.outcome == "already_done") return COHORT_SHARD_ALREADY_DONE;
    throw Error(Errc::internal, fmt::format("unknown shard outcome '{}' from the coordinator", done.outcome));
}

}  // namespace cohort::capi
