// The server as one replica of an etcd-backed coordinator: who may answer,
// and the hand-overs when this replica starts or stops leading
// (docs/coordinator.md, "High availability").
//
// Followers answer every /v1/ request but GET /v1/replica with 503
// not_leader and the leader's URL in X-Cohort-Leader, rather than
// forwarding: the clients already retry on 503 and move between URLs, so a
// redirect costs one round trip once, where forwarding would add a hop and
// a second failure mode to every request, and a leader's failure would
// strand requests inside a follower.
//
// A leader whose lease etcd has not confirmed lately (lease_confirmed_until
// has passed) cannot know whether another replica was elected meanwhile:
// - if etcd answers, it waits for the lease's verdict and answers
//   not_leader (this is the leader just woken from a long SIGSTOP);
// - if etcd cannot be reached, nobody can be elected either: it answers
//   reads and heartbeats from memory at once (liveness is not journaled;
//   a read may show a change still on its way to etcd), and refuses other
//   changes with 503 naming etcd, until etcd is back.
#include "coordinator/replication/log_writer.hpp"
#include "coordinator/server/request_body.hpp"
#include "coordinator/server/session.hpp"
#include "coordinator/server/target.hpp"
#include "core/text.hpp"
#include "etcd/config.hpp"

#include <boost/asio/post.hpp>
#include <boost/json.hpp>

#include <cstdio>
#include <memory>

#include <fmt/format.h>
#include <unistd.h>

