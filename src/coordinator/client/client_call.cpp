// The client's retry loop across the replicas, and the mapping of error
// answers to cohort::Error (docs/coordinator.md, "Clients and several
// replicas").
#include "coordinator/client/client_call.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <random>
#include <thread>
#include <utility>
#include <vector>

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

std::string duration_text(std::chrono::milliseconds d) {
    if (d.count() < 1000) return fmt::format("{} ms", d.count());
    return fmt::format("{:.1f} s", static_cast<double>(d.count()) / 1000.0);
}

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

}  // namespace cohort
