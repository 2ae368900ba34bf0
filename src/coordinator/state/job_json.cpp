// A job as JSON: the exact snapshot, and the view GET /v1/jobs/{id} serves.
#include "coordinator/state/job.hpp"

#include "coordinator/protocol/fields.hpp"
#include "coordinator/protocol/metrics.hpp"
#include "core/json_fields.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

#include <boost/json/array.hpp>

namespace cohort::coord {

namespace json = boost::json;

namespace {

constexpr auto kRoundRecord = std::tuple{
    protocol::field("generation", &RoundRecord::generation), protocol::field("opened_at", &RoundRecord::opened_at),
    protocol::field("closed_at", &RoundRecord::closed_at), protocol::field("world_size", &RoundRecord::world_size),
    protocol::field("reason", &RoundRecord::reason, protocol::Presence::defaulted)};

}  // namespace

json::object Job::snapshot() const {
    json::object round;
    round["open"] = round_open_;
    round["reason"] = round_reason_;
    round["opened_at"] = round_opened_at_;
    round["last_arrival"] = last_arrival_;
    json::array rounds;
    for (const RoundRecord& r : rounds_) rounds.push_back(protocol::write_message(r, kRoundRecord));
    json::array members;
    for (const auto& [id, m] : members_) members.push_back(to_json(m));

    json::object out;
    out["name"] = name_;
    out["created_at"] = created_at_;
    out["settings"] = to_json(settings_);
    out["world"] = to_json(world_);
    out["round"] = std::move(round);
    out["rounds"] = std::move(rounds);
    out["members"] = std::move(members);
    out["store"] = store_.to_json();
    out["shards"] = shards_ ? json::value(shards_->to_json()) : json::value(nullptr);
    return out;
}

Job Job::from_snapshot(const json::value& value, std::string_view where) {
    constexpr Errc code = Errc::parse;
    detail::FieldReader reader(value, std::string(where), code);
    reader.allow({"name", "created_at", "settings", "world", "round", "rounds", "members", "store", "shards"});
    Job job(reader.string("name"), settings_from_json(reader.value("settings"), code), reader.number("created_at"));
    const std::string at = fmt::format("{} ('{}')", where, job.name_);
    job.world_ = world_from_json(reader.value("world"), at + ": world", code);

    detail::FieldReader round(reader.value("round"), at + ": round", code);
    round.allow({"open", "reason", "opened_at", "last_arrival"});
    job.round_open_ = round.boolean_or("open", false);
    job.round_reason_ = round.string_or("reason", "");
    job.round_opened_at_ = round.number("opened_at");
    job.last_arrival_ = round.number("last_arrival");

    const json::array& rounds = reader.array("rounds");
    for (std::size_t i = 0; i < rounds.size(); ++i) {
        job.rounds_.push_back(protocol::read_message<RoundRecord>(rounds[i], fmt::format("{}: rounds[{}]", at, i),
                                                                  protocol::ReadAs{code, true}, kRoundRecord));
        const RoundRecord& r = job.rounds_.back();
        job.history_.restore_round(r.generation, r.opened_at, r.closed_at, r.world_size, r.reason);
    }
    if (job.round_open_) job.history_.round_opened(job.round_reason_, job.round_opened_at_);

    const json::array& members = reader.array("members");
    for (std::size_t i = 0; i < members.size(); ++i) {
        Member m = member_from_json(members[i], fmt::format("{}: members[{}]", at, i), code);
        const std::string id = m.node.id;
        if (!job.members_.emplace(id, std::move(m)).second) {
            reader.fail("members", fmt::format("member '{}' appears twice", id));
        }
    }
    for (const WorldSlot& slot : job.world_.slots) {
        if (!job.members_.contains(slot.id)) {
            reader.fail("world", fmt::format("rank holder '{}' is not a member", slot.id));
        }
    }
    job.tally_all();
    job.store_ = KeyValueStore::from_json(reader.value("store"), at + ": store", code);
    if (reader.has("shards")) job.shards_ = ShardQueue::from_json(reader.value("shards"), at + ": shards", code);
    return job;
}

namespace {

// evaluate_health() passes the members in the map's order, so the nodes
// are sorted by member id.
const health::NodeHealth* node_health(const health::JobHealth& health, std::string_view member) {
    const auto it = std::lower_bound(health.nodes.begin(), health.nodes.end(), member,
                                     [](const health::NodeHealth& n, std::string_view id) { return n.member < id; });
    return it != health.nodes.end() && it->member == member ? &*it : nullptr;
}

}  // namespace

json::object Job::summary() const {
    json::object o;
    o["name"] = name();
    o["phase"] = phase();
    o["generation"] = generation();
    o["world_size"] = world().size();
    o["members"] = members().size();
    return o;
}

json::object Job::view(double now) const {
    json::array members;
    std::array<uint64_t, kMemberStateCount> by_state{};
    for (const auto& [id, m] : members_) {
        ++by_state[static_cast<std::size_t>(m.state)];
        json::object o;
        o["id"] = id;
        o["state"] = to_string(m.state);
        if (m.state == MemberState::active) {
            o["rank"] = m.rank;
            o["local_rank"] = world_.slots[m.rank].local_rank;
        }
        o["host"] = m.node.host_name();
        o["role"] = to_string(m.node.role);
        o["address"] = m.node.address;
        o["gpus"] = m.node.gpu_count;
        o["joined_at"] = m.joined_at;
        o["last_heartbeat"] = m.last_heartbeat;
        o["last_heartbeat_age"] = now - m.last_heartbeat;
        o["heartbeats"] = m.heartbeats;
        if (m.metrics) {
            // The latest heartbeat's metrics, as sent, beside the member's
            // own fields (the batch is in the health window, not here).
            for (auto& [key, value] : protocol::write(*m.metrics)) o[key] = std::move(value);
            o["metrics_age"] = now - m.metrics_at;
        }
        if (!m.reason.empty()) o["reason"] = m.reason;
        if (const health::NodeHealth* h = node_health(health_, id)) {
            if (h->relative_score) o["straggler_score"] = *h->relative_score;
            o["straggler"] = h->straggler;
            o["hung"] = h->hung;
        }
        members.push_back(std::move(o));
    }

    json::object round;
    round["open"] = round_open_;
    if (round_open_) {
        round["reason"] = round_reason_;
        round["opened_at"] = round_opened_at_;
        round["waiting"] = by_state[static_cast<std::size_t>(MemberState::waiting)];
        if (const auto at = closes_at()) round["closes_at"] = *at;
    }
    json::array rounds;
    for (const RoundRecord& r : rounds_) rounds.push_back(protocol::write_message(r, kRoundRecord));

    json::object states;
    for (int s = 0; s < kMemberStateCount; ++s)
        states[to_string(static_cast<MemberState>(s))] = by_state[static_cast<std::size_t>(s)];
    json::object ops;
    for (int op = 0; op < kStoreOpCount; ++op)
        ops[to_string(static_cast<StoreOp>(op))] = store_ops[static_cast<std::size_t>(op)];
    json::object store;
    store["generation"] = world_.generation;
    store["keys"] = store_.size();
    store["version"] = store_.version();
    store["ops"] = std::move(ops);

    json::object out;
    out["name"] = name_;
    out["phase"] = phase();
    out["generation"] = world_.generation;
    out["world_size"] = world_.size();
    out["created_at"] = created_at_;
    out["settings"] = to_json(settings_);
    out["round"] = std::move(round);
    out["members_by_state"] = std::move(states);
    out["members"] = std::move(members);
    out["rounds"] = std::move(rounds);
    out["store"] = std::move(store);
    if (shards_) {
        json::array epochs;
        for (const EpochProgress& p : shards_->progress()) {
            json::object e;
            e["epoch"] = p.epoch;
            e["total"] = p.total;
            e["todo"] = p.todo;
            e["leased"] = p.leased;
            e["done"] = p.done;
            epochs.push_back(std::move(e));
        }
        const ShardCounters& c = shards_->counters();
        json::object shards;
        shards["count"] = shards_->plan().shards.size();
        shards["finished"] = shards_->finished();
        shards["epochs"] = std::move(epochs);
        shards["leases"] = shards_->leases().size();
        shards["granted"] = c.granted;
        shards["requeued"] = c.requeued;
        shards["released"] = c.released;
        shards["late_reports"] = c.late;
        shards["duplicate_reports"] = c.duplicate;
        out["shards"] = std::move(shards);
    } else {
        out["shards"] = nullptr;
    }
    out["health"] = health::to_json(health_);
    return out;
}

}  // namespace cohort::coord
