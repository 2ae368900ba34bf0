// KeyValueStore: keys, versions and add's integer arithmetic, with the same
// messages as the tcp:// store's server.
#include "coordinator/state/kv_store.hpp"

#include "comm/store/backends.hpp"
#include "coordinator/protocol/json_bytes.hpp"
#include "core/json_fields.hpp"

#include <fmt/format.h>
#include <boost/json/array.hpp>

namespace cohort::coord {

namespace json = boost::json;

const KeyValueStore::Entry* KeyValueStore::find(std::string_view key) const {
    const auto it = entries_.find(key);
    return it == entries_.end() ? nullptr : &it->second;
}

std::vector<std::string> KeyValueStore::missing(std::span<const std::string> keys) const {
    std::vector<std::string> out;
    for (const auto& key : keys) {
        if (!entries_.contains(key)) out.push_back(key);
    }
    return out;
}

int64_t KeyValueStore::sum_after_add(std::string_view address, std::string_view key, int64_t delta) const {
    const Entry* entry = find(key);
    const auto current = entry == nullptr ? std::optional<int64_t>(0) : detail::parse_stored_integer(entry->value);
    if (!current) {
        throw Error(Errc::invalid_argument,
                    fmt::format("store {}: add: the value of key {} is not an integer: {}", address, detail::quote(key),
                                detail::quote(std::string_view(entry->value).substr(0, 40))));
    }
    int64_t sum = 0;
    if (__builtin_add_overflow(*current, delta, &sum)) {
        throw Error(Errc::invalid_argument, fmt::format("store {}: add: {} + {} overflows key {}", address, *current,
                                                        delta, detail::quote(key)));
    }
    return sum;
}

void KeyValueStore::set(std::string_view key, std::string value) {
    ++version_;
    auto it = entries_.find(key);
    if (it == entries_.end()) it = entries_.emplace(std::string(key), Entry{}).first;
    it->second.value = std::move(value);
    it->second.version = version_;
}

bool KeyValueStore::remove(std::string_view key) {
    const auto it = entries_.find(key);
    if (it == entries_.end()) return false;
    entries_.erase(it);
    ++version_;
    return true;
}

json::object KeyValueStore::to_json() const {
    json::array keys;
    for (const auto& [key, entry] : entries_) {
        json::object o;
        o["key"] = bytes_to_json(key);
        o["value"] = bytes_to_json(entry.value);
        o["version"] = entry.version;
        keys.push_back(std::move(o));
    }
    json::object out;
    out["version"] = version_;
    out["keys"] = std::move(keys);
    return out;
}

KeyValueStore KeyValueStore::from_json(const json::value& value, std::string_view where, Errc code) {
    detail::FieldReader reader(value, std::string(where), code);
    reader.allow({"version", "keys"});
    KeyValueStore store;
    store.version_ = reader.uint("version");
    std::size_t i = 0;
    for (const auto& item : reader.array("keys")) {
        const std::string at = fmt::format("{}: keys[{}]", where, i++);
        detail::FieldReader entry(item, at, code);
        entry.allow({"key", "value", "version"});
        std::string key = bytes_from_json(entry.value("key"), at + ": key", code);
        Entry e{bytes_from_json(entry.value("value"), at + ": value", code), entry.uint("version")};
        if (e.version > store.version_) entry.fail("version", "is past the store's version");
        if (!store.entries_.emplace(std::move(key), std::move(e)).second) entry.fail("key", "appears twice");
    }
    return store;
}

}  // namespace cohort::coord
