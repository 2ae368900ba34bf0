// The gateway's errors, read: unary ones are {"error", "code", "message"},
// a stream's {"error": {"grpc_code", "message"}}; codes are gRPC's.
#include "etcd/answer.hpp"

#include <boost/json/object.hpp>

#include <fmt/format.h>

namespace cohort::etcd {

namespace json = boost::json;

Reading read_answer(long status, const json::value* body) {
    Reading r;
    const json::object* o = body != nullptr && body->is_object() ? &body->get_object() : nullptr;
    if (o != nullptr && status == 200 && o->if_contains("error") == nullptr) return r;
    if (o == nullptr) {
        r.verdict = Verdict::not_etcd;
        r.message = fmt::format("answered HTTP {} without etcd's JSON", status);
        return r;
    }
    // Unary errors: {"error": "...", "code": N, "message": "..."}; stream
    // errors: {"error": {"grpc_code": N, "message": "..."}}.
    const json::value* error = o->if_contains("error");
    const json::object* detail = error != nullptr && error->is_object() ? &error->get_object() : o;
    if (const auto* m = detail->if_contains("message"); m != nullptr && m->is_string()) r.message = m->get_string();
    if (r.message.empty() && error != nullptr && error->is_string()) r.message = error->get_string();
    const json::value* code = detail->if_contains(detail == o ? "code" : "grpc_code");
    if (code == nullptr || !code->is_int64()) {
        r.verdict = Verdict::not_etcd;
        r.message = fmt::format("answered HTTP {} that etcd's gateway would not", status);
        return r;
    }
    r.code = static_cast<int>(code->get_int64());
    const auto says = [&](std::string_view text) { return r.message.find(text) != std::string::npos; };
    if (r.code == 16) {
        r.verdict = Verdict::auth_expired;
    } else if (r.code == 9 && says("authentication is not enabled")) {
        r.verdict = Verdict::auth_off;
    } else if ((r.code == 14 && (says("no leader") || says("not capable"))) ||
               (r.code == 8 && says("too many requests"))) {
        r.verdict = Verdict::retry_unapplied;
    } else if (r.code == 14 || r.code == 4) {
        r.verdict = Verdict::retry_maybe;
    } else {
        r.verdict = Verdict::refused;
    }
    return r;
}

Errc errc_for(const Reading& r) {
    switch (r.code) {
        case 5: return Errc::not_found;
        case 7: return Errc::permission_denied;
        case 11: return Errc::out_of_range;
        case 3:
            if (r.message.find("user name is empty") != std::string::npos) return Errc::permission_denied;
            return Errc::invalid_argument;
        default: return Errc::invalid_argument;
    }
}

std::string advice_for(const Reading& r) {
    if (r.code == 3 && r.message.find("user name is empty") != std::string::npos) {
        return "; etcd has auth enabled: give a user and a password (etcd:// options user= and password-file=)";
    }
    if (r.code == 7) return "; grant the etcd user's role access to these keys (etcdctl role grant-permission)";
    // etcd's own check, or gRPC's a little above it.
    if (r.message.find("request is too large") != std::string::npos ||
        r.message.find("larger than max") != std::string::npos) {
        return "; etcd takes requests of at most --max-request-bytes (1.5 MiB unless its operator raised it)";
    }
    return "";
}

}  // namespace cohort::etcd
