// ShardQueue: which shard goes next, and the accounting that makes every
// shard count once.
#include "coordinator/state/shard_queue.hpp"

#include <cohort/epoch.hpp>

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

namespace cohort::coord {

namespace {

// How many queued shards are looked at for one on the member's host: enough
// to find one when placements are spread evenly, bounded so a pick stays cheap.
constexpr uint64_t kLocalityWindow = 64;

[[noreturn]] void bad_event(std::string_view what) {
    throw Error(Errc::invalid_argument, fmt::format("shard queue: {}", what));
}

}  // namespace

std::string_view to_string(DoneOutcome outcome) noexcept {
    switch (outcome) {
        case DoneOutcome::counted:
            return "counted";
        case DoneOutcome::counted_late:
            return "counted_late";
        case DoneOutcome::already_done:
            return "already_done";
    }
    return "?";
}

ShardQueue::ShardQueue(DatasetPlan plan) : plan_(std::move(plan)) {
    validate(plan_);
    placed_ =
        std::any_of(plan_.shards.begin(), plan_.shards.end(), [](const ShardSpec& s) { return !s.hosts.empty(); });
}

std::vector<uint64_t> ShardQueue::make_order(uint32_t epoch) const {
    const uint64_t n = plan_.shards.size();
    if (plan_.shuffle) return epoch_permutation(n, plan_.seed, epoch);
    std::vector<uint64_t> order(n);
    std::iota(order.begin(), order.end(), uint64_t{0});
    return order;
}

bool ShardQueue::is_local(uint64_t shard, std::string_view host) const {
    const auto& hosts = plan_.shards[shard].hosts;
    return std::find(hosts.begin(), hosts.end(), host) != hosts.end();
}

uint64_t ShardQueue::pick_fresh(const std::vector<uint64_t>& order, std::string_view host) const {
    if (placed_ && !host.empty()) {
        for (uint64_t i = 0; i < order.size() && i < kLocalityWindow; ++i) {
            if (is_local(order[i], host)) return order[i];
        }
    }
    return order.front();
}

std::optional<uint64_t> ShardQueue::pick_in(const Epoch& e, std::string_view host) const {
    if (e.complete || e.leased + e.done == e.status.size()) return std::nullopt;
    const auto todo = [&](uint64_t shard) { return e.status[shard] == Status::todo; };
    if (placed_ && !host.empty()) {
        for (uint64_t i = 0; i < e.returned.size() && i < kLocalityWindow; ++i) {
            if (todo(e.returned[i]) && is_local(e.returned[i], host)) return e.returned[i];
        }
        for (uint64_t p = e.cursor; p < e.order.size() && p < e.cursor + kLocalityWindow; ++p) {
            if (todo(e.order[p]) && is_local(e.order[p], host)) return e.order[p];
        }
    }
    // normalise() keeps both fronts on a todo shard.
    if (!e.returned.empty()) return e.returned.front();
    return e.order[e.cursor];
}

std::optional<ShardPick> ShardQueue::pick(std::string_view host) const {
    for (uint32_t e = first_open_; e < plan_.epochs && e <= first_open_ + 1; ++e) {
        if (e >= epochs_.size()) return ShardPick{e, pick_fresh(make_order(e), host)};
        if (auto shard = pick_in(epochs_[e], host)) return ShardPick{e, *shard};
    }
    return std::nullopt;
}

const Lease* ShardQueue::find_revoked(uint64_t id) const {
    const auto it = revoked_.find(id);
    return it == revoked_.end() ? nullptr : &it->second;
}

bool ShardQueue::shard_done(uint32_t epoch, uint64_t shard) const {
    if (epoch >= epochs_.size()) return false;
    const Epoch& e = epochs_[epoch];
    return e.complete || e.status[shard] == Status::done;
}

DoneOutcome ShardQueue::outcome_of(uint64_t id) const {
    if (const auto it = leases_.find(id); it != leases_.end()) {
        return shard_done(it->second.epoch, it->second.shard) ? DoneOutcome::already_done : DoneOutcome::counted;
    }
    if (const Lease* lease = find_revoked(id)) {
        return shard_done(lease->epoch, lease->shard) ? DoneOutcome::already_done : DoneOutcome::counted_late;
    }
    return DoneOutcome::already_done;
}

std::vector<uint64_t> ShardQueue::leases_of(std::string_view member) const {
    std::vector<uint64_t> out;
    for (const auto& [id, lease] : leases_) {
        if (lease.member == member) out.push_back(id);
    }
    return out;
}

std::vector<EpochProgress> ShardQueue::progress() const {
    const uint64_t n = plan_.shards.size();
    std::vector<EpochProgress> out;
    out.reserve(plan_.epochs);
    for (uint32_t e = 0; e < plan_.epochs; ++e) {
        EpochProgress p{e, n, n, 0, 0};
        if (e < epochs_.size()) {
            const Epoch& state = epochs_[e];
            p.done = state.complete ? n : state.done;
            p.leased = state.complete ? 0 : state.leased;
            p.todo = n - p.done - p.leased;
        }
        out.push_back(p);
    }
    return out;
}

void ShardQueue::normalise(Epoch& e) {
    while (!e.returned.empty() && e.status[e.returned.front()] != Status::todo) e.returned.pop_front();
    while (e.cursor < e.order.size() && e.status[e.order[e.cursor]] != Status::todo) ++e.cursor;
}

void ShardQueue::grant(const Lease& lease) {
    if (lease.id != next_lease_)
        bad_event(fmt::format("lease {} granted, but the next lease is {}", lease.id, next_lease_));
    if (lease.shard >= plan_.shards.size()) bad_event(fmt::format("lease {}: no shard {}", lease.id, lease.shard));
    if (lease.epoch >= plan_.epochs || lease.epoch > epochs_.size()) {
        bad_event(fmt::format("lease {}: epoch {} cannot start now", lease.id, lease.epoch));
    }
    if (lease.epoch == epochs_.size()) {
        Epoch fresh;
        fresh.status.assign(plan_.shards.size(), Status::todo);
        fresh.order = make_order(lease.epoch);
        epochs_.push_back(std::move(fresh));
    }
    Epoch& e = epochs_[lease.epoch];
    if (e.complete || e.status[lease.shard] != Status::todo) {
        bad_event(
            fmt::format("lease {}: shard {} of epoch {} is not in the queue", lease.id, lease.shard, lease.epoch));
    }
    e.status[lease.shard] = Status::leased;
    ++e.leased;
    normalise(e);
    leases_.emplace(lease.id, lease);
    next_lease_ = lease.id + 1;
    ++counters_.granted;
}

void ShardQueue::mark_done(uint32_t epoch, uint64_t shard) {
    Epoch& e = epochs_[epoch];
    if (e.status[shard] == Status::leased) --e.leased;
    e.status[shard] = Status::done;
    ++e.done;
    normalise(e);
    if (e.done < e.status.size()) return;
    // Complete: keep the counts, drop the per-shard state.
    e = Epoch{};
    e.complete = true;
    std::erase_if(revoked_, [&](const auto& entry) { return entry.second.epoch == epoch; });
    while (first_open_ < epochs_.size() && epochs_[first_open_].complete) ++first_open_;
}

DoneOutcome ShardQueue::complete(uint64_t id) {
    const DoneOutcome outcome = outcome_of(id);
    Lease lease;
    if (auto it = leases_.find(id); it != leases_.end()) {
        lease = std::move(it->second);
        leases_.erase(it);
    } else if (auto rt = revoked_.find(id); rt != revoked_.end()) {
        lease = std::move(rt->second);
        revoked_.erase(rt);
    } else if (id >= next_lease_) {
        bad_event(fmt::format("lease {} was never granted", id));
    }
    switch (outcome) {
        case DoneOutcome::already_done:
            ++counters_.duplicate;
            break;
        case DoneOutcome::counted_late:
            ++counters_.late;
            [[fallthrough]];
        case DoneOutcome::counted:
            mark_done(lease.epoch, lease.shard);
            break;
    }
    return outcome;
}

void ShardQueue::requeue(uint64_t id) {
    const auto it = leases_.find(id);
    if (it == leases_.end()) bad_event(fmt::format("lease {} is not outstanding", id));
    Lease lease = std::move(it->second);
    leases_.erase(it);
    // A shard someone else already reported needs nothing more.
    if (shard_done(lease.epoch, lease.shard)) return;
    Epoch& e = epochs_[lease.epoch];
    e.status[lease.shard] = Status::todo;
    --e.leased;
    e.returned.push_back(lease.shard);
    normalise(e);
    ++counters_.requeued;
    revoked_.emplace(id, std::move(lease));
}

void ShardQueue::release(uint64_t id, std::string_view member) {
    const auto it = leases_.find(id);
    if (it == leases_.end()) bad_event(fmt::format("lease {} is not outstanding", id));
    if (it->second.member != member)
        bad_event(fmt::format("lease {} is held by '{}', not '{}'", id, it->second.member, member));
    requeue(id);
    ++counters_.released;
}

void ShardQueue::extend_leases(double time) {
    for (auto& [id, lease] : leases_) lease.expiry = std::max(lease.expiry, time + plan_.lease_duration);
}

}  // namespace cohort::coord
