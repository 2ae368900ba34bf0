// JobHistory: the rounds and member events as the job's events tell them,
// and the bounded rings of points.
#include "coordinator/state/history.hpp"

#include <algorithm>
#include <set>

namespace cohort::coord {

std::string_view to_string(MemberEventKind kind) noexcept {
    switch (kind) {
        case MemberEventKind::joined:
            return "joined";
        case MemberEventKind::failed:
            return "failed";
        case MemberEventKind::left:
            return "left";
        case MemberEventKind::timed_out:
            return "timed_out";
        case MemberEventKind::resumed:
            return "resumed";
    }
    return "?";
}

void NamedCount::add(std::string_view id) {
    if (ids.size() < HistoryLimits::kNamed) ids.emplace_back(id);
    ++count;
}

JobHistory::JobHistory(double created_at) {
    open_.opened_at = created_at;
    open_.reason = "job created";
}

void JobHistory::event(MemberEventKind kind, std::string_view member, std::string_view reason, double time) {
    events_.push_back(MemberEvent{time, kind, std::string(member), std::string(reason)});
    while (events_.size() > HistoryLimits::kEvents) events_.pop_front();
}

void JobHistory::joined(std::string_view member, double time) {
    event(MemberEventKind::joined, member, {}, time);
}

void JobHistory::removed(std::string_view member, MemberState state, std::string_view reason, double time) {
    // A removal while the world runs leads up to the round it opens (the
    // coordinator removes a failed member first, then opens the round), so
    // it belongs to the next round either way.
    switch (state) {
        case MemberState::failed:
            open_.failed.add(member);
            event(MemberEventKind::failed, member, reason, time);
            break;
        case MemberState::timed_out:
            open_.left.add(member);
            event(MemberEventKind::timed_out, member, reason, time);
            break;
        default:
            open_.left.add(member);
            event(MemberEventKind::left, member, reason, time);
            break;
    }
}

void JobHistory::round_opened(std::string_view reason, double time) {
    round_open_ = true;
    open_.opened_at = time;
    open_.reason = std::string(reason);
}

void JobHistory::round_closed(uint64_t generation, std::span<const std::string> ranks,
                              std::span<const std::string> previous, double time) {
    const std::set<std::string_view> before(previous.begin(), previous.end());
    RoundEntry entry = std::move(open_);
    entry.generation = generation;
    entry.closed_at = time;
    entry.world_size = static_cast<uint32_t>(ranks.size());
    for (const std::string& id : ranks) {
        if (!before.contains(id)) entry.joined.add(id);
    }
    rounds_.push_back(std::move(entry));
    while (rounds_.size() > HistoryLimits::kRounds) rounds_.pop_front();
    open_ = RoundEntry{};
    open_.opened_at = time;
    round_open_ = false;
}

void JobHistory::resumed(double time) {
    event(MemberEventKind::resumed, {}, "the coordinator started again on its saved state", time);
}

void JobHistory::restore_round(uint64_t generation, double opened_at, double closed_at, uint32_t world_size,
                               std::string_view reason) {
    RoundEntry entry;
    entry.generation = generation;
    entry.opened_at = opened_at;
    entry.closed_at = closed_at;
    entry.world_size = world_size;
    entry.reason = std::string(reason);
    rounds_.push_back(std::move(entry));
    while (rounds_.size() > HistoryLimits::kRounds) rounds_.pop_front();
    open_ = RoundEntry{};
    open_.opened_at = closed_at;
    round_open_ = false;
}

void JobHistory::add(std::string_view member, const MemberPoint& point) {
    auto it = members_.find(member);
    if (it == members_.end()) it = members_.emplace(std::string(member), std::deque<MemberPoint>{}).first;
    std::deque<MemberPoint>& ring = it->second;
    ring.push_back(point);
    while (ring.size() > capacity_) ring.pop_front();
}

void JobHistory::add(const JobPoint& point) {
    last_sample_ = point.time;
    series_.push_back(point);
    while (series_.size() > HistoryLimits::kJobPoints) series_.pop_front();

    // Members silent for as long as the job's series reaches are dropped.
    const double oldest = point.time - static_cast<double>(HistoryLimits::kJobPoints) * HistoryLimits::kInterval;
    std::erase_if(members_, [&](const auto& entry) { return entry.second.back().time < oldest; });
    if (members_.size() > HistoryLimits::kMaxMembers) {
        std::vector<std::pair<double, std::string_view>> last;
        last.reserve(members_.size());
        for (const auto& [id, ring] : members_) last.emplace_back(ring.back().time, id);
        const std::size_t extra = members_.size() - HistoryLimits::kMaxMembers;
        std::nth_element(last.begin(), last.begin() + static_cast<std::ptrdiff_t>(extra), last.end());
        std::vector<std::string> gone;
        for (std::size_t i = 0; i < extra; ++i) gone.emplace_back(last[i].second);
        for (const std::string& id : gone) members_.erase(id);
    }

    const std::size_t n = std::max<std::size_t>(members_.size(), 1);
    const std::size_t capacity =
        std::clamp(HistoryLimits::kPointBudget / n, HistoryLimits::kMinMemberPoints, HistoryLimits::kMemberPoints);
    if (capacity < capacity_) {
        for (auto& [id, ring] : members_) {
            while (ring.size() > capacity) ring.pop_front();
        }
    }
    capacity_ = capacity;
}

}  // namespace cohort::coord
