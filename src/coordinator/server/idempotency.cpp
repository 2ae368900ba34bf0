// IdempotencyTable: remembering first answers, and forgetting them by age,
// count and size.
#include "coordinator/server/idempotency.hpp"

#include "core/hash.hpp"

#include <cohort/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <utility>

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

IdempotencyTable::Lookup IdempotencyTable::find(const std::string& key, std::string_view fingerprint,
                                                Clock::time_point now) {
    expire(now);
    const auto it = entries_.find(key);
    if (it == entries_.end()) return {};
    if (it->second.fingerprint != fingerprint) return {Lookup::reused, nullptr, &it->second.fingerprint};
    return {Lookup::replay, &it->second.response, nullptr};
}

void IdempotencyTable::remember(std::string key, std::string fingerprint, Response response, Clock::time_point now) {
    if (limits_.window.count() <= 0 || limits_.entries == 0) return;
    expire(now);
    if (const auto it = entries_.find(key); it != entries_.end()) {
        bytes_ -= cost(it->first, it->second);
        entries_.erase(it);
    }
    Entry entry{std::move(fingerprint), std::move(response), now + limits_.window, next_serial_++};
    const std::size_t size = cost(key, entry);
    // An answer larger than all the room there is is not kept: its retry
    // applies again, as without a key.
    if (size > limits_.bytes) return;
    while (!entries_.empty() && (entries_.size() >= limits_.entries || bytes_ + size > limits_.bytes)) erase_oldest();
    order_.emplace_back(entry.serial, key);
    bytes_ += size;
    entries_.emplace(std::move(key), std::move(entry));
}

void IdempotencyTable::clear() {
    entries_.clear();
    order_.clear();
    bytes_ = 0;
}

void IdempotencyTable::expire(Clock::time_point now) {
    while (!order_.empty()) {
        const auto it = entries_.find(order_.front().second);
        const bool stale = it == entries_.end() || it->second.serial != order_.front().first;
        if (!stale && it->second.expires > now) return;
        if (!stale) {
            bytes_ -= cost(it->first, it->second);
            entries_.erase(it);
        }
        order_.pop_front();
    }
}

void IdempotencyTable::erase_oldest() {
    while (!order_.empty()) {
        auto [serial, key] = std::move(order_.front());
        order_.pop_front();
        const auto it = entries_.find(key);
        if (it == entries_.end() || it->second.serial != serial) continue;  // stale record
        bytes_ -= cost(it->first, it->second);
        entries_.erase(it);
        return;
    }
}

std::size_t IdempotencyTable::cost(const std::string& key, const Entry& entry) {
    // The bodies dominate; the rest is a rough fixed overhead per entry.
    return key.size() + entry.fingerprint.size() + entry.response.body.size() + entry.response.content_type.size() +
           128;
}

}  // namespace cohort::coord::server
