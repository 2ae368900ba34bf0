// CoordinatorClient: retries, error mapping, jobs and rendezvous.
#include "coordinator/client/client_call.hpp"
#include "coordinator/protocol/descriptor.hpp"
#include "coordinator/protocol/job_settings.hpp"
#include "coordinator/protocol/metrics.hpp"
#include "coordinator/protocol/replies.hpp"
#include "coordinator/protocol/requests.hpp"

#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <thread>

#include <fmt/format.h>

namespace cohort {

namespace json = boost::json;
using coord::client::HttpReply;
using coord::client::TransportError;

namespace coord::client {

std::string job_path(std::string_view job) {
    return "/v1/jobs/" + percent_encode(job);
}

Errc code_for_status(long status) {
    switch (status) {
        case 400:
        case 405:
        case 413:
        case 431:
            return Errc::invalid_argument;
        case 401:
        case 403:
            return Errc::permission_denied;
        case 404:
            return Errc::not_found;
        case 408:
            return Errc::timeout;
        case 409:
            return Errc::mismatch;
        case 502:
        case 503:
        case 504:
            return Errc::unavailable;
        default:
            return status >= 500 ? Errc::internal : Errc::invalid_argument;
    }
}

Error error_from_reply(const std::string& url, std::string_view method, const std::string& target,
                       const HttpReply& reply) {
    std::string error;
    std::string detail;
    boost::system::error_code ec;
    const json::value body = json::parse(reply.body, ec);
    if (!ec && body.is_object()) {
        if (const auto* e = body.as_object().if_contains("error"); e != nullptr && e->is_string()) {
            error = std::string(e->as_string());
        }
        if (const auto* d = body.as_object().if_contains("detail"); d != nullptr && d->is_string()) {
            detail = std::string(d->as_string());
        }
    }
    if (detail.empty()) detail = reply.body.substr(0, 200);
    return Error(code_for_status(reply.status),
                 fmt::format("coordinator {}: {} {}: {} (HTTP {}{})", url, method, target, detail, reply.status,
                             error.empty() ? "" : " " + error));
}

}  // namespace coord::client

using namespace coord::client;

namespace {

std::string env_or_empty(const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr ? std::string(v) : std::string();
}

std::string duration_text(std::chrono::milliseconds d) {
    if (d.count() < 1000) return fmt::format("{} ms", d.count());
    return fmt::format("{:.1f} s", static_cast<double>(d.count()) / 1000.0);
}

}  // namespace

CoordinatorClientOptions::CoordinatorClientOptions() : token(env_or_empty("COHORT_COORDINATOR_TOKEN")) {}

namespace {

// Replicas that answer "not the leader, ask X" are followed at once, but no
// more than this many times before a pause: two that name each other
// during an election would otherwise be asked in a tight loop.
constexpr int kMaxHopsInARow = 4;

// An attempt the server had parked this long before its connection broke
// was parked on a replica that went away: the retries get a fresh
// retry_deadline from then.
constexpr std::chrono::seconds kParked{1};

// {"error": "not_leader"}: a replica that is not the leader (and names none,
// or it would have been followed).
bool not_leader(const HttpReply& reply) {
    if (reply.status != 503) return false;
    boost::system::error_code ec;
    const json::value v = json::parse(reply.body, ec);
    const auto* o = ec ? nullptr : v.if_object();
    const auto* e = o != nullptr ? o->if_contains("error") : nullptr;
    return e != nullptr && e->is_string() && e->as_string() == "not_leader";
}

std::string reply_text(const HttpReply& reply) {
    std::string body = reply.body.substr(0, 120);
    for (char& c : body)
        if (c == '\n' || c == '\r') c = ' ';
    return fmt::format("HTTP {} {}", reply.status, body);
}

// What each replica (or etcd) last said, in the order first tried.
class Tried {
public:
    void note(const std::string& where, std::string what) {
        for (auto& [w, last] : entries_) {
            if (w == where) {
                last = std::move(what);
                return;
            }
        }
        entries_.emplace_back(where, std::move(what));
    }
    std::size_t size() const { return entries_.size(); }
    std::string text() const {
        if (entries_.size() == 1) return entries_.front().second;
        std::string out = "tried ";
        for (std::size_t i = 0; i < entries_.size(); ++i) {
            out += fmt::format("{}{} ({})", i == 0 ? "" : ", ", entries_[i].first, entries_[i].second);
        }
        return out;
    }

private:
    std::vector<std::pair<std::string, std::string>> entries_;
};

}  // namespace

HttpReply CoordinatorClient::Impl::call(std::string_view method, const std::string& first_target,
                                        std::string_view first_body, std::string_view content_type,
                                        std::chrono::milliseconds wait, bool keyed, const Rewait& rewait) {
    using clock = std::chrono::steady_clock;
    using std::chrono::milliseconds;
    const auto start = clock::now();
    wait = std::max(wait, milliseconds::zero());
    const auto wait_end = start + wait;
    auto deadline = start + options.retry_deadline;
    auto backoff = std::max(options.initial_backoff, milliseconds(1));
    thread_local std::minstd_rand jitter(std::random_device{}());
    std::string target = first_target;
    std::string body(first_body);
    auto attempt_wait = wait;
    Tried tried;
    std::optional<HttpReply> last_reply;
    std::string last_replica;
    int attempts = 0;
    int hops = 0;
    int hops_in_row = 0;
    std::size_t failures_in_row = 0;
    // One key for the call, sent on every attempt to every replica: the
    // leader answers a retry of a change already made (by it or by the
    // leader before it, whose kept answers it has) with its first answer
    // instead of making it again. Reads need none.
    const std::string key = method == "GET" || !keyed ? std::string() : new_idempotency_key();

    const auto give_up = [&](clock::time_point now) -> Error {
        const std::string hopped = hops == 0 ? "" : fmt::format(", {} hop{} to a named leader", hops, hops == 1 ? "" : "s");
        if (last_reply) {
            Error e = error_from_reply(last_replica, method, target, *last_reply);
            if (tried.size() == 1 && hops == 0) return e;
            return Error(e.code(), fmt::format("{}; {}{}", e.what(), tried.text(), hopped));
        }
        return Error(Errc::unavailable,
                     fmt::format("coordinator {}: {} {}: no answer after {} attempt{}{} in {}: {}; is the "
                                 "coordinator running there?",
                                 url, method, first_target, attempts, attempts == 1 ? "" : "s", hopped,
                                 duration_text(std::chrono::duration_cast<milliseconds>(now - start)), tried.text()));
    };

    for (;;) {
        std::string why;
        // A read of etcd's leader key is bounded like one request.
        const auto replica = finder.current(clock::now() + options.request_timeout, why);
        bool move_on = true;  // to the next replica; else the same one after a pause
        last_reply.reset();
        if (replica) {
            if (attempts > 0 && rewait && wait.count() > 0) {
                const auto left = std::chrono::duration_cast<milliseconds>(wait_end - clock::now());
                attempt_wait = std::clamp(left, milliseconds(1), wait);
                rewait(attempt_wait, target, body);
            }
            ++attempts;
            const auto sent = clock::now();
            std::optional<HttpReply> reply;
            try {
                reply = replica->pool->perform(method, target, body, content_type,
                                               options.request_timeout + attempt_wait, key);
            } catch (const TransportError& e) {
                why = e.what();
                const auto now = clock::now();
                if (attempt_wait.count() > 0 && now - sent >= kParked) {
                    deadline = std::max(deadline, now + options.retry_deadline);
                }
            }
            if (reply && reply->status < 300) {
                finder.answered(replica->url);
                return std::move(*reply);
            }
            if (reply && reply->status < 500) throw error_from_reply(replica->url, method, target, *reply);
            if (reply && reply->status == 503 && !reply->leader.empty() && hops_in_row < kMaxHopsInARow &&
                finder.redirected(replica->url, reply->leader)) {
                // A follower named the leader: ask it now, no pause.
                ++hops;
                ++hops_in_row;
                tried.note(replica->url, "not the leader; named " + reply->leader);
                continue;
            }
            if (reply) {
                why = reply_text(*reply);
                // A 5xx from the leader itself (etcd unreachable, say) is
                // asked again after a pause; any other replica would only
                // send us back to it.
                move_on = not_leader(*reply) || !reply->leader.empty();
                last_reply = std::move(reply);
            }
            tried.note(replica->url, why);
            last_replica = replica->url;
            if (move_on) finder.failed(replica->url);
        } else {
            ++attempts;
            tried.note("etcd " + finder.set().leader_key, why);
        }
        ++failures_in_row;
        // The next replica at once, until every one failed (even past the
        // deadline: a client of one attempt tries each replica once); then
        // a pause.
        if (move_on && failures_in_row < finder.sweep()) continue;
        const auto now = clock::now();
        if (now >= deadline) throw give_up(now);
        failures_in_row = 0;
        hops_in_row = 0;
        std::uniform_int_distribution<int64_t> spread(backoff.count() / 2, backoff.count());
        auto pause = milliseconds(spread(jitter));
        if (now + pause >= deadline) pause = std::chrono::duration_cast<milliseconds>(deadline - now);
        if (pause.count() <= 0) throw give_up(now);
        std::this_thread::sleep_for(pause);
        backoff = std::min(backoff * 2, std::max(options.max_backoff, options.initial_backoff));
    }
}

json::value CoordinatorClient::Impl::call_json(std::string_view method, const std::string& target,
                                               const json::value* body, bool keyed) {
    const std::string text = body != nullptr ? json::serialize(*body) : std::string();
    const HttpReply reply = call(method, target, text, body != nullptr ? "application/json" : "", {}, keyed);
    boost::system::error_code ec;
    json::value v = json::parse(reply.body, ec);
    if (ec) {
        throw Error(Errc::peer_failed, fmt::format("coordinator {}: {} {}: the answer is not JSON ({})",
                                                   finder.leader(), method, target, ec.message()));
    }
    return v;
}

CoordinatorClient::CoordinatorClient(std::string url, CoordinatorClientOptions options)
    : impl_(std::make_unique<Impl>(coord::client::parse_url_set(url), std::move(options))) {
    if (impl_->options.request_timeout.count() <= 0) {
        throw Error(Errc::invalid_argument, "CoordinatorClientOptions::request_timeout must be positive");
    }
    if (impl_->options.retry_deadline.count() < 0) {
        throw Error(Errc::invalid_argument, "CoordinatorClientOptions::retry_deadline must not be negative");
    }
}

CoordinatorClient::CoordinatorClient(CoordinatorClient&&) noexcept = default;
CoordinatorClient& CoordinatorClient::operator=(CoordinatorClient&&) noexcept = default;
CoordinatorClient::~CoordinatorClient() = default;

const std::string& CoordinatorClient::url() const {
    return impl_->url;
}

std::string CoordinatorClient::leader_url() const {
    return impl_->finder.leader();
}

std::string normalize_coordinator_url(std::string_view text) {
    const std::string with_scheme = coord::client::with_http_scheme(text);
    auto set = coord::client::parse_url_set(with_scheme);  // throws for what is malformed
    // etcd:// keeps its query (the TLS files a worker needs too).
    return set.etcd ? with_scheme : set.address;
}

namespace {

// The join message is a cohort::Node; MemberDescriptor is the client's way
// to spell one, with the role as text.
Node node_of(const MemberDescriptor& d) {
    Node node;
    node.id = d.id;
    node.host = d.host;
    node.address = d.address;
    if (!d.role.empty()) {
        const auto role = parse_role(d.role);
        if (!role) {
            throw Error(Errc::invalid_argument,
                        fmt::format("join: node '{}': unknown role '{}' (expected worker, chief, evaluator, "
                                    "parameter_server or coordinator)",
                                    d.id, d.role));
        }
        node.role = *role;
    }
    node.set_label(Level::network_switch, d.switch_label);
    node.set_label(Level::rack, d.rack);
    node.set_label(Level::zone, d.zone);
    node.set_label(Level::region, d.region);
    node.gpu_count = d.gpus.value_or(0);
    node.gpu_memory_bytes = d.gpu_memory.value_or(0);
    return node;
}

json::value parse_argument(std::string_view text, std::string_view what) {
    boost::system::error_code ec;
    json::value v = json::parse(text, ec);
    if (ec) {
        throw Error(Errc::invalid_argument, fmt::format("{}: not JSON ({})", what, ec.message()));
    }
    return v;
}

}  // namespace

std::string CoordinatorClient::create_job(std::string_view name, const JobSettings& settings) {
    json::object body;
    body["name"] = name;
    body["settings"] = coord::protocol::write(settings);
    const json::value b = body;
    return json::serialize(impl_->call_json("POST", "/v1/jobs", &b));
}

std::string CoordinatorClient::create_job_json(std::string_view name, std::string_view settings_json_text) {
    json::object body;
    body["name"] = name;
    if (!settings_json_text.empty()) body["settings"] = parse_argument(settings_json_text, "create_job: settings");
    const json::value b = body;
    return json::serialize(impl_->call_json("POST", "/v1/jobs", &b));
}

std::string CoordinatorClient::job_state(std::string_view name) {
    return json::serialize(impl_->call_json("GET", job_path(name)));
}

JobSettings CoordinatorClient::job_settings(std::string_view name) {
    return coord::protocol::read<JobSettings>(impl_->call_json("GET", job_path(name) + "/settings"),
                                              "coordinator reply to settings", coord::protocol::kReply);
}

void CoordinatorClient::delete_job(std::string_view name) {
    impl_->call_json("DELETE", job_path(name));
}

JoinReply CoordinatorClient::join(std::string_view job, const MemberDescriptor& node) {
    const json::value b = coord::descriptor_to_json(node_of(node));
    return coord::protocol::read<JoinReply>(impl_->call_json("POST", job_path(job) + "/join", &b),
                                            "coordinator reply to join", coord::protocol::kReply);
}

HeartbeatReply CoordinatorClient::heartbeat(std::string_view job, std::string_view member, uint64_t generation,
                                            const std::optional<HeartbeatMetrics>& metrics) {
    const json::value b =
        coord::protocol::write(coord::protocol::HeartbeatRequest{std::string(member), generation, metrics});
    // Not keyed: heartbeats are most of a large job's requests (10,000
    // members at the default 1 s are 10,000 a second) and would push the
    // keys of joins and store calls out of the coordinator's table; one
    // applied twice records the member's time again, and at worst counts a
    // batch of step samples twice in the health window.
    return coord::protocol::read<HeartbeatReply>(impl_->call_json("POST", job_path(job) + "/heartbeat", &b, false),
                                                 "coordinator reply to heartbeat", coord::protocol::kReply);
}

void CoordinatorClient::leave(std::string_view job, std::string_view member, std::string_view failure) {
    coord::protocol::LeaveRequest request{std::string(member), std::nullopt};
    if (!failure.empty()) request.failed = std::string(failure);
    const json::value b = coord::protocol::write(request);
    impl_->call_json("POST", job_path(job) + "/leave", &b);
}

ReportReply CoordinatorClient::report_dead(std::string_view job, std::string_view member, uint64_t generation,
                                           std::string_view dead, std::string_view why) {
    coord::protocol::ReportRequest request{std::string(member), generation, std::string(dead), std::nullopt};
    if (!why.empty()) request.why = std::string(why);
    const json::value b = coord::protocol::write(request);
    return coord::protocol::read<ReportReply>(impl_->call_json("POST", job_path(job) + "/report", &b),
                                              "coordinator reply to report", coord::protocol::kReply);
}

RoundReply CoordinatorClient::request_round(std::string_view job, std::string_view member) {
    const json::value b = coord::protocol::write(coord::protocol::MemberRequest{std::string(member)});
    return coord::protocol::read<RoundReply>(impl_->call_json("POST", job_path(job) + "/round", &b),
                                             "coordinator reply to round", coord::protocol::kReply);
}

MemberWorld CoordinatorClient::world(std::string_view job, std::string_view member, bool with_peers) {
    const json::value r = impl_->call_json(
        "GET", job_path(job) + "/world?member=" + percent_encode(member) + (with_peers ? "" : "&peers=false"));
    return coord::protocol::read<MemberWorld>(r, "coordinator reply to world", coord::protocol::kReply);
}

MemberWorld CoordinatorClient::wait_for_world(std::string_view job, std::string_view member,
                                              std::chrono::milliseconds timeout) {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    const auto deadline = start + std::max(timeout, std::chrono::milliseconds::zero());
    const auto interval =
        std::chrono::milliseconds(static_cast<int64_t>(job_settings(job).heartbeat_interval.value_or(1.0) * 1000.0));
    // The world is read more often than the heartbeat is sent, so that a
    // round that closes is seen at once.
    const auto poll = std::clamp(interval, std::chrono::milliseconds(10), std::chrono::milliseconds(100));
    auto next_heartbeat = start;
    for (;;) {
        const auto now = clock::now();
        if (now >= next_heartbeat) {
            try {
                heartbeat(job, member, 0);
            } catch (const Error& e) {
                // Servers before 0.1.1 refused generation 0 from an active
                // member; the world read below settles it either way.
                if (e.code() != Errc::mismatch) throw;
            }
            next_heartbeat = now + interval;
        }
        MemberWorld w = world(job, member);
        if (w.active) return w;
        if (clock::now() + poll > deadline) {
            throw Error(Errc::timeout,
                        fmt::format("coordinator {}: job '{}': node '{}' has no world after {}; the round has not "
                                    "closed (too few nodes? see GET /v1/jobs/{})",
                                    impl_->url, job, member, duration_text(timeout), job));
        }
        std::this_thread::sleep_for(poll);
    }
}

}  // namespace cohort
