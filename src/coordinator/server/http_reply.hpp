// What the coordinator answers: a status, a body and its type. Errors are
// {"error": "<short>", "detail": "<what, where, what to do>"}.
#pragma once

#include <cohort/error.hpp>

#include <string>
#include <string_view>

#include <boost/json/value.hpp>

namespace cohort::coord::server {

struct Response {
    unsigned status = 200;
    std::string body;
    std::string content_type = "application/json";
    std::string allow;  // for 405: the methods the path takes
    std::string leader;  // X-Cohort-Leader: where a follower sends clients
    // Sent without waiting for the journal (a heartbeat answered while etcd
    // is away: it reports liveness, which is not journaled).
    bool unheld = false;
};

Response json_response(const boost::json::value& value, unsigned status = 200);
Response error_response(unsigned status, std::string_view error, std::string_view detail);
// The status of cohort::Error's code (state.hpp documents the mapping) and
// its name as the short error.
Response error_response(const Error& error);
unsigned http_status(Errc code);
// "not_found", "conflict", ...: the short error of a code.
std::string_view error_name(Errc code);

// Equal without leaking, through timing, how much of a secret matched.
bool equal_in_constant_time(std::string_view a, std::string_view b);

}  // namespace cohort::coord::server
