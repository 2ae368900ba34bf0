// CoordinatorState: jobs, the event loop (emit, apply), time-driven changes
// (tick, resume) and snapshots.
#include "coordinator/state/state.hpp"

#include "coordinator/protocol/descriptor.hpp"
#include "core/json_fields.hpp"
#include "core/json_text.hpp"
#include "core/overloaded.hpp"
#include "core/text.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <boost/json/array.hpp>

namespace cohort::coord {

namespace json = boost::json;

namespace {

constexpr std::string_view kSnapshotFormat = "cohort-coordinator-state";
constexpr uint64_t kSnapshotVersion = 1;

}  // namespace

double CoordinatorState::time_of(double now) const {
    if (!std::isfinite(now))
        throw Error(Errc::invalid_argument, fmt::format("coordinator: time {} is not finite", now));
    return std::max(now, clock_);
}

const Job* CoordinatorState::find_job(std::string_view name) const {
    const auto it = jobs_.find(name);
    return it == jobs_.end() ? nullptr : &it->second;
}

const Job& CoordinatorState::job(std::string_view name) const {
    if (const Job* j = find_job(name)) return *j;
    throw Error(Errc::not_found, fmt::format("no job {} (create it first)", detail::quote(name)));
}

Job& CoordinatorState::job_for(std::string_view name) {
    return const_cast<Job&>(job(name));
}

void CoordinatorState::emit(Event event) {
    observe(event);
    apply(event);
    pending_.push_back(std::move(event));
}

void CoordinatorState::observe(const Event& event) {
    if (const auto* closed = std::get_if<event::RoundClosed>(&event)) {
        const auto it = jobs_.find(closed->job);
        if (it == jobs_.end() || !it->second.round_open()) return;
        Job& j = it->second;
        j.activity.round_closed(j.round_reason(), j.round_opened_at(), closed->time);
    } else if (const auto* gone = std::get_if<event::MemberRemoved>(&event)) {
        if (const auto it = jobs_.find(gone->job); it != jobs_.end()) it->second.activity.removed(gone->state);
    } else if (const auto* beat = std::get_if<event::Heartbeat>(&event); beat != nullptr && beat->metrics) {
        const auto it = jobs_.find(beat->job);
        if (it == jobs_.end()) return;
        JobActivity& activity = it->second.activity;
        // A batch holds every step since the last heartbeat, the latest
        // included; without one the latest is all there is.
        if (beat->metrics->samples.empty()) {
            if (beat->metrics->step_time) activity.step(*beat->metrics->step_time);
        }
        for (const StepSample& s : beat->metrics->samples) {
            if (s.step_time) activity.step(*s.step_time);
        }
    }
}

std::vector<Event> CoordinatorState::take_events() {
    std::vector<Event> out;
    out.swap(pending_);
    return out;
}

void CoordinatorState::create_job(std::string_view name, const JobSettings& settings, double now) {
    validate_name("job name", name);
    validate(settings);
    if (const Job* existing = find_job(name)) {
        if (existing->settings() == settings) return;
        throw Error(Errc::mismatch,
                    fmt::format("job '{}' exists with other settings ({}); delete it first or use its settings", name,
                                detail::to_text(to_json(existing->settings()))));
    }
    emit(event::JobCreated{std::string(name), time_of(now), settings});
}

void CoordinatorState::delete_job(std::string_view name, double now) {
    job(name);
    emit(event::JobDeleted{std::string(name), time_of(now)});
}

void CoordinatorState::apply(const Event& event) {
    clock_ = std::max(clock_, event_time(event));
    std::visit(
        detail::Overloaded{
            [&](const event::JobCreated& e) {
                if (jobs_.contains(e.job)) {
                    throw Error(Errc::invalid_argument, fmt::format("event job_created: job '{}' exists", e.job));
                }
                jobs_.emplace(e.job, Job(e.job, e.settings, e.time));
            },
            [&](const event::JobDeleted& e) {
                if (jobs_.erase(e.job) == 0) {
                    throw Error(Errc::invalid_argument, fmt::format("event job_deleted: no job '{}'", e.job));
                }
            },
            [&](const event::Resumed& e) {
                for (auto& [name, j] : jobs_) j.apply(e);
            },
            [&](const event::AnswerKept& e) { answers_.remember(e.key, e.fingerprint, e.answer, e.time); },
            [&](const auto& e) {
                const auto it = jobs_.find(e.job);
                if (it == jobs_.end()) {
                    throw Error(Errc::invalid_argument, fmt::format("event {}: no job '{}'", event_type(event), e.job));
                }
                it->second.apply(e);
            }},
        event);
}

void CoordinatorState::tick(double now) {
    const double t = time_of(now);
    for (auto& [name, j] : jobs_) {
        const JobSettings& s = j.settings();
        // Failures first: a silent member must not be admitted to a round.
        std::vector<std::pair<std::string, double>> silent;  // id, last heartbeat
        std::vector<std::string> failed_active;
        for (const auto& [id, m] : j.members()) {
            if (!is_live(m.state) || t - m.last_heartbeat < s.failure_timeout) continue;
            silent.emplace_back(id, m.last_heartbeat);
            if (m.state == MemberState::active) failed_active.push_back(id);
        }
        for (const auto& [id, last] : silent) {
            emit(event::MemberRemoved{
                name, t, id, MemberState::failed,
                fmt::format("no heartbeat for {} s (failure_timeout {} s)", t - last, s.failure_timeout)});
        }
        if (!failed_active.empty() && !j.round_open()) {
            emit(event::RoundOpened{
                name, t,
                failed_active.size() == 1
                    ? fmt::format("node '{}' failed", failed_active.front())
                    : fmt::format("{} nodes failed, '{}' and others", failed_active.size(), failed_active.front())});
        }
        settle(j, t);
        std::vector<std::string> expired;
        for (const auto& [id, m] : j.members()) {
            if (m.state == MemberState::waiting && t - m.joined_at >= s.join_timeout) expired.push_back(id);
        }
        for (const auto& id : expired) {
            emit(event::MemberRemoved{name, t, id, MemberState::timed_out,
                                      fmt::format("not admitted within join_timeout ({} s)", s.join_timeout)});
        }
        if (const ShardQueue* shards = j.shards()) {
            std::vector<uint64_t> due;
            for (const auto& [id, lease] : shards->leases()) {
                if (lease.expiry <= t) due.push_back(id);
            }
            for (uint64_t id : due) emit(event::LeaseExpired{name, t, id});
        }
    }
}

void CoordinatorState::keep_answer(std::string key, std::string fingerprint, KeptAnswer answer, double now) {
    if (!answers_.keeps(key, fingerprint, answer)) return;
    emit(event::AnswerKept{time_of(now), std::move(key), std::move(fingerprint), std::move(answer)});
}

void CoordinatorState::resume(double now) {
    emit(event::Resumed{time_of(now)});
}

std::optional<double> CoordinatorState::next_deadline() const {
    std::optional<double> next;
    const auto consider = [&](double at) { next = next ? std::min(*next, at) : at; };
    for (const auto& [name, j] : jobs_) {
        if (const auto at = j.closes_at()) consider(*at);
        for (const auto& [id, m] : j.members()) {
            if (is_live(m.state)) consider(m.last_heartbeat + j.settings().failure_timeout);
            if (m.state == MemberState::waiting) consider(m.joined_at + j.settings().join_timeout);
        }
        if (const ShardQueue* shards = j.shards()) {
            for (const auto& [id, lease] : shards->leases()) consider(lease.expiry);
        }
    }
    return next;
}

json::value CoordinatorState::snapshot() const {
    json::array jobs;
    for (const auto& [name, j] : jobs_) jobs.push_back(j.snapshot());
    return snapshot_object(&jobs);
}

json::object CoordinatorState::snapshot_without_jobs() const {
    return snapshot_object(nullptr);
}

// The members in the order snapshots have always had them.
json::object CoordinatorState::snapshot_object(json::array* jobs) const {
    json::object out;
    out["format"] = kSnapshotFormat;
    out["version"] = kSnapshotVersion;
    out["clock"] = clock_;
    if (jobs) out["jobs"] = std::move(*jobs);
    if (answers_.size() > 0) out["answers"] = answers_.to_json();
    return out;
}

CoordinatorState CoordinatorState::from_snapshot(const json::value& value) {
    detail::FieldReader reader(value, "coordinator snapshot", Errc::parse);
    reader.allow({"format", "version", "clock", "jobs", "answers"});
    if (reader.string("format") != kSnapshotFormat) {
        reader.fail("format", fmt::format("is '{}', expected '{}'", reader.string("format"), kSnapshotFormat));
    }
    if (reader.uint("version") != kSnapshotVersion) {
        reader.fail("version", fmt::format("{} is not supported (this build reads version {})", reader.uint("version"),
                                           kSnapshotVersion));
    }
    CoordinatorState state;
    state.clock_ = reader.number("clock");
    const json::array& jobs = reader.array("jobs");
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        Job j = Job::from_snapshot(jobs[i], fmt::format("coordinator snapshot: jobs[{}]", i));
        std::string name = j.name();
        if (!state.jobs_.emplace(name, std::move(j)).second) {
            reader.fail("jobs", fmt::format("job '{}' appears twice", name));
        }
    }
    if (const json::value* answers = reader.find("answers")) {
        state.answers_.from_json(*answers, "coordinator snapshot: answers");
    }
    return state;
}

