// Job: the rendezvous rules as questions (which round can close, can the
// world grow) and the events applied to one job.
#include "coordinator/state/job.hpp"

#include "core/text.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace cohort::coord {

std::string_view to_string(StoreOp op) noexcept {
    switch (op) {
        case StoreOp::set:
            return "set";
        case StoreOp::get:
            return "get";
        case StoreOp::add:
            return "add";
        case StoreOp::compare_and_set:
            return "compare_and_set";
        case StoreOp::wait:
            return "wait";
        case StoreOp::remove:
            return "delete";
    }
    return "?";
}

Job::Job(std::string name, JobSettings settings, double created_at)
    : name_(std::move(name)),
      settings_(settings),
      created_at_(created_at),
      round_opened_at_(created_at),
      last_arrival_(created_at),
      history_(created_at) {}

std::string_view Job::phase() const {
    if (!round_open_) return "running";
    return world_.generation == 0 ? "forming" : "rendezvous";
}

const Member* Job::find_member(std::string_view id) const {
    const auto it = members_.find(id);
    return it == members_.end() ? nullptr : &it->second;
}

void Job::tally(const Member& m, int sign) {
    counts_[static_cast<std::size_t>(m.state)] += static_cast<uint32_t>(sign);
    if (is_survivor(m)) survivors_waiting_ += static_cast<uint32_t>(sign);
}

void Job::tally_all() {
    counts_ = {};
    survivors_waiting_ = 0;
    for (const auto& [id, m] : members_) tally(m, +1);
}

bool Job::is_survivor(const Member& m) const {
    return m.state == MemberState::waiting && world_.generation > 0 && m.generation == world_.generation;
}

std::optional<double> Job::closes_at() const {
    if (!round_open_) return std::nullopt;
    const uint32_t waiting = count(MemberState::waiting);
    const uint32_t size = settings_.world_for(waiting);
    if (size == 0 || size < settings_.min_nodes) return std::nullopt;
    if (waiting >= settings_.largest_world()) return last_arrival_;
    // A round that replaces a running world closes as soon as every live
    // member of that world is back (none is still active or stale): the
    // members it is for are all here, and last_call would only keep the
    // survivors idle after a failure, a leave or a scale-up.
    if (world_.generation > 0 && count(MemberState::active) == 0 && count(MemberState::stale) == 0) {
        return last_arrival_;
    }
    // While members of the running world have not rejoined, give them two
    // heartbeats to learn of the round, even with last_call 0: closing at
    // once would form a world of the newcomers alone and leave the running
    // world's members stale.
    if (world_.generation > 0 && count(MemberState::active) > 0) {
        return std::max(last_arrival_ + settings_.last_call, round_opened_at_ + 2 * settings_.heartbeat_interval);
    }
    return last_arrival_ + settings_.last_call;
}

std::optional<std::vector<std::string>> Job::closing_round(double now) const {
    const auto at = closes_at();
    if (!at || now < *at) return std::nullopt;
    std::vector<const Member*> survivors;
    std::vector<const Member*> newcomers;
    for (const auto& [id, m] : members_) {
        if (m.state == MemberState::waiting) (is_survivor(m) ? survivors : newcomers).push_back(&m);
    }
    std::sort(survivors.begin(), survivors.end(), [](const Member* a, const Member* b) { return a->rank < b->rank; });
    std::sort(newcomers.begin(), newcomers.end(), [](const Member* a, const Member* b) {
        if (a->joined_at != b->joined_at) return a->joined_at < b->joined_at;
        return detail::natural_less(a->node.id, b->node.id);
    });
    const std::size_t size = settings_.world_for(survivors.size() + newcomers.size());
    std::vector<Node> old_nodes;
    std::vector<Node> new_nodes;
    for (const Member* m : survivors) {
        if (old_nodes.size() < size) old_nodes.push_back(m->node);
    }
    for (const Member* m : newcomers) {
        if (old_nodes.size() + new_nodes.size() < size) new_nodes.push_back(m->node);
    }
    return stable_rank_order(old_nodes, new_nodes);
}

