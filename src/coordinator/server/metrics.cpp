// GET /metrics: the state's per-job figures and the server's own
// (heartbeat latency, responses) in Prometheus' text format.
#include "coordinator/server/server.hpp"

#include <fmt/format.h>

namespace cohort {

namespace {

// Label values are quoted: backslash, quote and newline are escaped.
std::string label(std::string_view value) {
    std::string out;
    for (char c : value) {
        if (c == '\\' || c == '"') out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out;
}

void header(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

}  // namespace

std::string Coordinator::Impl::prometheus() const {
    const std::vector<coord::JobMetrics> jobs = state.metrics();
    std::string out;
    header(out, "cohort_coordinator_jobs", "gauge", "Jobs the coordinator serves.");
    out += fmt::format("cohort_coordinator_jobs {}\n", jobs.size());

    header(out, "cohort_coordinator_members", "gauge", "Members of each job by state.");
    for (const auto& m : jobs) {
        for (int s = 0; s < coord::kMemberStateCount; ++s) {
            out += fmt::format("cohort_coordinator_members{{job=\"{}\",state=\"{}\"}} {}\n", label(m.job),
                               coord::to_string(static_cast<coord::MemberState>(s)), m.members[s]);
        }
    }
    header(out, "cohort_coordinator_generation", "gauge", "The generation of each job's current world.");
    for (const auto& m : jobs) {
        out += fmt::format("cohort_coordinator_generation{{job=\"{}\"}} {}\n", label(m.job), m.generation);
    }
    header(out, "cohort_coordinator_rounds_total", "counter", "Rounds closed in each job.");
    for (const auto& m : jobs) {
        out += fmt::format("cohort_coordinator_rounds_total{{job=\"{}\"}} {}\n", label(m.job), m.generation);
    }
    header(out, "cohort_coordinator_store_ops_total", "counter",
           "Key-value store calls served for each job since this process started, by operation.");
    for (const auto& m : jobs) {
        for (int op = 0; op < coord::kStoreOpCount; ++op) {
            out += fmt::format("cohort_coordinator_store_ops_total{{job=\"{}\",op=\"{}\"}} {}\n", label(m.job),
                               coord::to_string(static_cast<coord::StoreOp>(op)), m.store_ops[op]);
        }
    }
    header(out, "cohort_coordinator_store_keys", "gauge", "Keys in the store of each job's current generation.");
    for (const auto& m : jobs) {
        out += fmt::format("cohort_coordinator_store_keys{{job=\"{}\"}} {}\n", label(m.job), m.store_keys);
    }
    header(out, "cohort_coordinator_shards", "gauge", "Dataset shards of each job by status, summed over epochs.");
    for (const auto& m : jobs) {
        out += fmt::format(
            "cohort_coordinator_shards{{job=\"{0}\",status=\"todo\"}} {1}\n"
            "cohort_coordinator_shards{{job=\"{0}\",status=\"leased\"}} {2}\n"
            "cohort_coordinator_shards{{job=\"{0}\",status=\"done\"}} {3}\n",
            label(m.job), m.shards_todo, m.shards_leased, m.shards_done);
    }
    header(out, "cohort_coordinator_job_hung", "gauge",
           "1 while every active member of the job has stopped stepping for the health hang_timeout.");
    for (const auto& m : jobs) {
        out += fmt::format("cohort_coordinator_job_hung{{job=\"{}\"}} {}\n", label(m.job), m.hung ? 1 : 0);
    }
    header(out, "cohort_coordinator_straggler_score", "gauge",
           "Each active member's step rate against the job's median (1: as fast), over its heartbeat window.");
    for (const auto& m : jobs) {
        for (const auto& n : m.nodes) {
            out += fmt::format("cohort_coordinator_straggler_score{{job=\"{}\",member=\"{}\"}} {:.4f}\n", label(m.job),
                               label(n.member), n.score);
        }
    }
    header(out, "cohort_coordinator_member_straggler", "gauge",
           "1 for a member whose straggler score has stayed under the threshold for straggler_for.");
    header(out, "cohort_coordinator_member_hung", "gauge",
           "1 for a member whose step has not advanced for hang_timeout.");
    for (const auto& m : jobs) {
        for (const auto& n : m.nodes) {
            if (n.straggler) {
                out += fmt::format("cohort_coordinator_member_straggler{{job=\"{}\",member=\"{}\"}} 1\n", label(m.job),
                                   label(n.member));
            }
            if (n.hung) {
                out += fmt::format("cohort_coordinator_member_hung{{job=\"{}\",member=\"{}\"}} 1\n", label(m.job),
                                   label(n.member));
            }
        }
    }
    header(out, "cohort_coordinator_shard_leases_total", "counter",
           "Shard leases of each job: granted, requeued (expired or member gone), late and duplicate reports.");
    for (const auto& m : jobs) {
        out += fmt::format(
            "cohort_coordinator_shard_leases_total{{job=\"{0}\",event=\"granted\"}} {1}\n"
            "cohort_coordinator_shard_leases_total{{job=\"{0}\",event=\"requeued\"}} {2}\n"
            "cohort_coordinator_shard_leases_total{{job=\"{0}\",event=\"late\"}} {3}\n"
            "cohort_coordinator_shard_leases_total{{job=\"{0}\",event=\"duplicate\"}} {4}\n",
            label(m.job), m.leases.granted, m.leases.requeued, m.leases.late, m.leases.duplicate);
    }
    out += heartbeat_latency.prometheus("cohort_coordinator_heartbeat_seconds",
                                        "Time the coordinator took to handle a heartbeat request.");
    header(out, "cohort_coordinator_responses_total", "counter", "HTTP responses sent, by status class.");
    for (std::size_t c = 1; c < responses.size(); ++c) {
        out += fmt::format("cohort_coordinator_responses_total{{class=\"{}xx\"}} {}\n", c, responses[c]);
    }
    header(out, "cohort_coordinator_connections", "gauge", "Open client connections.");
    out += fmt::format("cohort_coordinator_connections {}\n", sessions.size());
    header(out, "cohort_coordinator_connections_idle", "gauge", "Open connections waiting for a request.");
    out += fmt::format("cohort_coordinator_connections_idle {}\n", gate.idle());
    header(out, "cohort_coordinator_connections_max", "gauge", "The most connections open at once (max_connections).");
    out += fmt::format("cohort_coordinator_connections_max {}\n", options.max_connections);
    header(out, "cohort_coordinator_connections_per_client_max", "gauge",
           "The most connections open at once from one address (max_connections_per_client).");
    out += fmt::format("cohort_coordinator_connections_per_client_max {}\n", options.max_connections_per_client);
    header(out, "cohort_coordinator_connections_refused_total", "counter",
           "Connections closed as soon as accepted, by reason: at max_connections with none idle, at "
           "max_connections_per_client, or out of file descriptors.");
    for (int r = 0; r < coord::server::kRefusalCount; ++r) {
        const auto why = static_cast<coord::server::Refusal>(r);
        out += fmt::format("cohort_coordinator_connections_refused_total{{reason=\"{}\"}} {}\n", to_string(why),
                           gate.refusals(why));
    }
    header(out, "cohort_coordinator_connections_shed_total", "counter",
           "Idle connections closed early to make room: idle past crowded_idle_timeout while crowded, or the "
           "longest idle one at max_connections when another arrived.");
    out += fmt::format("cohort_coordinator_connections_shed_total{{reason=\"crowded_idle\"}} {}\n", gate.shed_total());
    out +=
        fmt::format("cohort_coordinator_connections_shed_total{{reason=\"displaced\"}} {}\n", gate.displaced_total());
    header(out, "cohort_coordinator_parked_requests", "gauge", "Store gets and waits waiting for keys.");
    std::size_t waiting = 0;
    for (const auto& [job, list] : parked) waiting += list.reads.size();
    out += fmt::format("cohort_coordinator_parked_requests {}\n", waiting);
    header(out, "cohort_coordinator_idempotent_replays_total", "counter",
           "Retries answered with the first answer to their Idempotency-Key instead of being applied again.");
    out += fmt::format("cohort_coordinator_idempotent_replays_total {}\n", replayed);
    header(out, "cohort_coordinator_idempotency_keys", "gauge",
           "Idempotency keys whose first answers are kept (at most idempotency_keys, for idempotency_window).");
    out += fmt::format("cohort_coordinator_idempotency_keys {}\n", state.answers().size());
    if (durable) {
        const coord::JournalStats journal = durable->stats();
        header(out, "cohort_coordinator_journal_seq", "gauge", "The newest journaled event's sequence number.");
        out += fmt::format("cohort_coordinator_journal_seq {}\n", journal.last_seq);
        header(out, "cohort_coordinator_journal_events_total", "counter", "Events journaled by this process.");
        out += fmt::format("cohort_coordinator_journal_events_total {}\n", journal.events);
        header(out, "cohort_coordinator_journal_bytes_total", "counter", "Journal bytes written by this process.");
        out += fmt::format("cohort_coordinator_journal_bytes_total {}\n", journal.bytes);
        header(out, "cohort_coordinator_journal_syncs_total", "counter", "Journal fsyncs by this process.");
        out += fmt::format("cohort_coordinator_journal_syncs_total {}\n", journal.syncs);
        header(out, "cohort_coordinator_snapshots_total", "counter", "Snapshots written by this process.");
        out += fmt::format("cohort_coordinator_snapshots_total {}\n", journal.snapshots);
    }
    return out;
}

}  // namespace cohort

namespace cohort::coord::server {

void LatencyHistogram::record(double seconds) {
    std::size_t i = 0;
    while (i < kBounds.size() && seconds > kBounds[i]) ++i;
    ++counts_[i];
    sum_ += seconds;
    ++count_;
}

std::string LatencyHistogram::prometheus(std::string_view name, std::string_view help) const {
    std::string out = fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
    uint64_t cumulative = 0;
    for (std::size_t i = 0; i < kBounds.size(); ++i) {
        cumulative += counts_[i];
        out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, kBounds[i], cumulative);
    }
    out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count_, name, sum_, name, count_);
    return out;
}

}  // namespace cohort::coord::server
