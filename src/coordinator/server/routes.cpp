// What each request does: authorisation, routing, and the job, rendezvous
// and shard routes. The store's routes are in store_routes.cpp.
#include "coordinator/protocol/descriptor.hpp"
#include "coordinator/protocol/replies.hpp"
#include "coordinator/protocol/requests.hpp"
#include "coordinator/server/assets.hpp"
#include "coordinator/server/request_body.hpp"
#include "coordinator/server/session.hpp"
#include "coordinator/state/dataset_plan.hpp"
#include "coordinator/state/json_parse.hpp"
#include "core/json_fields.hpp"
#include "core/json_text.hpp"
#include "core/text.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include <fmt/format.h>

namespace cohort::coord::server {

namespace json = boost::json;
namespace http = boost::beast::http;

json::value body_json(const Request& request, std::string_view what) {
    if (request.body().empty()) {
        throw Error(Errc::invalid_argument, fmt::format("{}: the body is empty; send a JSON object", what));
    }
    try {
        return parse_json(request.body());
    } catch (const Error& e) {
        throw Error(Errc::parse, fmt::format("{}: {}", what, e.what()));
    }
}

std::string target_text(const Request& request) {
    return detail::escape_bytes(std::string_view(request.target().data(), request.target().size()), 200);
}

Response method_not_allowed(const Request& request, std::string_view allow) {
    Response r = error_response(405, "method_not_allowed",
                                fmt::format("{} {}: method not allowed; this path takes {}",
                                            std::string(request.method_string()), target_text(request), allow));
    r.allow = allow;
    return r;
}

namespace {

Response no_route(const Request& request) {
    return error_response(404, "no_route",
                          fmt::format("{} {}: no such route (the API is under /v1/jobs; see docs/coordinator.md)",
                                      std::string(request.method_string()), target_text(request)));
}

}  // namespace

}  // namespace cohort::coord::server