bool Job::can_grow() const {
    if (round_open_ || world_.generation == 0) return false;
    const uint32_t active = count(MemberState::active);
    const uint32_t waiting = count(MemberState::waiting);
    return waiting > 0 && settings_.world_for(uint64_t{active} + waiting) > active;
}

Member& Job::member(std::string_view id, std::string_view event) {
    const auto it = members_.find(id);
    if (it == members_.end()) {
        throw Error(Errc::invalid_argument,
                    fmt::format("job '{}': event {} names member '{}', which never joined", name_, event, id));
    }
    return it->second;
}

void Job::apply(const event::MemberJoined& e) {
    auto it = members_.find(e.node.id);
    if (it == members_.end()) {
        it = members_.emplace(e.node.id, Member{}).first;
    } else {
        tally(it->second, -1);
    }
    Member& m = it->second;
    if (!is_live(m.state)) {
        // A process that failed or left and comes back starts its steps
        // over: its old window would make it look hung, and its old step
        // would read as progress of the new process.
        windows_.erase(e.node.id);
        tracker_.forget(e.node.id);
        m.metrics.reset();
        m.metrics_at = 0;
    }
    m.node = e.node;
    m.state = MemberState::waiting;
    m.joined_at = e.time;
    m.last_heartbeat = e.time;
    m.state_since = e.time;
    m.reason.clear();
    tally(m, +1);
    last_arrival_ = std::max(last_arrival_, e.time);
    history_.joined(e.node.id, e.time);
}

void Job::apply(const event::MemberRemoved& e) {
    Member& m = member(e.member, "member_removed");
    if (!is_live(m.state) || is_live(e.state)) {
        throw Error(Errc::invalid_argument, fmt::format("job '{}': event member_removed: member '{}' is {}, not live",
                                                        name_, e.member, to_string(m.state)));
    }
    tally(m, -1);
    windows_.erase(e.member);
    tracker_.forget(e.member);
    m.state = e.state;
    m.reason = e.reason;
    m.state_since = e.time;
    tally(m, +1);
    history_.removed(e.member, e.state, e.reason, e.time);
    if (shards_) {
        for (uint64_t lease : shards_->leases_of(e.member)) shards_->requeue(lease);
    }
}

void Job::apply(const event::RoundOpened& e) {
    if (round_open_) {
        throw Error(Errc::invalid_argument,
                    fmt::format("job '{}': event round_opened: a round is already open", name_));
    }
    round_open_ = true;
    round_reason_ = e.reason;
    round_opened_at_ = e.time;
    last_arrival_ = std::max(last_arrival_, e.time);
    history_.round_opened(e.reason, e.time);
}

void Job::apply(const event::RoundClosed& e) {
    if (!round_open_ || e.generation != world_.generation + 1 || e.ranks.empty()) {
        throw Error(Errc::invalid_argument,
                    fmt::format("job '{}': event round_closed for generation {} does not follow generation {}{}", name_,
                                e.generation, world_.generation, round_open_ ? "" : " (no round is open)"));
    }
    std::vector<Node> nodes;
    for (const auto& id : e.ranks) {
        const Member& m = member(id, "round_closed");
        if (m.state != MemberState::waiting) {
            throw Error(Errc::invalid_argument,
                        fmt::format("job '{}': event round_closed: member '{}' is {}, not waiting", name_, id,
                                    to_string(m.state)));
        }
        nodes.push_back(m.node);
    }
    for (auto& [id, m] : members_) {
        if (m.state != MemberState::active) continue;
        m.state = MemberState::stale;
        m.reason = fmt::format("did not join again before generation {} formed", e.generation);
        m.state_since = e.time;
    }
    std::vector<std::string> previous;
    previous.reserve(world_.slots.size());
    for (const WorldSlot& slot : world_.slots) previous.push_back(slot.id);
    history_.round_closed(e.generation, e.ranks, previous, e.time);
    world_ = make_world(e.generation, e.time, nodes);
    for (uint32_t r = 0; r < e.ranks.size(); ++r) {
        Member& m = members_.find(e.ranks[r])->second;
        m.state = MemberState::active;
        m.generation = e.generation;
        m.rank = r;
        m.state_since = e.time;
        m.reason.clear();
    }
    rounds_.push_back(RoundRecord{e.generation, round_opened_at_, e.time, world_.size(), round_reason_});
    while (rounds_.size() > kRoundHistory) rounds_.pop_front();
    round_open_ = false;
    store_ = KeyValueStore{};
    // The last evaluation judged the old world: a hang it found is not this
    // world's (a launcher that restarted hung workers must not see it again).
    health_ = health::JobHealth{};
    tally_all();
}

