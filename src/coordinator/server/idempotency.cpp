// Idempotency-Key headers: their check and the fingerprint of a request.
#include "coordinator/server/idempotency.hpp"

#include "core/hash.hpp"

#include <cohort/error.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace cohort::coord::server {

std::string checked_idempotency_key(std::string_view value) {
    const bool visible = std::all_of(value.begin(), value.end(), [](char c) {
        const auto u = static_cast<unsigned char>(c);
        return u > 0x20 && u < 0x7f;
    });
    if (value.empty() || value.size() > kMaxIdempotencyKey || !visible) {
        throw Error(Errc::invalid_argument,
                    fmt::format("the {} header must be 1 to {} visible ASCII characters (no spaces), not {} bytes{}; "
                                "send a fresh random value per call, the same one on each retry of it",
                                kIdempotencyHeader, kMaxIdempotencyKey, value.size(),
                                visible ? "" : " holding spaces or control characters"));
    }
    return std::string(value);
}

std::string request_fingerprint(std::string_view method, std::string_view target, std::string_view body) {
    return fmt::format("{} {} (body of {} bytes, hash {:016x})", method, target, body.size(),
                       detail::hash_string(body));
}

}  // namespace cohort::coord::server
