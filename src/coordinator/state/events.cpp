// Events to and from their journal JSON.
#include "coordinator/state/events.hpp"

#include "coordinator/protocol/descriptor.hpp"
#include "coordinator/protocol/json_bytes.hpp"
#include "coordinator/protocol/metrics.hpp"
#include "core/json_fields.hpp"
#include "core/overloaded.hpp"

#include <fmt/format.h>
#include <boost/json/array.hpp>

namespace cohort::coord {

namespace json = boost::json;

namespace {

constexpr Errc kCode = Errc::parse;

using namespace event;

std::string_view type_of(const JobCreated&) {
    return "job_created";
}
std::string_view type_of(const JobDeleted&) {
    return "job_deleted";
}
std::string_view type_of(const MemberJoined&) {
    return "member_joined";
}
std::string_view type_of(const MemberRemoved&) {
    return "member_removed";
}
std::string_view type_of(const RoundOpened&) {
    return "round_opened";
}
std::string_view type_of(const RoundClosed&) {
    return "round_closed";
}
std::string_view type_of(const Heartbeat&) {
    return "heartbeat";
}
std::string_view type_of(const StoreSet&) {
    return "store_set";
}
std::string_view type_of(const StoreRemoved&) {
    return "store_removed";
}
std::string_view type_of(const DatasetRegistered&) {
    return "dataset_registered";
}
std::string_view type_of(const LeaseGranted&) {
    return "lease_granted";
}
std::string_view type_of(const LeaseCompleted&) {
    return "lease_completed";
}
std::string_view type_of(const LeaseExpired&) {
    return "lease_expired";
}
std::string_view type_of(const LeaseReleased&) {
    return "lease_released";
}
std::string_view type_of(const AnswerKept&) {
    return "answer_kept";
}
std::string_view type_of(const Resumed&) {
    return "resumed";
}

void write(json::object& o, const JobCreated& e) {
    o["settings"] = to_json(e.settings);
}
void write(json::object&, const JobDeleted&) {}
void write(json::object& o, const MemberJoined& e) {
    o["node"] = descriptor_to_json(e.node);
}
void write(json::object& o, const MemberRemoved& e) {
    o["member"] = e.member;
    o["state"] = to_string(e.state);
    o["reason"] = e.reason;
}
void write(json::object& o, const RoundOpened& e) {
    o["reason"] = e.reason;
}
void write(json::object& o, const RoundClosed& e) {
    o["generation"] = e.generation;
    json::array ranks;
    for (const auto& id : e.ranks) ranks.emplace_back(id);
    o["ranks"] = std::move(ranks);
}
void write(json::object& o, const Heartbeat& e) {
    o["member"] = e.member;
    if (e.metrics) o["metrics"] = protocol::write(*e.metrics);
}
void write(json::object& o, const StoreSet& e) {
    o["generation"] = e.generation;
    o["key"] = bytes_to_json(e.key);
    o["value"] = bytes_to_json(e.value);
}
void write(json::object& o, const StoreRemoved& e) {
    o["generation"] = e.generation;
    o["key"] = bytes_to_json(e.key);
}
void write(json::object& o, const DatasetRegistered& e) {
    o["plan"] = to_json(e.plan);
}
void write(json::object& o, const LeaseGranted& e) {
    o["lease"] = e.lease.id;
    o["member"] = e.lease.member;
    o["epoch"] = e.lease.epoch;
    o["shard"] = e.lease.shard;
    o["expiry"] = e.lease.expiry;
}
void write(json::object& o, const LeaseCompleted& e) {
    o["member"] = e.member;
    o["lease"] = e.lease;
}
void write(json::object& o, const LeaseReleased& e) {
    o["member"] = e.member;
    o["lease"] = e.lease;
}
void write(json::object& o, const LeaseExpired& e) {
    o["lease"] = e.lease;
}

Event read(std::string_view type, const detail::FieldReader& r, const std::string& job, double time) {
    const std::string& where = r.where();
    if (type == "job_created") return JobCreated{job, time, settings_from_json(r.value("settings"), kCode)};
    if (type == "job_deleted") return JobDeleted{job, time};
    if (type == "member_joined") {
        return MemberJoined{job, time, descriptor_from_json(r.value("node"), where + ": node", kCode)};
    }
    if (type == "member_removed") {
        const std::string state = r.string("state");
        const auto parsed = parse_member_state(state);
        if (!parsed || is_live(*parsed)) r.fail("state", fmt::format("'{}' is not failed, left or timed_out", state));
        return MemberRemoved{job, time, r.string("member"), *parsed, r.string_or("reason", "")};
    }
    if (type == "round_opened") return RoundOpened{job, time, r.string_or("reason", "")};
    if (type == "round_closed") {
        RoundClosed e{job, time, r.uint("generation"), {}};
        const json::array& ranks = r.array("ranks");
        for (std::size_t i = 0; i < ranks.size(); ++i) {
            e.ranks.push_back(detail::json_string(ranks[i], fmt::format("{}: ranks[{}]", where, i), kCode));
        }
        return e;
    }
    if (type == "heartbeat") {
        Heartbeat e{job, time, r.string("member"), std::nullopt};
        if (r.has("metrics")) {
            e.metrics = protocol::read<HeartbeatMetrics>(r.value("metrics"), where + ": metrics", protocol::kJournal);
        }
        return e;
    }
    if (type == "store_set") {
        return StoreSet{job, time, r.uint("generation"), bytes_from_json(r.value("key"), where + ": key", kCode),
                        bytes_from_json(r.value("value"), where + ": value", kCode)};
    }
    if (type == "store_removed") {
        return StoreRemoved{job, time, r.uint("generation"), bytes_from_json(r.value("key"), where + ": key", kCode)};
    }
    if (type == "dataset_registered") return DatasetRegistered{job, time, plan_from_json(r.value("plan"), kCode)};
    if (type == "lease_granted") {
        Lease lease;
        lease.id = r.uint("lease");
        lease.member = r.string("member");
        const uint64_t epoch = r.uint("epoch");
        if (epoch > UINT32_MAX) r.fail("epoch", "is out of range");
        lease.epoch = static_cast<uint32_t>(epoch);
        lease.shard = r.uint("shard");
        lease.granted_at = time;
        lease.expiry = r.number("expiry");
        return LeaseGranted{job, time, std::move(lease)};
    }
    if (type == "lease_completed") return LeaseCompleted{job, time, r.string("member"), r.uint("lease")};
    if (type == "lease_expired") return LeaseExpired{job, time, r.uint("lease")};
    if (type == "lease_released") return LeaseReleased{job, time, r.string("member"), r.uint("lease")};
    r.fail("type", fmt::format("unknown event type '{}'", type));
}

// The fields each type may carry besides type, time and job.
std::vector<std::string_view> fields_of(std::string_view type) {
    if (type == "job_created") return {"type", "time", "job", "settings"};
    if (type == "member_joined") return {"type", "time", "job", "node"};
    if (type == "member_removed") return {"type", "time", "job", "member", "state", "reason"};
    if (type == "round_opened") return {"type", "time", "job", "reason"};
    if (type == "round_closed") return {"type", "time", "job", "generation", "ranks"};
    if (type == "heartbeat") return {"type", "time", "job", "member", "metrics"};
    if (type == "store_set") return {"type", "time", "job", "generation", "key", "value"};
    if (type == "store_removed") return {"type", "time", "job", "generation", "key"};
    if (type == "dataset_registered") return {"type", "time", "job", "plan"};
    if (type == "lease_granted") return {"type", "time", "job", "lease", "member", "epoch", "shard", "expiry"};
    if (type == "lease_completed") return {"type", "time", "job", "member", "lease"};
    if (type == "lease_expired") return {"type", "time", "job", "lease"};
    if (type == "lease_released") return {"type", "time", "job", "member", "lease"};
    if (type == "resumed") return {"type", "time"};
    if (type == "answer_kept") return {"type", "time", "key", "fingerprint", "status", "body", "content_type", "allow"};
    if (type == "job_deleted") return {"type", "time", "job"};
    return {};  // unknown
}

}  // namespace

std::string_view event_type(const Event& e) {
    return std::visit([](const auto& x) { return type_of(x); }, e);
}

double event_time(const Event& e) {
    return std::visit([](const auto& x) { return x.time; }, e);
}

json::object to_json(const Event& e) {
    json::object o;
    std::visit(detail::Overloaded{[&](const Resumed& x) {
                              o["type"] = type_of(x);
                              o["time"] = x.time;
                          },
                          [&](const AnswerKept& x) {
                              o["type"] = type_of(x);
                              o["time"] = x.time;
                              o["key"] = x.key;
                              o["fingerprint"] = x.fingerprint;
                              o["status"] = x.answer.status;
                              o["body"] = bytes_to_json(x.answer.body);
                              o["content_type"] = x.answer.content_type;
                              if (!x.answer.allow.empty()) o["allow"] = x.answer.allow;
                          },
                          [&](const auto& x) {
                              o["type"] = type_of(x);
                              o["time"] = x.time;
                              o["job"] = x.job;
                              write(o, x);
                          }},
               e);
    return o;
}

Event event_from_json(const json::value& value) {
    const json::string* type_text = nullptr;
    if (value.is_object()) {
        if (const json::value* t = value.get_object().if_contains("type"); t != nullptr && t->is_string()) {
            type_text = &t->get_string();
        }
    }
    const std::string type = type_text != nullptr ? std::string(*type_text) : std::string();
    detail::FieldReader reader(value, type.empty() ? std::string("event") : fmt::format("event '{}'", type), kCode);
    if (type.empty()) reader.string("type");  // the message for a missing or mistyped type
    const auto fields = fields_of(type);
    if (fields.empty()) reader.fail("type", fmt::format("unknown event type '{}'", type));
    reader.allow(fields);
    const double time = reader.number("time");
    if (type == "resumed") return Resumed{time};
    if (type == "answer_kept") {
        AnswerKept e{time, reader.string("key"), reader.string("fingerprint"), {}};
        const uint64_t status = reader.uint("status");
        if (status < 100 || status > 599) reader.fail("status", fmt::format("{} is not an HTTP status", status));
        e.answer.status = static_cast<unsigned>(status);
        e.answer.body = bytes_from_json(reader.value("body"), reader.where() + ": body", kCode);
        e.answer.content_type = reader.string("content_type");
        e.answer.allow = reader.string_or("allow", "");
        return e;
    }
    return read(type, reader, reader.string("job"), time);
}

}  // namespace cohort::coord
