// The fields of a JSON object a C caller passes as text (a workload, a
// transfer request, scheduler options), read one at a time so that every
// error names the function, the parameter and the field.
#pragma once

#include <boost/json/value.hpp>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::capi {

class JsonFields {
public:
    // Error(invalid_argument) "FN: PARAM is not JSON: ..." or "... must be
    // an object". NULL or "" is an empty object where `empty_ok`.
    JsonFields(const char* text, const char* fn, const char* param, bool empty_ok);

    bool has(std::string_view key) const;
    std::optional<std::string> text(std::string_view key);
    std::optional<uint64_t> count(std::string_view key, uint64_t largest = UINT64_MAX);
    std::optional<int64_t> integer(std::string_view key, int64_t smallest, int64_t largest);
    std::optional<double> number(std::string_view key);
    std::optional<bool> flag(std::string_view key);
    std::optional<std::vector<std::string>> texts(std::string_view key);
    std::optional<std::vector<uint32_t>> indices(std::string_view key);

    // Error(invalid_argument) for a field that is required and absent.
    void require(std::string_view key) const;
    // Error(invalid_argument) naming the first field no reader asked for.
    void finish() const;

private:
    const boost::json::value* find(std::string_view key);
    [[noreturn]] void wrong(std::string_view key, std::string_view want) const;

    boost::json::value parsed_;
    std::string fn_, param_;
    std::set<std::string, std::less<>> read_;
};

}  // namespace cohort::capi
