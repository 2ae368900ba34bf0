// One generation's key-value store: the data of cohort::Store (store.hpp)
// without the waiting. The server waits itself: missing() says which keys a
// get or wait still needs, and version() changes with every write, so a
// parked request knows when to look again.
#pragma once

#include <cohort/error.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

namespace cohort::coord {

class KeyValueStore {
public:
    struct Entry {
        std::string value;
        uint64_t version = 0;  // the store's version() right after this write
        bool operator==(const Entry&) const = default;
    };

    const Entry* find(std::string_view key) const;
    std::vector<std::string> missing(std::span<const std::string> keys) const;
    // Counts writes (set, add, a compare_and_set that stored, remove of a key
    // that existed) since the generation began.
    uint64_t version() const { return version_; }
    std::size_t size() const { return entries_.size(); }
    const std::map<std::string, Entry, std::less<>>& entries() const { return entries_; }

    // The integer add(key, delta) would store (absent counts as 0).
    // Error(invalid_argument) naming `address` and the key when the value is
    // not an integer or the sum overflows.
    int64_t sum_after_add(std::string_view address, std::string_view key, int64_t delta) const;

    // Applied from events only.
    void set(std::string_view key, std::string value);
    bool remove(std::string_view key);

    boost::json::object to_json() const;
    static KeyValueStore from_json(const boost::json::value& value, std::string_view where, Errc code = Errc::parse);

    bool operator==(const KeyValueStore&) const = default;

private:
    std::map<std::string, Entry, std::less<>> entries_;
    uint64_t version_ = 0;
};

}  // namespace cohort::coord
