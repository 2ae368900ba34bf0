// Requests that carry an Idempotency-Key: a retry of a change whose answer
// was lost gets the first answer again, and the change is not made twice.
// Everything runs on the io thread and route() makes its change before it
// returns, so a retry can only arrive once the first answer is remembered;
// it then goes through answer() like the first, and so waits for the same
// journal sync.
#include "coordinator/server/session.hpp"
#include "core/text.hpp"

#include <fmt/format.h>

namespace cohort {

namespace http = boost::beast::http;
using coord::server::IdempotencyTable;

std::optional<coord::server::Response> Coordinator::Impl::route_once(const std::shared_ptr<HttpSession>& session,
                                                                     const Request& request) {
    const auto header = request.find(coord::server::kIdempotencyHeader);
    // Reads change nothing; without the token the request is refused by
    // route() before anything is looked up.
    if (header == request.end() || request.method() == http::verb::get || request.method() == http::verb::head ||
        !authorised(request)) {
        return route(session, request);
    }
    const std::string key =
        coord::server::checked_idempotency_key(std::string_view(header->value().data(), header->value().size()));
    std::string fingerprint = coord::server::request_fingerprint(
        std::string_view(request.method_string().data(), request.method_string().size()),
        std::string_view(request.target().data(), request.target().size()), request.body());
    const auto now = IdempotencyTable::Clock::now();
    const IdempotencyTable::Lookup seen = answered.find(key, fingerprint, now);
    if (seen.kind == IdempotencyTable::Lookup::replay) {
        ++replayed;
        return *seen.response;
    }
    if (seen.kind == IdempotencyTable::Lookup::reused) {
        return coord::server::error_response(
            422, "idempotency_key_reused",
            fmt::format("{} {}: the {} {} was first sent with another request ({}); a key names one call and is "
                        "reused only for its retries: send a fresh key",
                        std::string(request.method_string()),
                        detail::escape_bytes(std::string_view(request.target().data(), request.target().size()), 200),
                        coord::server::kIdempotencyHeader, detail::quote(key), *seen.fingerprint));
    }
    std::optional<Response> response;
    try {
        response = route(session, request);
    } catch (const Error& e) {
        response = coord::server::error_response(e);
    }
    // A parked request (a store wait) has changed nothing yet, and a 5xx
    // asks the client to try again: neither is an answer to keep.
    if (response && response->status < 500) answered.remember(key, std::move(fingerprint), *response, now);
    return response;
}

}  // namespace cohort