namespace cohort {

using coord::server::body_json;
using coord::server::error_response;
using coord::server::json_response;
using coord::server::method_not_allowed;
using coord::server::no_route;
namespace json = boost::json;
namespace http = boost::beast::http;

bool Coordinator::Impl::authorised(const Request& request) const {
    if (options.token.empty()) return true;
    const auto it = request.find(http::field::authorization);
    if (it == request.end()) return false;
    const std::string_view value(it->value().data(), it->value().size());
    constexpr std::string_view kScheme = "Bearer ";
    if (value.size() < kScheme.size() || !std::equal(kScheme.begin(), kScheme.end(), value.begin(), [](char a, char b) {
            return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
        })) {
        return false;
    }
    return coord::server::equal_in_constant_time(value.substr(kScheme.size()), options.token);
}

std::optional<coord::server::Response> Coordinator::Impl::route(const std::shared_ptr<HttpSession>& session,
                                                                const Request& request) {
    const auto started = std::chrono::steady_clock::now();
    const coord::server::Target target = coord::server::parse_target(request.target());
    const auto& p = target.path;
    const http::verb method = request.method();
    const bool get = method == http::verb::get, post = method == http::verb::post;

    // The dashboard's page and files need no token: they hold no state, and
    // the page sends the token (from the URL fragment) with its API calls.
    if (p.empty() || (p.size() == 2 && p[0] == "dashboard")) {
        if (!get) return method_not_allowed(request, "GET");
        const auto asset = coord::server::find_asset(p.empty() ? "index.html" : p[1]);
        if (!asset) return no_route(request);
        Response r;
        r.body = asset->body;
        r.content_type = asset->content_type;
        return r;
    }
    if (!authorised(request)) {
        return error_response(401, "unauthorized",
                              request.find(http::field::authorization) == request.end()
                                  ? "this coordinator needs \"Authorization: Bearer <token>\" on every request"
                                  : "the bearer token does not match the coordinator's");
    }
    if (p.size() == 1 && p[0] == "metrics") {
        if (!get) return method_not_allowed(request, "GET");
        Response r;
        r.body = prometheus();
        r.content_type = "text/plain; version=0.0.4; charset=utf-8";
        return r;
    }
    if (p.size() < 2 || p[0] != "v1" || p[1] != "jobs") return no_route(request);

    if (p.size() == 2) {
        if (get) {
            json::array jobs;
            for (const auto& [name, j] : state.jobs()) jobs.push_back(j.summary());
            json::object o;
            o["jobs"] = std::move(jobs);
            return json_response(o);
        }
        if (!post) return method_not_allowed(request, "GET, POST");
        const json::value body = body_json(request, "create job");
        detail::FieldReader reader(body, "create job", Errc::invalid_argument);
        reader.allow({"name", "settings"});
        const std::string name = reader.string("name");
        coord::JobSettings settings;
        if (const json::value* s = reader.find("settings")) settings = coord::settings_from_json(*s);
        const bool existed = state.find_job(name) != nullptr;
        const double t = now();
        state.create_job(name, settings, t);
        if (!existed) changed(name);
        return json_response(state.job(name).view(t), existed ? 200 : 201);
    }

    const std::string& job = p[2];
    // Checked here, at the edge, so every message below can show it as is.
    coord::validate_name("job name", job);
    if (p.size() == 3) {
        if (get) return json_response(state.job(job).view(now()));
        if (method != http::verb::delete_) return method_not_allowed(request, "GET, DELETE");
        state.delete_job(job, now());
        worlds.erase(job);
        changed(job);
        json::object o;
        o["deleted"] = job;
        return json_response(o);
    }

    const std::string& action = p[3];
    if (action == "store" && p.size() >= 5) return store_route(session, request, target);
    if (p.size() == 5 && action == "shards" && (p[4] == "next" || p[4] == "done" || p[4] == "release")) {
        if (!post) return method_not_allowed(request, "POST");
        const std::string where = fmt::format("shards/{} of job '{}'", p[4], job);
        const json::value body = body_json(request, where);
        if (p[4] == "next") {
            const auto sent =
                coord::protocol::read<coord::protocol::MemberRequest>(body, where, coord::protocol::kRequest);
            const auto next = state.next_shard(job, sent.member, now());
            changed(job);
            return json_response(coord::protocol::write(next));
        }
        const auto sent = coord::protocol::read<coord::protocol::DoneRequest>(body, where, coord::protocol::kRequest);
        if (p[4] == "release") {
            const auto released = state.shard_release(job, sent.member, sent.lease, now());
            changed(job);
            return json_response(coord::protocol::write(released));
        }
        const auto outcome = state.shard_done(job, sent.member, sent.lease, now());
        changed(job);
        return json_response(coord::protocol::write(outcome));
    }
    if (p.size() != 4) return no_route(request);

    if (action == "history") {
        if (!get) return method_not_allowed(request, "GET");
        const coord::HistoryQuery query = coord::history_query(target.query, fmt::format("history of job '{}'", job));
        json::object o = state.job(job).history().to_json(query, now());
        o["job"] = job;
        return json_response(o);
    }
    if (action == "settings") {
        if (!get) return method_not_allowed(request, "GET");
        return json_response(coord::to_json(state.job(job).settings()));
    }

    if (action == "world") {
        if (!get) return method_not_allowed(request, "GET");
        const auto member_it = target.query.find("member");
        if (member_it == target.query.end() || member_it->second.empty()) {
            throw Error(Errc::invalid_argument, fmt::format("world of job '{}': name the member: ?member=ID", job));
        }
        const std::string& member = member_it->second;
        coord::validate_name(fmt::format("world of job '{}': member", job), member);
        bool with_peers = true;
        if (const auto peers_it = target.query.find("peers"); peers_it != target.query.end()) {
            if (peers_it->second != "false" && peers_it->second != "true") {
                throw Error(Errc::invalid_argument,
                            fmt::format("world of job '{}': peers must be true or false, not {}", job,
                                        detail::quote(peers_it->second)));
            }
            // The member's place without the peer list: a few dozen bytes
            // instead of one entry per member, so 10,000 members can all
            // read their rank at once.
            with_peers = peers_it->second == "true";
        }
        std::optional<MemberWorld> mine = state.world(job, member, false);
        if (!mine) {
            // Waiting: no world yet.
            mine.emplace();
            mine->generation = state.job(job).generation();
        }
        if (!mine->active || !with_peers) return json_response(coord::protocol::write(*mine, false));
        // Every member of a generation shares the peers array; only its own
        // place differs.
        const coord::World& w = state.job(job).world();
        coord::server::WorldCache& cache = worlds[job];
        if (cache.generation != w.generation || cache.formed_at != w.formed_at || cache.peers.empty()) {
            cache = {w.generation, w.formed_at, detail::to_text(coord::protocol::peers_to_json(w.peers()))};
        }
        Response r;
        r.body = coord::protocol::world_text(*mine, cache.peers);
        return r;
    }

    if (action == "join" || action == "heartbeat" || action == "leave" || action == "report" || action == "round" ||
        action == "dataset") {
        if (!post) return method_not_allowed(request, "POST");
    } else {
        return no_route(request);
    }
    const std::string where = fmt::format("{} job '{}'", action, job);
    const json::value body = body_json(request, where);
    if (action == "join") {
        const JoinReply reply = state.join(job, coord::descriptor_from_json(body, where), now());
        changed(job);
        return json_response(coord::protocol::write(reply));
    }
    if (action == "heartbeat") {
        // Parsed here, once: the event carries the typed metrics to the
        // journal and the health windows.
        auto sent = coord::protocol::read<coord::protocol::HeartbeatRequest>(body, where, coord::protocol::kRequest);
        const HeartbeatReply reply = state.heartbeat(job, sent.member, sent.generation, std::move(sent.metrics), now());
        changed(job);
        Response r = json_response(coord::protocol::write(reply));
        heartbeat_latency.observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
        return r;
    }
    if (action == "leave") {
        const auto sent = coord::protocol::read<coord::protocol::LeaveRequest>(body, where, coord::protocol::kRequest);
        const std::string& member = sent.member;
        state.leave(job, member, now(), sent.failed.value_or(""));
        changed(job);
        json::object o;
        o["left"] = member;
        return json_response(o);
    }
    if (action == "report") {
        const auto sent = coord::protocol::read<coord::protocol::ReportRequest>(body, where, coord::protocol::kRequest);
        const ReportReply reply =
            state.report_dead(job, sent.member, sent.generation, sent.dead, sent.why.value_or(""), now());
        changed(job);
        return json_response(coord::protocol::write(reply));
    }
    if (action == "round") {
        state.request_round(
            job, coord::protocol::read<coord::protocol::MemberRequest>(body, where, coord::protocol::kRequest).member,
            now());
        changed(job);
        return json_response(
            coord::protocol::write(RoundReply{state.job(job).round_open(), state.job(job).generation()}));
    }
    // dataset
    const bool had = state.job(job).shards() != nullptr;
    state.register_dataset(job, coord::plan_from_json(body), now());
    changed(job);
    return json_response(coord::to_json(state.job(job).shards()->plan()), had ? 200 : 201);
}

}  // namespace cohort
