#include "job_view.hpp"

#include <cohort/error.hpp>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

namespace cohort_run {
namespace {

namespace json = boost::json;

const json::value* field(const json::object& o, std::string_view key) {
    const json::value* v = o.if_contains(key);
    return v != nullptr && !v->is_null() ? v : nullptr;
}

double number(const json::object& o, std::string_view key, double fallback = 0) {
    const json::value* v = field(o, key);
    return v != nullptr && v->is_number() ? v->to_number<double>() : fallback;
}

std::optional<uint64_t> count(const json::object& o, std::string_view key) {
    const json::value* v = field(o, key);
    if (v == nullptr || !v->is_number()) return std::nullopt;
    return v->to_number<uint64_t>();
}

std::string text(const json::object& o, std::string_view key) {
    const json::value* v = field(o, key);
    return v != nullptr && v->is_string() ? std::string(v->as_string()) : std::string();
}

bool flag(const json::object& o, std::string_view key) {
    const json::value* v = field(o, key);
    return v != nullptr && v->is_bool() && v->get_bool();
}

std::optional<Diagnosis> diagnosis(const json::object& o) {
    const json::value* v = field(o, "diagnosis");
    if (v == nullptr || !v->is_object()) return std::nullopt;
    Diagnosis d;
    d.cause = text(v->as_object(), "cause");
    d.summary = text(v->as_object(), "summary");
    if (const json::value* e = field(v->as_object(), "evidence"); e != nullptr && e->is_array()) {
        for (const json::value& item : e->as_array()) {
            if (item.is_string()) d.evidence.emplace_back(item.as_string());
        }
    }
    return d;
}

}  // namespace

JobView parse_job(const std::string& body, double) {
    boost::system::error_code ec;
    const json::value v = json::parse(body, ec);
    if (ec || !v.is_object()) throw cohort::Error(cohort::Errc::parse, "the coordinator's job state is not a JSON object");
    const json::object& o = v.as_object();
    JobView job;
    job.phase = text(o, "phase");
    job.generation = count(o, "generation").value_or(0);
    job.world_size = static_cast<uint32_t>(count(o, "world_size").value_or(0));
    if (const json::value* members = field(o, "members"); members != nullptr && members->is_array()) {
        for (const json::value& item : members->as_array()) {
            if (!item.is_object()) continue;
            const json::object& m = item.as_object();
            MemberView view;
            view.state = text(m, "state");
            if (const auto r = count(m, "rank")) view.rank = static_cast<uint32_t>(*r);
            view.step = count(m, "step");
            view.samples_per_sec = number(m, "samples_per_sec");
            view.heartbeats = count(m, "heartbeats").value_or(0);
            job.members[text(m, "id")] = std::move(view);
        }
    }
    job.world.resize(job.world_size);
    for (const auto& [id, m] : job.members) {
        if (m.state == "active" && m.rank && *m.rank < job.world.size()) job.world[*m.rank] = id;
    }
    if (const json::value* health = field(o, "health"); health != nullptr && health->is_object()) {
        const json::object& h = health->as_object();
        job.hung = flag(h, "hung");
        job.hang = diagnosis(h);
        const double now = number(h, "time");
        if (const json::value* nodes = field(h, "nodes"); nodes != nullptr && nodes->is_array()) {
            for (const json::value& item : nodes->as_array()) {
                if (!item.is_object()) continue;
                const json::object& n = item.as_object();
                const auto it = job.members.find(text(n, "member"));
                if (it == job.members.end()) continue;
                MemberView& m = it->second;
                if (const json::value* s = field(n, "relative_score"); s != nullptr && s->is_number()) {
                    m.straggler_score = s->to_number<double>();
                }
                m.straggler = flag(n, "straggler");
                if (field(n, "slow_since") != nullptr) m.slow_for = now - number(n, "slow_since");
                m.hung = flag(n, "hung");
                m.diagnosis = diagnosis(n);
            }
        }
    }
    if (const json::value* shards = field(o, "shards"); shards != nullptr && shards->is_object()) {
        const json::object& s = shards->as_object();
        job.shards_finished = flag(s, "finished");
        job.duplicate_reports = count(s, "duplicate_reports").value_or(0);
        if (const json::value* epochs = field(s, "epochs"); epochs != nullptr && epochs->is_array()) {
            for (const json::value& item : epochs->as_array()) {
                if (!item.is_object()) continue;
                const json::object& e = item.as_object();
                job.epochs.push_back({static_cast<uint32_t>(count(e, "epoch").value_or(0)),
                                      count(e, "total").value_or(0), count(e, "done").value_or(0)});
            }
        }
    }
    return job;
}

}  // namespace cohort_run
