// parse_json: Boost.JSON's parser with a handler that builds the value
// itself and converts each number's text with std::from_chars, which is
// correctly rounded.
#include "coordinator/state/json_parse.hpp"

#include <cohort/error.hpp>

#include <charconv>
#include <cstdint>
#include <string>

#include <fmt/format.h>
#include <boost/json/basic_parser_impl.hpp>
#include <boost/json/value_stack.hpp>

namespace cohort::coord {

namespace json = boost::json;

namespace {

struct ExactHandler {
    static constexpr std::size_t max_array_size = static_cast<std::size_t>(-1);
    static constexpr std::size_t max_object_size = static_cast<std::size_t>(-1);
    static constexpr std::size_t max_string_size = static_cast<std::size_t>(-1);
    static constexpr std::size_t max_key_size = static_cast<std::size_t>(-1);

    json::value_stack stack;
    std::string number;  // a double's text when it arrives in parts

    bool on_document_begin(json::error_code&) {
        stack.reset();
        return true;
    }
    bool on_document_end(json::error_code&) { return true; }
    bool on_array_begin(json::error_code&) { return true; }
    bool on_array_end(std::size_t n, json::error_code&) {
        stack.push_array(n);
        return true;
    }
    bool on_object_begin(json::error_code&) { return true; }
    bool on_object_end(std::size_t n, json::error_code&) {
        stack.push_object(n);
        return true;
    }
    bool on_string_part(json::string_view s, std::size_t, json::error_code&) {
        stack.push_chars(s);
        return true;
    }
    bool on_string(json::string_view s, std::size_t, json::error_code&) {
        stack.push_string(s);
        return true;
    }
    bool on_key_part(json::string_view s, std::size_t, json::error_code&) {
        stack.push_chars(s);
        return true;
    }
    bool on_key(json::string_view s, std::size_t, json::error_code&) {
        stack.push_key(s);
        return true;
    }
    bool on_number_part(json::string_view s, json::error_code&) {
        number.append(s.data(), s.size());
        return true;
    }
    bool on_int64(int64_t i, json::string_view, json::error_code&) {
        number.clear();
        stack.push_int64(i);
        return true;
    }
    bool on_uint64(uint64_t u, json::string_view, json::error_code&) {
        number.clear();
        stack.push_uint64(u);
        return true;
    }
    bool on_double(double d, json::string_view s, json::error_code&) {
        number.append(s.data(), s.size());
        double exact = d;
        // JSON's number syntax is a subset of what from_chars reads; out of
        // range keeps Boost's value.
        std::from_chars(number.data(), number.data() + number.size(), exact);
        number.clear();
        stack.push_double(exact);
        return true;
    }
    bool on_bool(bool b, json::error_code&) {
        stack.push_bool(b);
        return true;
    }
    bool on_null(json::error_code&) {
        stack.push_null();
        return true;
    }
    bool on_comment_part(json::string_view, json::error_code&) { return true; }
    bool on_comment(json::string_view, json::error_code&) { return true; }
};

}  // namespace

json::value parse_json(std::string_view text) {
    json::basic_parser<ExactHandler> parser(json::parse_options{});
    json::error_code ec;
    const std::size_t used = parser.write_some(false, text.data(), text.size(), ec);
    if (ec) throw Error(Errc::parse, fmt::format("malformed JSON at byte {}: {}", used, ec.message()));
    if (used != text.size()) {
        throw Error(Errc::parse, fmt::format("malformed JSON at byte {}: text after the value", used));
    }
    return parser.handler().stack.release();
}

}  // namespace cohort::coord