void CoordinatorState::evaluate_health(double now) {
    const double t = std::max(now, clock_);
    for (auto& [name, j] : jobs_) j.evaluate_health(t);
}

std::vector<JobMetrics> CoordinatorState::metrics() const {
    std::vector<JobMetrics> out;
    for (const auto& [name, j] : jobs_) {
        JobMetrics m;
        m.job = name;
        for (const auto& [id, member] : j.members()) ++m.members[static_cast<std::size_t>(member.state)];
        m.generation = j.generation();
        m.store_ops = j.store_ops;
        m.store_keys = j.store().size();
        if (const ShardQueue* shards = j.shards()) {
            for (const EpochProgress& p : shards->progress()) {
                m.shards_todo += p.todo;
                m.shards_leased += p.leased;
                m.shards_done += p.done;
            }
            m.leases = shards->counters();
        }
        m.hung = j.health().hung;
        for (const health::NodeHealth& n : j.health().nodes) {
            if (!n.relative_score && !n.hung) continue;
            m.nodes.push_back({n.member, n.relative_score.value_or(1.0), n.straggler, n.hung});
        }
        for (const auto& [id, member] : j.members()) {
            if (member.state != MemberState::active || !member.metrics || !member.metrics->step) continue;
            m.steps.push_back({id, *member.metrics->step, member.metrics->step_time, member.metrics->samples_per_sec});
        }
        m.activity = j.activity;
        out.push_back(std::move(m));
    }
    return out;
}

}  // namespace cohort::coord
