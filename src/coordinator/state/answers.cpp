// AnswerTable: remembering first answers, forgetting them by age, count and
// size, and carrying them through snapshots.
#include "coordinator/state/answers.hpp"

#include "coordinator/protocol/json_bytes.hpp"
#include "core/json_fields.hpp"

#include <cohort/error.hpp>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include <fmt/format.h>

#include <utility>

namespace cohort::coord {

namespace json = boost::json;

AnswerTable::Lookup AnswerTable::find(const std::string& key, std::string_view fingerprint, double now) const {
    const auto it = entries_.find(key);
    if (it == entries_.end() || it->second.kept_at + limits_.window <= now) return {};
    if (it->second.fingerprint != fingerprint) return {Lookup::reused, nullptr, &it->second.fingerprint};
    return {Lookup::replay, &it->second.answer, nullptr};
}

bool AnswerTable::keeps(const std::string& key, const std::string& fingerprint, const KeptAnswer& answer) const {
    // An answer larger than all the room there is is not kept: its retry
    // applies again, as without a key.
    return limits_.window > 0 && limits_.entries > 0 && cost(key, fingerprint, answer) <= limits_.bytes;
}

void AnswerTable::remember(std::string key, std::string fingerprint, KeptAnswer answer, double now) {
    expire(now);
    if (const auto it = entries_.find(key); it != entries_.end()) {
        bytes_ -= cost(it->first, it->second.fingerprint, it->second.answer);
        entries_.erase(it);
    }
    if (!keeps(key, fingerprint, answer)) return;
    const std::size_t size = cost(key, fingerprint, answer);
    while (!entries_.empty() && (entries_.size() >= limits_.entries || bytes_ + size > limits_.bytes)) erase_oldest();
    Entry entry{std::move(fingerprint), std::move(answer), now, next_serial_++};
    order_.emplace_back(entry.serial, key);
    bytes_ += size;
    entries_.emplace(std::move(key), std::move(entry));
}

void AnswerTable::set_limits(AnswerLimits limits) {
    limits_ = limits;
    trim();
}

void AnswerTable::trim() {
    if (limits_.window <= 0 || limits_.entries == 0) return clear();
    while (!entries_.empty() && (entries_.size() > limits_.entries || bytes_ > limits_.bytes)) erase_oldest();
}

void AnswerTable::clear() {
    entries_.clear();
    order_.clear();
    bytes_ = 0;
}

void AnswerTable::expire(double now) {
    while (!order_.empty()) {
        const auto it = entries_.find(order_.front().second);
        const bool stale = it == entries_.end() || it->second.serial != order_.front().first;
        if (!stale && it->second.kept_at + limits_.window > now) return;
        if (!stale) {
            bytes_ -= cost(it->first, it->second.fingerprint, it->second.answer);
            entries_.erase(it);
        }
        order_.pop_front();
    }
}

void AnswerTable::erase_oldest() {
    while (!order_.empty()) {
        auto [serial, key] = std::move(order_.front());
        order_.pop_front();
        const auto it = entries_.find(key);
        if (it == entries_.end() || it->second.serial != serial) continue;  // stale record
        bytes_ -= cost(it->first, it->second.fingerprint, it->second.answer);
        entries_.erase(it);
        return;
    }
}

std::size_t AnswerTable::cost(std::string_view key, std::string_view fingerprint, const KeptAnswer& answer) {
    // The bodies dominate; the rest is a rough fixed overhead per entry.
    return key.size() + fingerprint.size() + answer.body.size() + answer.content_type.size() + answer.allow.size() +
           128;
}

json::value AnswerTable::to_json() const {
    json::array out;
    for (const auto& [serial, key] : order_) {
        const auto it = entries_.find(key);
        if (it == entries_.end() || it->second.serial != serial) continue;
        const Entry& e = it->second;
        out.push_back(json::object{{"key", key},
                                   {"fingerprint", e.fingerprint},
                                   {"status", e.answer.status},
                                   {"body", bytes_to_json(e.answer.body)},
                                   {"content_type", e.answer.content_type},
                                   {"allow", e.answer.allow},
                                   {"kept_at", e.kept_at}});
    }
    return out;
}

void AnswerTable::from_json(const json::value& value, const std::string& where) {
    if (!value.is_array()) throw Error(Errc::parse, fmt::format("{}: must be an array", where));
    const json::array& items = value.get_array();
    for (std::size_t i = 0; i < items.size(); ++i) {
        detail::FieldReader r(items[i], fmt::format("{}[{}]", where, i), Errc::parse);
        r.allow({"key", "fingerprint", "status", "body", "content_type", "allow", "kept_at"});
        KeptAnswer answer;
        const uint64_t status = r.uint("status");
        if (status < 100 || status > 599) r.fail("status", fmt::format("{} is not an HTTP status", status));
        answer.status = static_cast<unsigned>(status);
        answer.body = bytes_from_json(r.value("body"), r.where() + ": body", Errc::parse);
        answer.content_type = r.string("content_type");
        answer.allow = r.string_or("allow", "");
        remember(r.string("key"), r.string("fingerprint"), std::move(answer), r.number("kept_at"));
    }
}

}  // namespace cohort::coord
