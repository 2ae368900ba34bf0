// Idempotency keys as they arrive over HTTP: the header, its check, and the
// fingerprint of the request a key names. The answers kept by key are the
// state's (coordinator/state/answers.hpp), journaled with their changes;
// idempotency_routes.cpp ties the two together (docs/coordinator.md,
// "Retries").
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace cohort::coord::server {

// The header a client names its request with, and the longest key taken.
inline constexpr std::string_view kIdempotencyHeader = "Idempotency-Key";
inline constexpr std::size_t kMaxIdempotencyKey = 128;

// The key as sent, checked: 1 to 128 visible ASCII characters, else
// Error(invalid_argument) naming the rule.
std::string checked_idempotency_key(std::string_view value);

// What a key was first used for: the method, the target and a hash of the
// body. A key sent again with another request is the client's mistake.
std::string request_fingerprint(std::string_view method, std::string_view target, std::string_view body);

}  // namespace cohort::coord::server