namespace cohort {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using coord::server::error_response;
using coord::server::Response;

namespace {

std::string default_replica_id() {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
    return fmt::format("{}:{}", host[0] != '\0' ? host : "localhost", ::getpid());
}

Response not_leader(const std::string& leader, std::string_view why) {
    Response r = error_response(
        503, "not_leader",
        leader.empty() ? fmt::format("this coordinator replica does not lead ({}); no leader is known yet: an "
                                     "election is under way, retry shortly or try another replica",
                                     why)
                       : fmt::format("this coordinator replica does not lead ({}); send the request to the leader "
                                     "at {} (X-Cohort-Leader)",
                                     why, leader));
    r.leader = leader;
    return r;
}

}  // namespace

void Coordinator::Impl::start_replica() {
    coord::replication::ReplicaOptions r;
    r.etcd.endpoints = etcd::parse_endpoints(options.etcd, "http", "coordinator: etcd endpoints");
    r.etcd.ca_file = options.etcd_ca_file;
    r.etcd.cert_file = options.etcd_cert_file;
    r.etcd.key_file = options.etcd_key_file;
    r.etcd.user = options.etcd_user;
    r.etcd.password = options.etcd_password;
    // A call to one endpoint must fail over well within the leader's lease.
    r.etcd.attempt_timeout = std::chrono::milliseconds(1000);
    r.etcd.connect_timeout = std::chrono::milliseconds(500);
    etcd::check_config(r.etcd, "coordinator: etcd");
    r.prefix = options.etcd_prefix;
    r.id = options.replica_id.empty() ? default_replica_id() : options.replica_id;
    r.url = options.advertise_url.empty() ? url : options.advertise_url;
    r.lease_ttl = options.leader_ttl;
    coord::replication::ReplicaEvents events;
    events.promoted = [this](coord::replication::LoadedState loaded, int64_t fence) {
        auto shared = std::make_shared<coord::replication::LoadedState>(std::move(loaded));
        asio::post(io, [this, shared, fence] { on_promoted(std::move(*shared), fence); });
    };
    events.demoted = [this](std::string why) { asio::post(io, [this, why] { on_demoted(why); }); };
    events.leader = [this](std::string leader) {
        asio::post(io, [this, leader] {
            if (!leading) leader_url = leader;
        });
    };
    replica = std::make_unique<coord::replication::Replica>(std::move(r), std::move(events));
}

bool Coordinator::Impl::may_decide() const {
    if (!replica) return true;
    return leading && std::chrono::steady_clock::now() < replica->lease_confirmed_until();
}

void Coordinator::Impl::on_promoted(coord::replication::LoadedState loaded, int64_t fence) {
    if (stopping) return;
    memory_state = std::move(loaded.state);
    state.set_max_members(options.max_members);
    state.set_answer_limits({std::chrono::duration<double>(options.idempotency_window).count(),
                             options.idempotency_keys, coord::AnswerLimits{}.bytes});
    worlds.clear();
    journal_failure.clear();
    durable_seq = loaded.seq;
    durable = std::make_unique<coord::replication::LogWriter>(
        replica->client(), replica->layout(), state, loaded.seq, fence, coord::replication::LogWriterOptions{},
        [this](uint64_t seq, std::exception_ptr failure) {
            asio::post(io, [this, seq, failure] { on_durable(seq, failure); });
        });
    leading = true;
    leader_url = replica->options().url;
    std::fprintf(stderr, "cohort-coordinator: leading (replica %s at %s) from event %llu, etcd revision %lld\n",
                 replica->options().id.c_str(), leader_url.c_str(), static_cast<unsigned long long>(loaded.seq),
                 static_cast<long long>(loaded.revision));
    // Liveness was the old leader's, in its memory: every member and lease
    // starts a fresh timeout now, and no round opens for the hand-over.
    state.resume(now());
    commit_changes();
    schedule_tick();
}

void Coordinator::Impl::on_demoted(const std::string& why) {
    if (!leading) return;
    leading = false;
    leader_url.clear();
    std::fprintf(stderr, "cohort-coordinator: no longer leading: %s\n", why.c_str());
    // Stops the writer: what it had not written is not acknowledged.
    durable.reset();
    const Response refused = not_leader("", why);
    for (auto& h : std::exchange(held, {})) h.session->send(refused);
    for (auto& [job, list] : std::exchange(parked, {})) {
        for (auto& read : list.reads) {
            if (read->done) continue;
            read->done = true;
            read->timer.cancel();
            if (read->session) read->session->reply(refused);
        }
    }
    worlds.clear();
    memory_state = coord::CoordinatorState{};
    durable_seq = 0;
}

void Coordinator::Impl::expire_held() {
    if (!replica || held.empty()) return;
    const auto* writer = dynamic_cast<const coord::replication::LogWriter*>(durable.get());
    if (writer == nullptr || writer->etcd_reachable()) return;
    const auto cutoff = std::chrono::steady_clock::now() - options.etcd_write_timeout;
    while (!held.empty() && held.front().at <= cutoff) {
        auto h = std::move(held.front());
        held.pop_front();
        h.session->send(error_response(
            503, "unavailable",
            fmt::format("this answer waits for changes not saved yet: etcd ({}) cannot be reached: {}; retry (a "
                        "change sent again with the same Idempotency-Key gets its first answer once it is saved)",
                        options.etcd, writer->last_error())));
    }
}

std::optional<Response> Coordinator::Impl::replica_gate(const Request& request, bool& unheld) {
    const coord::server::Target target = coord::server::parse_target(request.target());
    const auto& p = target.path;
    if (p.size() == 2 && p[0] == "v1" && p[1] == "replica") {
        if (request.method() != http::verb::get) return coord::server::method_not_allowed(request, "GET");
        boost::json::object o;
        o["role"] = !replica ? "single" : leading ? "leader" : "follower";
        o["id"] = replica ? replica->options().id : "";
        o["url"] = replica ? replica->options().url : url;
        o["leader"] = replica ? leader_url : url;
        if (replica) o["etcd_reachable"] = replica->etcd_reachable();
        return coord::server::json_response(o);
    }
    if (!replica || p.empty() || p[0] != "v1") return std::nullopt;
    if (!leading) return not_leader(leader_url, "it follows");
    if (std::chrono::steady_clock::now() < replica->lease_confirmed_until()) return std::nullopt;
    if (replica->etcd_reachable()) return not_leader("", "etcd has not confirmed its lease lately");
    // Answered from memory without waiting for etcd: they may show a
    // change that is still on its way to etcd (retried until it lands, or
    // lost with the lead).
    const bool heartbeat = p.size() == 4 && p[3] == "heartbeat";
    if (request.method() == http::verb::get || heartbeat) {
        unheld = true;
        return std::nullopt;
    }
    return error_response(503, "unavailable",
                          fmt::format("etcd ({}) cannot be reached: {}; this coordinator answers reads and "
                                      "heartbeats but cannot save changes until etcd is back; retry",
                                      options.etcd, replica->last_etcd_error()));
}

std::optional<Response> Coordinator::Impl::route_once(const std::shared_ptr<HttpSession>& session,
                                                      const Request& request) {
    bool unheld = false;
    if (auto gated = replica_gate(request, unheld)) return gated;
    auto response = route_keyed(session, request);
    if (response && unheld) response->unheld = true;
    return response;
}

}  // namespace cohort
