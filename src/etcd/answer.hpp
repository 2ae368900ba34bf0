// What an answer from etcd's gateway means for the call that got it: done,
// worth another endpoint (and whether etcd may have applied it), a token to
// renew, or a refusal to report with the matching Errc.
#pragma once

#include <cohort/error.hpp>

#include <boost/json/value.hpp>

#include <string>

namespace cohort::etcd {

enum class Verdict { ok, auth_expired, auth_off, retry_unapplied, retry_maybe, refused, not_etcd };

struct Reading {
    Verdict verdict = Verdict::ok;
    int code = 0;  // gRPC status code
    std::string message;
};

// `body` is null when the reply was not JSON.
Reading read_answer(long status, const boost::json::value* body);
// The Errc of a refusal, and a hint for the user to append to its message.
Errc errc_for(const Reading& r);
std::string advice_for(const Reading& r);

}  // namespace cohort::etcd
