// The key-value store's routes, and parked reads: a get or wait whose keys
// are missing waits on a timer, filed under its job, and is looked at again
// whenever the job's store or generation changes. Nothing ever blocks the
// io thread.
#include "coordinator/protocol/store.hpp"
#include "coordinator/server/request_body.hpp"
#include "coordinator/server/session.hpp"
#include "core/text.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

namespace cohort {

namespace json = boost::json;
namespace http = boost::beast::http;
using coord::server::body_json;
using coord::server::error_response;
using coord::server::json_response;
using coord::server::method_not_allowed;
using coord::server::target_text;

namespace {

uint64_t whole_number(std::string_view text, std::string_view what) {
    uint64_t n = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
        throw Error(Errc::invalid_argument, fmt::format("{} {} is not a whole number", what, detail::quote(text)));
    }
    return n;
}

std::chrono::milliseconds wait_limit(uint64_t ms, std::string_view where) {
    if (std::chrono::milliseconds(ms) > Coordinator::Impl::kMaxWait) {
        throw Error(Errc::invalid_argument, fmt::format("{}: timeout_ms {} is more than the most a request may wait "
                                                        "({} ms); wait again instead",
                                                        where, ms, Coordinator::Impl::kMaxWait.count()));
    }
    return std::chrono::milliseconds(ms);
}

coord::server::Response value_response(std::string value) {
    coord::server::Response r;
    r.body = std::move(value);
    r.content_type = "application/octet-stream";
    return r;
}

}  // namespace

std::optional<coord::server::Response> Coordinator::Impl::store_route(const std::shared_ptr<HttpSession>& session,
                                                                      const Request& request,
                                                                      const coord::server::Target& target) {
    const auto& p = target.path;  // v1 jobs JOB store GEN [KEY [add|cas] | wait]
    const std::string& job = p[2];
    const std::string where_gen = fmt::format("store of job '{}'", job);
    if (p.size() < 6 || p.size() > 7) {
        return error_response(404, "no_route",
                              fmt::format("{} {}: no such route; store paths are /v1/jobs/JOB/store/GEN/KEY",
                                          std::string(request.method_string()), target_text(request)));
    }
    const uint64_t generation = whole_number(p[4], where_gen + ": generation");
    const std::string& key = p[5];
    const std::string where = fmt::format("store of job '{}' generation {}", job, generation);
    const http::verb method = request.method();

    if (p.size() == 7) {
        if (p[6] != "add" && p[6] != "cas") {
            return error_response(404, "no_route",
                                  fmt::format("{} {}: no such route; after the key come only /add and /cas",
                                              std::string(request.method_string()), target_text(request)));
        }
        if (method != http::verb::post) return method_not_allowed(request, "POST");
        const std::string what = fmt::format("{}: {} {}", where, p[6], detail::quote(key));
        const json::value body = body_json(request, what);
        if (p[6] == "add") {
            const int64_t delta = coord::protocol::add_request_from_json(body, what, coord::protocol::kRequest);
            const int64_t sum = state.store_add(job, generation, key, delta, now());
            changed(job);
            return json_response(coord::protocol::add_reply(sum));
        }
        const auto cas = coord::protocol::read<coord::protocol::StoreCasRequest>(body, what, coord::protocol::kRequest);
        const uint64_t before = state.store_version(job, generation);
        const auto after = state.store_compare_and_set(job, generation, key, cas.expected, cas.desired, now());
        const bool stored = state.store_version(job, generation) != before;
        if (stored) changed(job);
        return json_response(coord::protocol::write(StoreCasResult{after, stored}));
    }

    if (key == "wait" && method == http::verb::post) {
        const json::value body = body_json(request, where + ": wait");
        auto wait =
            coord::protocol::read<coord::protocol::StoreWaitRequest>(body, where + ": wait", coord::protocol::kRequest);
        std::vector<std::string> keys = std::move(wait.keys);
        const auto timeout = wait_limit(wait.timeout_ms, where + ": wait");
        auto missing = state.store_missing(job, generation, keys);
        if (missing.empty()) return json_response(coord::protocol::ready_reply());
        if (timeout.count() == 0) {
            return error_response(408, "timeout",
                                  fmt::format("{}: keys not set: {}", where, detail::quote_keys(missing)));
        }
        auto read = std::make_shared<ParkedRead>(io);
        read->session = session;
        read->job = job;
        read->generation = generation;
        read->keys = std::move(keys);
        read->timeout = timeout;
        park(std::move(read));
        return std::nullopt;
    }

    switch (method) {
        case http::verb::put: {
            state.store_set(job, generation, key, request.body(), now());
            changed(job);
            return json_response(coord::protocol::set_reply(state.store_version(job, generation)));
        }
        case http::verb::delete_: {
            const bool removed = state.store_remove(job, generation, key, now());
            if (removed) changed(job);
            return json_response(coord::protocol::remove_reply(removed));
        }
        case http::verb::get: {
            uint64_t timeout_ms = 0;
            if (const auto it = target.query.find("timeout_ms"); it != target.query.end()) {
                timeout_ms = whole_number(it->second, where + ": timeout_ms");
            }
            const auto timeout = wait_limit(timeout_ms, where);
            if (auto value = state.store_get(job, generation, key)) return value_response(std::move(*value));
            if (timeout.count() == 0) {
                return error_response(
                    404, "not_found",
                    fmt::format("{}: no key {} (add ?timeout_ms=N to wait for it)", where, detail::quote(key)));
            }
            auto read = std::make_shared<ParkedRead>(io);
            read->session = session;
            read->job = job;
            read->generation = generation;
            read->keys = {key};
            read->get = true;
            read->timeout = timeout;
            park(std::move(read));
            return std::nullopt;
        }
        default:
            return method_not_allowed(request, key == "wait" ? "GET, PUT, DELETE, POST" : "GET, PUT, DELETE");
    }
}

