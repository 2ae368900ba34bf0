// CoordinatorClient: retries, error mapping, jobs and rendezvous.
#include "coordinator/client/client_call.hpp"

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

namespace {

const json::value& field(const json::value& reply, std::string_view name, std::string_view what) {
    const json::object* o = reply.if_object();
    const json::value* v = o != nullptr ? o->if_contains(name) : nullptr;
    if (v == nullptr) {
        throw Error(Errc::peer_failed, fmt::format("coordinator reply to {}: no field '{}'", what, name));
    }
    return *v;
}

[[noreturn]] void wrong_type(std::string_view name, std::string_view what, std::string_view type) {
    throw Error(Errc::peer_failed, fmt::format("coordinator reply to {}: '{}' is not {}", what, name, type));
}

}  // namespace

uint64_t uint_field(const json::value& reply, std::string_view name, std::string_view what) {
    const json::value& v = field(reply, name, what);
    if (v.is_uint64()) return v.as_uint64();
    if (v.is_int64() && v.as_int64() >= 0) return static_cast<uint64_t>(v.as_int64());
    wrong_type(name, what, "a whole number");
}

std::string string_field(const json::value& reply, std::string_view name, std::string_view what) {
    const json::value& v = field(reply, name, what);
    if (!v.is_string()) wrong_type(name, what, "a string");
    return std::string(v.as_string());
}

bool bool_field(const json::value& reply, std::string_view name, std::string_view what) {
    const json::value& v = field(reply, name, what);
    if (!v.is_bool()) wrong_type(name, what, "true or false");
    return v.as_bool();
}

}  // namespace coord::client

using namespace coord::client;

namespace {

std::string env_or_empty(const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr ? std::string(v) : std::string();
}

std::string check_url(std::string url) {
    while (url.ends_with('/')) url.pop_back();
    if (!url.starts_with("http://") || url.size() == 7) {
        throw Error(Errc::invalid_argument,
                    fmt::format("coordinator URL '{}': expected http://HOST:PORT (as Coordinator::url() gives)", url));
    }
    if (url.find('/', 7) != std::string::npos) {
        throw Error(Errc::invalid_argument,
                    fmt::format("coordinator URL '{}': expected http://HOST:PORT with no path", url));
    }
    return url;
}

std::string duration_text(std::chrono::milliseconds d) {
    if (d.count() < 1000) return fmt::format("{} ms", d.count());
    return fmt::format("{:.1f} s", static_cast<double>(d.count()) / 1000.0);
}

}  // namespace

CoordinatorClientOptions::CoordinatorClientOptions() : token(env_or_empty("COHORT_COORDINATOR_TOKEN")) {}

HttpReply CoordinatorClient::Impl::call(std::string_view method, const std::string& target, std::string_view body,
                                        std::string_view content_type, std::chrono::milliseconds wait) {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    const auto deadline = start + options.retry_deadline;
    auto backoff = std::max(options.initial_backoff, std::chrono::milliseconds(1));
    thread_local std::minstd_rand jitter(std::random_device{}());
    std::string last_error;
    int attempts = 0;
    for (;;) {
        ++attempts;
        std::optional<HttpReply> reply;
        try {
            reply = pool.perform(method, target, body, content_type, options.request_timeout + wait);
        } catch (const TransportError& e) {
            last_error = e.what();
        }
        if (reply && reply->status < 300) return std::move(*reply);
        if (reply && reply->status < 500) throw error_from_reply(url, method, target, *reply);
        // A connection failure or a 5xx: try again after a while, if there is time.
        const auto now = clock::now();
        std::uniform_int_distribution<int64_t> spread(backoff.count() / 2, backoff.count());
        auto pause = std::chrono::milliseconds(spread(jitter));
        if (now + pause >= deadline) pause = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
        if (pause.count() <= 0) {
            if (reply) throw error_from_reply(url, method, target, *reply);
            throw Error(Errc::unavailable,
                        fmt::format("coordinator {}: {} {}: no answer after {} attempt{} in {}: {}; is the "
                                    "coordinator running there?",
                                    url, method, target, attempts, attempts == 1 ? "" : "s",
                                    duration_text(std::chrono::duration_cast<std::chrono::milliseconds>(now - start)),
                                    last_error));
        }
        std::this_thread::sleep_for(pause);
        backoff = std::min(backoff * 2, std::max(options.max_backoff, options.initial_backoff));
    }
}

