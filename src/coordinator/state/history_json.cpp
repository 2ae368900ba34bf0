// GET /v1/jobs/{job}/history: the query it takes and the JSON it answers.
// Series are columns (one array per field, the same length as "time"), so
// a member's 120 points cost one key each, not 120; numbers are rounded to
// four significant digits and times to milliseconds, and a missing value
// is null.
#include "coordinator/state/history.hpp"

#include "core/text.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include <fmt/format.h>
#include <boost/json/array.hpp>

namespace cohort::coord {

namespace json = boost::json;

namespace {

double round_digits(double v, int digits) {
    if (v == 0 || !std::isfinite(v)) return v;
    const int places = digits - 1 - static_cast<int>(std::floor(std::log10(std::fabs(v))));
    if (places >= 0) {
        const double scale = std::pow(10.0, places);
        return std::round(v * scale) / scale;
    }
    const double scale = std::pow(10.0, -places);
    return std::round(v / scale) * scale;
}

json::value value(float v) {
    if (!std::isfinite(v)) return nullptr;
    return round_digits(static_cast<double>(v), 4);
}

double time_value(double t) {
    return std::round(t * 1000.0) / 1000.0;
}

json::object names(const NamedCount& n) {
    json::object o;
    o["ids"] = json::array(n.ids.begin(), n.ids.end());
    o["count"] = n.count;
    return o;
}

json::object round_json(const RoundEntry& r, bool open) {
    json::object o;
    o["generation"] = r.generation;
    o["open"] = open;
    o["opened_at"] = time_value(r.opened_at);
    if (r.closed_at) o["closed_at"] = time_value(*r.closed_at);
    o["reason"] = r.reason;
    o["world_size"] = r.world_size;
    o["joined"] = names(r.joined);
    o["failed"] = names(r.failed);
    o["left"] = names(r.left);
    return o;
}

// Columns of `points` after `since`: field(point) for each.
template <class Point, class F>
json::array column(const std::deque<Point>& points, std::size_t first, F&& field) {
    json::array a;
    a.reserve(points.size() - first);
    for (std::size_t i = first; i < points.size(); ++i) a.push_back(field(points[i]));
    return a;
}

template <class Point>
std::size_t first_after(const std::deque<Point>& points, double since) {
    const auto it =
        std::upper_bound(points.begin(), points.end(), since, [](double t, const Point& p) { return t < p.time; });
    return static_cast<std::size_t>(it - points.begin());
}

json::object series_json(const std::deque<JobPoint>& s, double since) {
    const std::size_t f = first_after(s, since);
    json::object o;
    o["time"] = column(s, f, [](const JobPoint& p) { return json::value(time_value(p.time)); });
    o["active"] = column(s, f, [](const JobPoint& p) { return json::value(p.active); });
    o["waiting"] = column(s, f, [](const JobPoint& p) { return json::value(p.waiting); });
    o["step_time_p50"] = column(s, f, [](const JobPoint& p) { return value(p.step_time_p50); });
    o["step_time_p90"] = column(s, f, [](const JobPoint& p) { return value(p.step_time_p90); });
    o["step_time_max"] = column(s, f, [](const JobPoint& p) { return value(p.step_time_max); });
    o["samples_per_sec"] = column(s, f, [](const JobPoint& p) { return value(p.samples_per_sec); });
    o["shards_todo"] = column(s, f, [](const JobPoint& p) { return json::value(p.shards_todo); });
    o["shards_leased"] = column(s, f, [](const JobPoint& p) { return json::value(p.shards_leased); });
    o["shards_done"] = column(s, f, [](const JobPoint& p) { return json::value(p.shards_done); });
    o["stragglers"] = column(s, f, [](const JobPoint& p) { return json::value(p.stragglers); });
    o["hung"] = column(s, f, [](const JobPoint& p) { return json::value(p.hung); });
    return o;
}

json::object member_json(std::string_view id, const std::deque<MemberPoint>& ring, double since) {
    const std::size_t f = first_after(ring, since);
    json::object o;
    o["id"] = id;
    o["time"] = column(ring, f, [](const MemberPoint& p) { return json::value(time_value(p.time)); });
    o["step"] = column(ring, f, [](const MemberPoint& p) { return json::value(p.step); });
    o["step_time"] = column(ring, f, [](const MemberPoint& p) { return value(p.step_time); });
    o["samples_per_sec"] = column(ring, f, [](const MemberPoint& p) { return value(p.samples_per_sec); });
    o["score"] = column(ring, f, [](const MemberPoint& p) { return value(p.score); });
    o["straggler"] = column(ring, f, [](const MemberPoint& p) { return json::value(p.straggler); });
    // GPU columns only for a member whose heartbeats carried GPU samples.
    const bool gpu = std::any_of(ring.begin() + static_cast<std::ptrdiff_t>(f), ring.end(), [](const MemberPoint& p) {
        return std::isfinite(p.gpu_memory_used) || std::isfinite(p.gpu_utilization) || std::isfinite(p.gpu_temperature);
    });
    if (gpu) {
        o["gpu_memory_used"] = column(ring, f, [](const MemberPoint& p) { return value(p.gpu_memory_used); });
        o["gpu_memory_total"] = column(ring, f, [](const MemberPoint& p) { return value(p.gpu_memory_total); });
        o["gpu_utilization"] = column(ring, f, [](const MemberPoint& p) { return value(p.gpu_utilization); });
        o["gpu_temperature"] = column(ring, f, [](const MemberPoint& p) { return value(p.gpu_temperature); });
    }
    return o;
}

}  // namespace

HistoryQuery history_query(const std::map<std::string, std::string, std::less<>>& query, std::string_view where) {
    HistoryQuery q;
    bool limit_given = false;
    for (const auto& [key, text] : query) {
        if (key == "since") {
            const char* end = text.data() + text.size();
            const auto [ptr, ec] = std::from_chars(text.data(), end, q.since);
            if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(q.since) || q.since < 0) {
                throw Error(Errc::invalid_argument,
                            fmt::format("{}: since must be a time in seconds (a number, 0 or more, as \"now\" in an "
                                        "earlier answer), not {}",
                                        where, detail::quote(text)));
            }
        } else if (key == "members") {
            if (text == "all") {
                q.members = HistoryQuery::Members::all;
            } else if (text == "none") {
                q.members = HistoryQuery::Members::none;
            } else if (text == "slowest") {
                q.members = HistoryQuery::Members::slowest;
            } else {
                throw Error(Errc::invalid_argument, fmt::format("{}: members must be all, none or slowest, not {}",
                                                                where, detail::quote(text)));
            }
        } else if (key == "limit") {
            const char* end = text.data() + text.size();
            std::size_t n = 0;
            const auto [ptr, ec] = std::from_chars(text.data(), end, n);
            if (text.empty() || ec != std::errc() || ptr != end || n < 1 || n > HistoryLimits::kMaxLimit) {
                throw Error(Errc::invalid_argument, fmt::format("{}: limit must be a whole number from 1 to {}, not {}",
                                                                where, HistoryLimits::kMaxLimit, detail::quote(text)));
            }
            q.limit = n;
            limit_given = true;
        } else {
            throw Error(Errc::invalid_argument,
                        fmt::format("{}: unknown parameter {} (this route takes since, members and limit)", where,
                                    detail::quote(key)));
        }
    }
    if (limit_given && q.members != HistoryQuery::Members::slowest) {
        throw Error(Errc::invalid_argument, fmt::format("{}: limit goes with members=slowest", where));
    }
    return q;
}

