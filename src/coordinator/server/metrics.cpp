// GET /metrics: the state's per-job figures and the server's own
// (heartbeat latency, responses) in Prometheus' text format.
#include "coordinator/server/server.hpp"

#include "coordinator/server/exposition.hpp"

#include <fmt/format.h>

namespace cohort {

namespace {

using coord::server::family;
using coord::server::histogram_series;
using coord::server::label_text;

// Each job's steps, rounds and removals. Three series per active member
// here and three health gauges below: at 10,000 members a scrape holds
// 60,000 member series (docs/metrics.md, "Cardinality"); the per-job
// histograms cost the same at any size.
void job_families(std::string& out, const std::vector<coord::JobMetrics>& jobs) {
    family(out, "cohort_coordinator_member_steps_total", "counter",
           "The step each active member last reported: rate() of it is the member's steps per second.");
    for (const auto& m : jobs) {
        for (const auto& s : m.steps) {
            out += fmt::format("cohort_coordinator_member_steps_total{{job={},member={}}} {}\n", label_text(m.job),
                               label_text(s.member), s.step);
        }
    }
    family(out, "cohort_coordinator_member_step_seconds", "gauge", "The latest step time each active member reported.");
    for (const auto& m : jobs) {
        for (const auto& s : m.steps) {
            if (!s.step_time) continue;
            out += fmt::format("cohort_coordinator_member_step_seconds{{job={},member={}}} {}\n", label_text(m.job),
                               label_text(s.member), *s.step_time);
        }
    }
    family(out, "cohort_coordinator_member_samples_per_second", "gauge",
           "The latest throughput each active member reported, in samples per second.");
    for (const auto& m : jobs) {
        for (const auto& s : m.steps) {
            if (!s.samples_per_sec) continue;
            out += fmt::format("cohort_coordinator_member_samples_per_second{{job={},member={}}} {}\n",
                               label_text(m.job), label_text(s.member), *s.samples_per_sec);
        }
    }
    family(out, "cohort_coordinator_step_seconds", "histogram",
           "Step times the job's members reported in heartbeats (every batched step), since this process started.");
    for (const auto& m : jobs) {
        histogram_series(out, "cohort_coordinator_step_seconds", fmt::format("job={}", label_text(m.job)),
                         m.activity.steps());
    }
    family(out, "cohort_coordinator_round_duration_seconds", "histogram",
           "How long each round stayed open, from the event that opened it to the world it formed, by why it "
           "opened; _count is the rounds closed by reason since this process started.");
    for (const auto& m : jobs) {
        for (int c = 0; c < coord::kRoundCauseCount; ++c) {
            const auto cause = static_cast<coord::RoundCause>(c);
            histogram_series(out, "cohort_coordinator_round_duration_seconds",
                             fmt::format("job={},reason=\"{}\"", label_text(m.job), coord::to_string(cause)),
                             m.activity.rounds(cause));
        }
    }
    family(out, "cohort_coordinator_member_removals_total", "counter",
           "Members that failed (silent, reported dead or by their launcher), left or timed out waiting, since "
           "this process started.");
    for (const auto& m : jobs) {
        for (const auto state : {coord::MemberState::failed, coord::MemberState::left, coord::MemberState::timed_out}) {
            out += fmt::format("cohort_coordinator_member_removals_total{{job={},state=\"{}\"}} {}\n",
                               label_text(m.job), coord::to_string(state), m.activity.removals(state));
        }
    }
}

}  // namespace

std::string Coordinator::Impl::prometheus() const {
    const std::vector<coord::JobMetrics> jobs = state.metrics();
    std::string out;
    family(out, "cohort_coordinator_jobs", "gauge", "Jobs the coordinator serves.");
    out += fmt::format("cohort_coordinator_jobs {}\n", jobs.size());

    family(out, "cohort_coordinator_members", "gauge", "Members of each job by state.");
    for (const auto& m : jobs) {
        for (int s = 0; s < coord::kMemberStateCount; ++s) {
            out += fmt::format("cohort_coordinator_members{{job={},state=\"{}\"}} {}\n", label_text(m.job),
                               coord::to_string(static_cast<coord::MemberState>(s)), m.members[s]);
        }
    }
    family(out, "cohort_coordinator_generation", "gauge", "The generation of each job's current world.");
    for (const auto& m : jobs) {
        out += fmt::format("cohort_coordinator_generation{{job={}}} {}\n", label_text(m.job), m.generation);
    }
    family(out, "cohort_coordinator_rounds_total", "counter", "Rounds closed in each job.");
    for (const auto& m : jobs) {
        out += fmt::format("cohort_coordinator_rounds_total{{job={}}} {}\n", label_text(m.job), m.generation);
    }
    family(out, "cohort_coordinator_store_ops_total", "counter",
           "Key-value store calls served for each job since this process started, by operation.");
    for (const auto& m : jobs) {
        for (int op = 0; op < coord::kStoreOpCount; ++op) {
            out += fmt::format("cohort_coordinator_store_ops_total{{job={},op=\"{}\"}} {}\n", label_text(m.job),
                               coord::to_string(static_cast<coord::StoreOp>(op)), m.store_ops[op]);
        }
    }
    family(out, "cohort_coordinator_store_keys", "gauge", "Keys in the store of each job's current generation.");
    for (const auto& m : jobs) {
        out += fmt::format("cohort_coordinator_store_keys{{job={}}} {}\n", label_text(m.job), m.store_keys);
    }
    family(out, "cohort_coordinator_shards", "gauge", "Dataset shards of each job by status, summed over epochs.");
    for (const auto& m : jobs) {
        out += fmt::format(
            "cohort_coordinator_shards{{job={0},status=\"todo\"}} {1}\n"
            "cohort_coordinator_shards{{job={0},status=\"leased\"}} {2}\n"
            "cohort_coordinator_shards{{job={0},status=\"done\"}} {3}\n",
            label_text(m.job), m.shards_todo, m.shards_leased, m.shards_done);
    }
    family(out, "cohort_coordinator_job_hung", "gauge",
           "1 while every active member of the job has stopped stepping for the health hang_timeout.");
    for (const auto& m : jobs) {
        out += fmt::format("cohort_coordinator_job_hung{{job={}}} {}\n", label_text(m.job), m.hung ? 1 : 0);
    }
    family(out, "cohort_coordinator_straggler_score", "gauge",
           "Each active member's step rate against the job's median (1: as fast), over its heartbeat window.");
    for (const auto& m : jobs) {
        for (const auto& n : m.nodes) {
            out += fmt::format("cohort_coordinator_straggler_score{{job={},member={}}} {:.4f}\n", label_text(m.job),
                               label_text(n.member), n.score);
        }
    }
    family(out, "cohort_coordinator_member_straggler", "gauge",
           "1 for a member whose straggler score has stayed under the threshold for straggler_for, else 0.");
    for (const auto& m : jobs) {
        for (const auto& n : m.nodes) {
            out += fmt::format("cohort_coordinator_member_straggler{{job={},member={}}} {}\n", label_text(m.job),
                               label_text(n.member), n.straggler ? 1 : 0);
        }
    }
    family(out, "cohort_coordinator_member_hung", "gauge",
           "1 for a member whose step has not advanced for hang_timeout, else 0.");
    for (const auto& m : jobs) {
        for (const auto& n : m.nodes) {
            out += fmt::format("cohort_coordinator_member_hung{{job={},member={}}} {}\n", label_text(m.job),
                               label_text(n.member), n.hung ? 1 : 0);
        }
    }
    job_families(out, jobs);
    family(out, "cohort_coordinator_shard_leases_total", "counter",
           "Shard leases of each job: granted, requeued (expired, member gone or released), released by their "
           "member, late and duplicate reports.");
    for (const auto& m : jobs) {
        out += fmt::format(
            "cohort_coordinator_shard_leases_total{{job={0},event=\"granted\"}} {1}\n"
            "cohort_coordinator_shard_leases_total{{job={0},event=\"requeued\"}} {2}\n"
            "cohort_coordinator_shard_leases_total{{job={0},event=\"late\"}} {3}\n"
            "cohort_coordinator_shard_leases_total{{job={0},event=\"duplicate\"}} {4}\n"
            "cohort_coordinator_shard_leases_total{{job={0},event=\"released\"}} {5}\n",
            label_text(m.job), m.leases.granted, m.leases.requeued, m.leases.late, m.leases.duplicate,
            m.leases.released);
    }
    family(out, "cohort_coordinator_heartbeat_seconds", "histogram",
           "Time the coordinator took to handle a heartbeat request.");
    histogram_series(out, "cohort_coordinator_heartbeat_seconds", "", heartbeat_latency);
    family(out, "cohort_coordinator_responses_total", "counter", "HTTP responses sent, by status class.");
    for (std::size_t c = 1; c < responses.size(); ++c) {
        out += fmt::format("cohort_coordinator_responses_total{{class=\"{}xx\"}} {}\n", c, responses[c]);
    }
    family(out, "cohort_coordinator_connections", "gauge", "Open client connections.");
    out += fmt::format("cohort_coordinator_connections {}\n", sessions.size());
    family(out, "cohort_coordinator_connections_idle", "gauge", "Open connections waiting for a request.");
    out += fmt::format("cohort_coordinator_connections_idle {}\n", gate.idle());
    family(out, "cohort_coordinator_connections_max", "gauge", "The most connections open at once (max_connections).");
    out += fmt::format("cohort_coordinator_connections_max {}\n", options.max_connections);
    family(out, "cohort_coordinator_connections_per_client_max", "gauge",
           "The most connections open at once from one address (max_connections_per_client).");
    out += fmt::format("cohort_coordinator_connections_per_client_max {}\n", options.max_connections_per_client);
    family(out, "cohort_coordinator_connections_refused_total", "counter",
           "Connections closed as soon as accepted, by reason: at max_connections with none idle, at "
           "max_connections_per_client, out of file descriptors, or a failed TLS handshake.");
    for (int r = 0; r < coord::server::kRefusalCount; ++r) {
        const auto why = static_cast<coord::server::Refusal>(r);
        out += fmt::format("cohort_coordinator_connections_refused_total{{reason=\"{}\"}} {}\n", to_string(why),
                           gate.refusals(why));
    }
    family(out, "cohort_coordinator_connections_shed_total", "counter",
           "Idle connections closed early to make room: idle past crowded_idle_timeout while crowded, or the "
           "longest idle one at max_connections when another arrived.");
    out += fmt::format("cohort_coordinator_connections_shed_total{{reason=\"crowded_idle\"}} {}\n", gate.shed_total());
    out +=
        fmt::format("cohort_coordinator_connections_shed_total{{reason=\"displaced\"}} {}\n", gate.displaced_total());
    family(out, "cohort_coordinator_parked_requests", "gauge", "Store gets and waits waiting for keys.");
    std::size_t waiting = 0;
    for (const auto& [job, list] : parked) waiting += list.reads.size();
    out += fmt::format("cohort_coordinator_parked_requests {}\n", waiting);
    family(out, "cohort_coordinator_idempotent_replays_total", "counter",
           "Retries answered with the first answer to their Idempotency-Key instead of being applied again.");
    out += fmt::format("cohort_coordinator_idempotent_replays_total {}\n", replayed);
    family(out, "cohort_coordinator_idempotency_keys", "gauge",
           "Idempotency keys whose first answers are kept (at most idempotency_keys, for idempotency_window).");
    out += fmt::format("cohort_coordinator_idempotency_keys {}\n", state.answers().size());
    if (durable) {
        const coord::JournalStats journal = durable->stats();
        family(out, "cohort_coordinator_journal_seq", "gauge", "The newest journaled event's sequence number.");
        out += fmt::format("cohort_coordinator_journal_seq {}\n", journal.last_seq);
        family(out, "cohort_coordinator_journal_events_total", "counter", "Events journaled by this process.");
        out += fmt::format("cohort_coordinator_journal_events_total {}\n", journal.events);
        family(out, "cohort_coordinator_journal_bytes_total", "counter", "Journal bytes written by this process.");
        out += fmt::format("cohort_coordinator_journal_bytes_total {}\n", journal.bytes);
        family(out, "cohort_coordinator_journal_syncs_total", "counter", "Journal fsyncs by this process.");
        out += fmt::format("cohort_coordinator_journal_syncs_total {}\n", journal.syncs);
        family(out, "cohort_coordinator_snapshots_total", "counter", "Snapshots written by this process.");
        out += fmt::format("cohort_coordinator_snapshots_total {}\n", journal.snapshots);
    }
    return out;
}

}  // namespace cohort