json::value CoordinatorClient::Impl::call_json(std::string_view method, const std::string& target,
                                               const json::value* body) {
    const std::string text = body != nullptr ? json::serialize(*body) : std::string();
    const HttpReply reply = call(method, target, text, body != nullptr ? "application/json" : "");
    boost::system::error_code ec;
    json::value v = json::parse(reply.body, ec);
    if (ec) {
        throw Error(Errc::peer_failed, fmt::format("coordinator {}: {} {}: the answer is not JSON ({})", url, method,
                                                   target, ec.message()));
    }
    return v;
}

CoordinatorClient::CoordinatorClient(std::string url, CoordinatorClientOptions options)
    : impl_(std::make_unique<Impl>(check_url(std::move(url)), std::move(options))) {
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

namespace {

json::object settings_json(const JobSettings& s) {
    json::object o;
    if (s.min_nodes) o["min_nodes"] = *s.min_nodes;
    if (s.max_nodes) o["max_nodes"] = *s.max_nodes;
    if (s.last_call) o["last_call"] = *s.last_call;
    if (s.node_unit) o["node_unit"] = *s.node_unit;
    if (s.join_timeout) o["join_timeout"] = *s.join_timeout;
    if (s.heartbeat_interval) o["heartbeat_interval"] = *s.heartbeat_interval;
    if (s.failure_timeout) o["failure_timeout"] = *s.failure_timeout;
    if (s.rejoin) o["rejoin"] = *s.rejoin;
    const HealthSettings& h = s.health;
    json::object health;
    if (h.window) health["window"] = *h.window;
    if (h.window_seconds) health["window_seconds"] = *h.window_seconds;
    if (h.recent) health["recent"] = *h.recent;
    if (h.min_samples) health["min_samples"] = *h.min_samples;
    if (h.straggler_threshold) health["straggler_threshold"] = *h.straggler_threshold;
    if (h.straggler_for) health["straggler_for"] = *h.straggler_for;
    if (h.reference) health["reference"] = *h.reference;
    if (h.hang_timeout) health["hang_timeout"] = *h.hang_timeout;
    if (h.gpu_temperature_limit) health["gpu_temperature_limit"] = *h.gpu_temperature_limit;
    if (!health.empty()) o["health"] = std::move(health);
    return o;
}

json::value parse_argument(std::string_view text, std::string_view what) {
    boost::system::error_code ec;
    json::value v = json::parse(text, ec);
    if (ec) {
        throw Error(Errc::invalid_argument, fmt::format("{}: not JSON ({})", what, ec.message()));
    }
    return v;
}

json::object metrics_json(const HeartbeatMetrics& metrics) {
    json::object m;
    if (metrics.step) m["step"] = *metrics.step;
    if (metrics.step_time) m["step_time"] = *metrics.step_time;
    if (metrics.samples_per_sec) m["samples_per_sec"] = *metrics.samples_per_sec;
    if (metrics.data_wait) m["data_wait"] = *metrics.data_wait;
    if (metrics.collective_wait) m["collective_wait"] = *metrics.collective_wait;
    if (metrics.collective_seq) m["collective_seq"] = *metrics.collective_seq;
    if (metrics.in_collective) m["in_collective"] = *metrics.in_collective;
    if (!metrics.gpu_json.empty()) m["gpu"] = parse_argument(metrics.gpu_json, "heartbeat: metrics.gpu");
    if (!metrics.samples.empty()) {
        json::array samples;
        samples.reserve(metrics.samples.size());
        for (const StepSample& s : metrics.samples) {
            json::object o;
            o["age"] = s.age;
            o["step"] = s.step;
            if (s.step_time) o["step_time"] = *s.step_time;
            if (s.samples_per_sec) o["samples_per_sec"] = *s.samples_per_sec;
            if (s.data_wait) o["data_wait"] = *s.data_wait;
            if (s.collective_wait) o["collective_wait"] = *s.collective_wait;
            samples.push_back(std::move(o));
        }
        m["samples"] = std::move(samples);
    }
    return m;
}

}  // namespace

std::string CoordinatorClient::create_job(std::string_view name, const JobSettings& settings) {
    json::object body;
    body["name"] = name;
    body["settings"] = settings_json(settings);
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

void CoordinatorClient::delete_job(std::string_view name) {
    impl_->call_json("DELETE", job_path(name));
}

JoinReply CoordinatorClient::join(std::string_view job, const MemberDescriptor& node) {
    json::object d;
    d["id"] = node.id;
    if (!node.host.empty()) d["host"] = node.host;
    if (!node.address.empty()) d["address"] = node.address;
    if (!node.role.empty()) d["role"] = node.role;
    json::object locality;
    if (!node.switch_label.empty()) locality["switch"] = node.switch_label;
    if (!node.rack.empty()) locality["rack"] = node.rack;
    if (!node.zone.empty()) locality["zone"] = node.zone;
    if (!node.region.empty()) locality["region"] = node.region;
    if (!locality.empty()) d["locality"] = std::move(locality);
    if (node.gpus) d["gpus"] = *node.gpus;
    if (node.gpu_memory) d["gpu_memory"] = *node.gpu_memory;
    const json::value b = d;
    const json::value r = impl_->call_json("POST", job_path(job) + "/join", &b);
    JoinReply reply;
    reply.state = string_field(r, "state", "join");
    reply.generation = uint_field(r, "generation", "join");
    if (const auto* rank = r.as_object().if_contains("rank"); rank != nullptr && !rank->is_null()) {
        reply.rank = static_cast<uint32_t>(uint_field(r, "rank", "join"));
    }
    return reply;
}

HeartbeatReply CoordinatorClient::heartbeat(std::string_view job, std::string_view member, uint64_t generation,
                                            const std::optional<HeartbeatMetrics>& metrics) {
    json::object body;
    body["member"] = member;
    body["generation"] = generation;
    if (metrics) body["metrics"] = metrics_json(*metrics);
    const json::value b = body;
    const json::value r = impl_->call_json("POST", job_path(job) + "/heartbeat", &b);
    HeartbeatReply reply{uint_field(r, "generation", "heartbeat"), string_field(r, "state", "heartbeat"),
                         bool_field(r, "rendezvous", "heartbeat"), std::nullopt, std::nullopt};
    if (r.as_object().contains("rank")) {
        reply.rank = static_cast<uint32_t>(uint_field(r, "rank", "heartbeat"));
        reply.world_size = static_cast<uint32_t>(uint_field(r, "world_size", "heartbeat"));
    }
    return reply;
}

void CoordinatorClient::leave(std::string_view job, std::string_view member, std::string_view failure) {
    json::object body;
    body["member"] = member;
    if (!failure.empty()) body["failed"] = failure;
    const json::value b = body;
    impl_->call_json("POST", job_path(job) + "/leave", &b);
}

RoundReply CoordinatorClient::request_round(std::string_view job, std::string_view member) {
    json::object body;
    body["member"] = member;
    const json::value b = body;
    const json::value r = impl_->call_json("POST", job_path(job) + "/round", &b);
    return RoundReply{bool_field(r, "round_open", "round"), uint_field(r, "generation", "round")};
}

MemberWorld CoordinatorClient::world(std::string_view job, std::string_view member, bool with_peers) {
    const json::value r = impl_->call_json(
        "GET", job_path(job) + "/world?member=" + percent_encode(member) + (with_peers ? "" : "&peers=false"));
    MemberWorld w;
    w.generation = uint_field(r, "generation", "world");
    w.active = string_field(r, "state", "world") == "active";
    if (!w.active) return w;
    auto u32 = [&](std::string_view name) { return static_cast<uint32_t>(uint_field(r, name, "world")); };
    w.rank = u32("rank");
    w.world_size = u32("world_size");
    w.local_rank = u32("local_rank");
    w.local_world_size = u32("local_world_size");
    w.node_rank = u32("node_rank");
    if (!with_peers) return w;
    const json::value& peers = r.as_object().at("peers");
    if (!peers.is_array()) throw Error(Errc::peer_failed, "coordinator reply to world: 'peers' is not an array");
    for (const json::value& p : peers.as_array()) {
        WorldPeer peer;
        peer.rank = static_cast<uint32_t>(uint_field(p, "rank", "world: peers"));
        peer.id = string_field(p, "id", "world: peers");
        if (const auto* h = p.as_object().if_contains("host"); h != nullptr && h->is_string()) {
            peer.host = std::string(h->as_string());
        }
        if (const auto* a = p.as_object().if_contains("address"); a != nullptr && a->is_string()) {
            peer.address = std::string(a->as_string());
        }
        w.peers.push_back(std::move(peer));
    }
    return w;
}

MemberWorld CoordinatorClient::wait_for_world(std::string_view job, std::string_view member,
                                        std::chrono::milliseconds timeout) {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    const auto deadline = start + std::max(timeout, std::chrono::milliseconds::zero());
    std::chrono::milliseconds interval{1000};
    {
        const json::value state = json::parse(job_state(job));
        const json::value* s = state.as_object().if_contains("settings");
        const json::value* hb =
            s != nullptr && s->is_object() ? s->as_object().if_contains("heartbeat_interval") : nullptr;
        if (hb != nullptr && hb->is_number()) {
            interval = std::chrono::milliseconds(static_cast<int64_t>(hb->to_number<double>() * 1000.0));
        }
    }
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