json::object JobHistory::to_json(const HistoryQuery& query, double now) const {
    json::object limits;
    limits["interval"] = HistoryLimits::kInterval;
    limits["member_points"] = capacity_;
    limits["job_points"] = HistoryLimits::kJobPoints;
    limits["rounds"] = HistoryLimits::kRounds;
    limits["events"] = HistoryLimits::kEvents;
    limits["named"] = HistoryLimits::kNamed;

    json::array rounds;
    for (const RoundEntry& r : rounds_) rounds.push_back(round_json(r, false));
    if (round_open_) rounds.push_back(round_json(open_, true));

    json::array events;
    for (auto it = std::upper_bound(events_.begin(), events_.end(), query.since,
                                    [](double t, const MemberEvent&e) { return t < e.time; });
         it != events_.end(); ++it) {
        json::object e;
        e["time"] = time_value(it->time);
        e["kind"] = to_string(it->kind);
        if (!it->member.empty()) e["member"] = it->member;
        if (!it->reason.empty()) e["reason"] = it->reason;
        events.push_back(std::move(e));
    }

    json::array members;
    if (query.members == HistoryQuery::Members::all) {
        for (const auto& [id, ring] : members_) members.push_back(member_json(id, ring, query.since));
    } else if (query.members == HistoryQuery::Members::slowest) {
        // Members sampled at the last point first, then by their latest step
        // time, slowest first (none reported: last).
        const double latest = series_.empty() ? 0 : series_.back().time;
        std::vector<std::pair<std::string_view, const std::deque<MemberPoint>*>> order;
        order.reserve(members_.size());
        for (const auto& [id, ring] : members_) order.emplace_back(id, &ring);
        const auto key = [&](const auto& entry) {
            const MemberPoint& p = entry.second->back();
            const float t = std::isfinite(p.step_time) ? p.step_time : -1.0f;
            return std::pair{p.time >= latest, t};
        };
        const std::size_t n = std::min(query.limit, order.size());
        std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n), order.end(),
                          [&](const auto& a, const auto& b) {
                              const auto ka = key(a), kb = key(b);
                              if (ka != kb) return ka > kb;
                              return a.first < b.first;
                          });
        for (std::size_t i = 0; i < n; ++i)
            members.push_back(member_json(order[i].first, *order[i].second, query.since));
    }

    json::object out;
    out["now"] = time_value(now);
    out["since"] = query.since;
    out["limits"] = std::move(limits);
    out["series"] = series_json(series_, query.since);
    out["rounds"] = std::move(rounds);
    out["events"] = std::move(events);
    out["members_total"] = members_.size();
    out["members"] = std::move(members);
    return out;
}

}  // namespace cohort::coord
