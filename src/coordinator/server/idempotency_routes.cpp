// Requests that carry an Idempotency-Key: a retry of a change whose answer
// was lost gets the first answer again, and the change is not made twice.
// Everything runs on the io thread and route() makes its change before it
// returns, so a retry can only arrive once the first answer is kept; it
// then goes through answer() like the first, and so waits for the same
// journal sync. The answer is the state's (an AnswerKept event) and is
// committed with the change in one batch, so a coordinator killed before
// its reply went out knows the key after its restart.
#include "coordinator/server/session.hpp"
#include "core/text.hpp"

#include <fmt/format.h>

namespace cohort {

namespace http = boost::beast::http;

namespace {

coord::KeptAnswer kept(const coord::server::Response& r) {
    return {r.status, r.body, r.content_type, r.allow};
}

coord::server::Response sent_again(const coord::KeptAnswer& a) {
    coord::server::Response r;
    r.status = a.status;
    r.body = a.body;
    r.content_type = a.content_type;
    r.allow = a.allow;
    return r;
}

}  // namespace

std::optional<coord::server::Response> Coordinator::Impl::route_keyed(const std::shared_ptr<HttpSession>& session,
                                                                     const Request& request) {
    const auto header = request.find(coord::server::kIdempotencyHeader);
    // Reads change nothing; without the token the request is refused by
    // route() before anything is looked up.
    if (header == request.end() || request.method() == http::verb::get || request.method() == http::verb::head ||
        !authorised(request)) {
        return route(session, request);
    }
    std::string key =
        coord::server::checked_idempotency_key(std::string_view(header->value().data(), header->value().size()));
    std::string fingerprint = coord::server::request_fingerprint(
        std::string_view(request.method_string().data(), request.method_string().size()),
        std::string_view(request.target().data(), request.target().size()), request.body());
    const double t = now();
    const auto seen = state.find_answer(key, fingerprint, t);
    if (seen.kind == coord::AnswerTable::Lookup::replay) {
        ++replayed;
        return sent_again(*seen.answer);
    }
    if (seen.kind == coord::AnswerTable::Lookup::reused) {
        return coord::server::error_response(
            422, "idempotency_key_reused",
            fmt::format("{} {}: the {} {} was first sent with another request ({}); a key names one call and is "
                        "reused only for its retries: send a fresh key",
                        std::string(request.method_string()),
                        detail::escape_bytes(std::string_view(request.target().data(), request.target().size()), 200),
                        coord::server::kIdempotencyHeader, detail::quote(key), *seen.fingerprint));
    }
    // Hold changed()'s commits until the answer is kept too (see
    // deferred_changes), whatever route() does.
    deferred_changes.emplace();
    std::optional<Response> response;
    try {
        response = route(session, request);
    } catch (const Error& e) {
        response = coord::server::error_response(e);
    } catch (...) {
        auto jobs = std::exchange(deferred_changes, std::nullopt);
        for (const std::string& job : *jobs) changed(job);
        throw;
    }
    // A parked request (a store wait) has changed nothing yet, and a 5xx
    // asks the client to try again: neither is an answer to keep. Nor is
    // any once the journal failed: nothing becomes durable after that.
    if (response && response->status < 500 && journal_failure.empty()) state.keep_answer(std::move(key), std::move(fingerprint), kept(*response), t);
    auto jobs = std::exchange(deferred_changes, std::nullopt);
    if (jobs->empty()) commit_changes();  // the answer alone (an error changes nothing else)
    for (const std::string& job : *jobs) changed(job);
    return response;
}

}  // namespace cohort