void Job::apply(const event::Heartbeat& e) {
    Member& m = member(e.member, "heartbeat");
    m.last_heartbeat = std::max(m.last_heartbeat, e.time);
    ++m.heartbeats;
    if (e.metrics) {
        auto [it, fresh] = windows_.try_emplace(e.member, settings_.health);
        it->second.add(*e.metrics, e.time);
        m.metrics = e.metrics;
        m.metrics->samples.clear();  // in the window now; not kept with the member
        m.metrics_at = e.time;
    }
}

const health::NodeWindow* Job::window(std::string_view member) const {
    const auto it = windows_.find(member);
    return it == windows_.end() ? nullptr : &it->second;
}

void Job::evaluate_health(double now) {
    std::vector<health::NodeInput> nodes;
    nodes.reserve(count(MemberState::active));
    for (const auto& [id, m] : members_) {
        if (m.state != MemberState::active) continue;
        const auto it = windows_.find(id);
        if (it == windows_.end()) continue;
        nodes.push_back(health::NodeInput{id, m.rank, &it->second});
    }
    health_ = tracker_.evaluate(nodes, now, settings_.health);
    if (history_.due(now)) sample_history(now);
}

void Job::apply(const event::StoreSet& e) {
    if (e.generation != world_.generation) {
        throw Error(Errc::invalid_argument, fmt::format("job '{}': event store_set for generation {} at generation {}",
                                                        name_, e.generation, world_.generation));
    }
    store_.set(e.key, e.value);
}

void Job::apply(const event::StoreRemoved& e) {
    if (e.generation != world_.generation) {
        throw Error(Errc::invalid_argument,
                    fmt::format("job '{}': event store_removed for generation {} at generation {}", name_, e.generation,
                                world_.generation));
    }
    store_.remove(e.key);
}

void Job::apply(const event::DatasetRegistered& e) {
    if (shards_) {
        throw Error(Errc::invalid_argument,
                    fmt::format("job '{}': event dataset_registered: the job has a plan", name_));
    }
    shards_.emplace(e.plan);
}

void Job::apply(const event::LeaseGranted& e) {
    member(e.lease.member, "lease_granted");
    if (!shards_)
        throw Error(Errc::invalid_argument, fmt::format("job '{}': event lease_granted: no dataset plan", name_));
    shards_->grant(e.lease);
}

void Job::apply(const event::LeaseCompleted& e) {
    if (!shards_)
        throw Error(Errc::invalid_argument, fmt::format("job '{}': event lease_completed: no dataset plan", name_));
    shards_->complete(e.lease);
}

void Job::apply(const event::LeaseExpired& e) {
    if (!shards_)
        throw Error(Errc::invalid_argument, fmt::format("job '{}': event lease_expired: no dataset plan", name_));
    shards_->requeue(e.lease);
}

void Job::apply(const event::LeaseReleased& e) {
    if (!shards_)
        throw Error(Errc::invalid_argument, fmt::format("job '{}': event lease_released: no dataset plan", name_));
    shards_->release(e.lease, e.member);
}

void Job::apply(const event::Resumed& e) {
    for (auto& [id, m] : members_) {
        if (is_live(m.state)) m.last_heartbeat = std::max(m.last_heartbeat, e.time);
    }
    last_arrival_ = std::max(last_arrival_, e.time);
    if (shards_) shards_->extend_leases(e.time);
    history_.resumed(e.time);
}

}  // namespace cohort::coord
