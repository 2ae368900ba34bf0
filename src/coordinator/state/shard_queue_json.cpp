// ShardQueue to and from JSON. An epoch's per-shard state is one string
// ('t' todo, 'l' leased, 'd' done), so a snapshot stays one byte per shard;
// complete epochs keep nothing but the fact.
#include "coordinator/state/shard_queue.hpp"

#include "coordinator/protocol/fields.hpp"
#include "core/json_fields.hpp"

#include <fmt/format.h>
#include <boost/json/array.hpp>

namespace cohort::coord {

namespace json = boost::json;

namespace {

constexpr auto kLease = std::tuple{protocol::field("id", &Lease::id),
                                   protocol::field("member", &Lease::member),
                                   protocol::field("epoch", &Lease::epoch),
                                   protocol::field("shard", &Lease::shard),
                                   protocol::field("granted_at", &Lease::granted_at),
                                   protocol::field("expiry", &Lease::expiry)};

json::object lease_to_json(const Lease& lease) {
    return protocol::write_message(lease, kLease);
}

Lease lease_from_json(const json::value& value, const std::string& where, Errc code, const DatasetPlan& plan) {
    const auto reader = protocol::reader_for(value, where, protocol::ReadAs{code, true}, kLease);
    Lease lease;
    protocol::read_fields(reader, lease, kLease);
    if (lease.epoch >= plan.epochs) {
        reader.fail("epoch", fmt::format("{} is past the plan's {} epochs", lease.epoch, plan.epochs));
    }
    if (lease.shard >= plan.shards.size()) {
        reader.fail("shard", fmt::format("{} is past the plan's {} shards", lease.shard, plan.shards.size()));
    }
    return lease;
}

}  // namespace

json::object ShardQueue::to_json() const {
    json::array epochs;
    for (const Epoch& e : epochs_) {
        json::object o;
        if (e.complete) {
            o["complete"] = true;
        } else {
            std::string status(e.status.size(), 't');
            for (std::size_t i = 0; i < e.status.size(); ++i) {
                status[i] = e.status[i] == Status::leased ? 'l' : e.status[i] == Status::done ? 'd' : 't';
            }
            o["status"] = std::move(status);
            o["cursor"] = e.cursor;
            json::array returned;
            for (uint64_t shard : e.returned) returned.push_back(shard);
            o["returned"] = std::move(returned);
        }
        epochs.push_back(std::move(o));
    }
    json::array leases;
    for (const auto& [id, lease] : leases_) leases.push_back(lease_to_json(lease));
    json::array revoked;
    for (const auto& [id, lease] : revoked_) revoked.push_back(lease_to_json(lease));
    json::object counters;
    counters["granted"] = counters_.granted;
    counters["requeued"] = counters_.requeued;
    counters["late"] = counters_.late;
    counters["duplicate"] = counters_.duplicate;
    counters["released"] = counters_.released;

    json::object out;
    out["plan"] = coord::to_json(plan_);
    out["next_lease"] = next_lease_;
    out["epochs"] = std::move(epochs);
    out["leases"] = std::move(leases);
    out["revoked"] = std::move(revoked);
    out["counters"] = std::move(counters);
    return out;
}

ShardQueue ShardQueue::from_json(const json::value& value, std::string_view where, Errc code) {
    detail::FieldReader reader(value, std::string(where), code);
    reader.allow({"plan", "next_lease", "epochs", "leases", "revoked", "counters"});
    ShardQueue queue(plan_from_json(reader.value("plan"), code));
    const uint64_t n = queue.plan_.shards.size();
    queue.next_lease_ = reader.uint("next_lease");

    const json::array& epochs = reader.array("epochs");
    if (epochs.size() > queue.plan_.epochs) reader.fail("epochs", "lists more epochs than the plan has");
    for (std::size_t i = 0; i < epochs.size(); ++i) {
        detail::FieldReader item(epochs[i], fmt::format("{}: epochs[{}]", where, i), code);
        item.allow({"complete", "status", "cursor", "returned"});
        Epoch e;
        if (item.boolean_or("complete", false)) {
            e.complete = true;
            queue.epochs_.push_back(std::move(e));
            continue;
        }
        const std::string status = item.string("status");
        if (status.size() != n) item.fail("status", fmt::format("has {} entries for {} shards", status.size(), n));
        e.status.resize(n);
        for (std::size_t s = 0; s < n; ++s) {
            switch (status[s]) {
                case 't':
                    e.status[s] = Status::todo;
                    break;
                case 'l':
                    e.status[s] = Status::leased;
                    ++e.leased;
                    break;
                case 'd':
                    e.status[s] = Status::done;
                    ++e.done;
                    break;
                default:
                    item.fail("status", fmt::format("unknown shard state '{}' at {}", status[s], s));
            }
        }
        e.order = queue.make_order(static_cast<uint32_t>(i));
        e.cursor = item.uint("cursor");
        if (e.cursor > n) item.fail("cursor", "is past the last shard");
        for (const auto& shard : item.array("returned")) {
            const uint64_t index = detail::json_uint(shard, fmt::format("{}: epochs[{}]: returned", where, i), code);
            if (index >= n) item.fail("returned", fmt::format("shard {} is past the last shard", index));
            e.returned.push_back(index);
        }
        queue.epochs_.push_back(std::move(e));
    }
    while (queue.first_open_ < queue.epochs_.size() && queue.epochs_[queue.first_open_].complete) ++queue.first_open_;

    const auto read_leases = [&](std::string_view key, std::map<uint64_t, Lease>& into) {
        const json::array& items = reader.array(key);
        for (std::size_t i = 0; i < items.size(); ++i) {
            Lease lease = lease_from_json(items[i], fmt::format("{}: {}[{}]", where, key, i), code, queue.plan_);
            if (lease.id >= queue.next_lease_) reader.fail(key, fmt::format("lease {} is past next_lease", lease.id));
            if (lease.epoch >= queue.epochs_.size()) {
                reader.fail(key, fmt::format("lease {} is in epoch {}, which has not started", lease.id, lease.epoch));
            }
            const uint64_t id = lease.id;
            if (!into.emplace(id, std::move(lease)).second) reader.fail(key, fmt::format("lease {} appears twice", id));
        }
    };
    read_leases("leases", queue.leases_);
    read_leases("revoked", queue.revoked_);

    detail::FieldReader counters(reader.value("counters"), fmt::format("{}: counters", where), code);
    counters.allow({"granted", "requeued", "late", "duplicate", "released"});
    queue.counters_.granted = counters.uint("granted");
    queue.counters_.requeued = counters.uint("requeued");
    queue.counters_.late = counters.uint("late");
    queue.counters_.duplicate = counters.uint("duplicate");
    // Absent in the snapshots of a coordinator before lease release.
    queue.counters_.released = counters.uint_or("released", 0);
    return queue;
}

}  // namespace cohort::coord