void Coordinator::Impl::park(std::shared_ptr<ParkedRead> read) {
    coord::server::ParkedList& list = parked[read->job];
    if (list.reads.empty()) {
        const coord::Job& j = state.job(read->job);
        list.generation = j.generation();
        list.version = j.store().version();
    }
    list.reads.push_back(read);
    read->timer.expires_after(read->timeout);
    read->timer.async_wait([this, weak = std::weak_ptr<ParkedRead>(read)](boost::system::error_code ec) {
        const auto r = weak.lock();
        if (ec || !r || r->done || stopping) return;
        std::vector<std::string> missing;
        if (const coord::Job* j = state.find_job(r->job); j != nullptr && j->generation() == r->generation) {
            missing = j->store().missing(r->keys);
        } else {
            missing = r->keys;
        }
        const std::string where = fmt::format("store of job '{}' generation {}", r->job, r->generation);
        finish(r, error_response(408, "timeout",
                                 r->get ? fmt::format("{}: key {} was not set within {} ms", where,
                                                      detail::quote(r->keys.front()), r->timeout.count())
                                        : fmt::format("{}: keys not set within {} ms: {}", where, r->timeout.count(),
                                                      detail::quote_keys(missing))));
        if (const auto it = parked.find(r->job); it != parked.end() && it->second.reads.empty()) parked.erase(it);
    });
}

void Coordinator::Impl::recheck(std::string_view job, coord::server::ParkedList& list, bool force) {
    const coord::Job* j = state.find_job(job);
    if (j != nullptr && !force && j->generation() == list.generation && j->store().version() == list.version) return;
    if (j != nullptr) {
        list.generation = j->generation();
        list.version = j->store().version();
    }
    const auto reads = list.reads;
    for (const auto& read : reads) {
        if (read->done) continue;
        try {
            state.store_version(read->job, read->generation);  // the job's and generation's errors
            if (!j->store().missing(read->keys).empty()) continue;
            if (read->get) {
                finish(read, value_response(j->store().find(read->keys.front())->value));
            } else {
                finish(read, json_response(coord::protocol::ready_reply()));
            }
        } catch (const Error& e) {
            finish(read, error_response(e));
        }
    }
}

void Coordinator::Impl::finish(const std::shared_ptr<ParkedRead>& read, Response response) {
    read->done = true;
    read->timer.cancel();
    if (const auto it = parked.find(read->job); it != parked.end()) std::erase(it->second.reads, read);
    const auto session = std::move(read->session);
    session->reply(std::move(response));
}

}  // namespace cohort
