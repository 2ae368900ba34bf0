// Plain-text values for the rules part of the C ABI (JSON comes from the
// library's to_json functions).
#pragma once

#include <cohort/expression.hpp>

#include <string>

#include <fmt/format.h>

namespace cohort::capi {

// A value as plain text: "true", "42", "0.5", strings unquoted.
inline std::string plain_text(const cohort::Value& value) {
    switch (value.type().value_or(cohort::Type::list)) {
        case cohort::Type::boolean:
            return value.as_bool() ? "true" : "false";
        case cohort::Type::integer:
            return fmt::format("{}", value.as_int());
        case cohort::Type::number:
            return fmt::format("{}", value.as_number());
        case cohort::Type::string:
            return value.as_string();
        default:
            return "";
    }
}

}  // namespace cohort::capi
