#include "core/json_text.hpp"

#include <cmath>

#include <boost/json/serialize.hpp>
#include <fmt/format.h>

namespace cohort::detail {

namespace {

void write(std::string& out, const boost::json::value& v) {
    switch (v.kind()) {
        case boost::json::kind::null: out += "null"; break;
        case boost::json::kind::bool_: out += v.get_bool() ? "true" : "false"; break;
        case boost::json::kind::int64: out += fmt::format("{}", v.get_int64()); break;
        case boost::json::kind::uint64: out += fmt::format("{}", v.get_uint64()); break;
        case boost::json::kind::double_: {
            const double d = v.get_double();
            if (!std::isfinite(d)) {
                out += "null";
                break;
            }
            // Shortest round-trip form, with a '.' so readers keep it a float.
            std::string text = fmt::format("{}", d);
            if (text.find_first_of(".en") == std::string::npos) text += ".0";
            out += text;
            break;
        }
        case boost::json::kind::string: out += boost::json::serialize(v.get_string()); break;
        case boost::json::kind::array: {
            out += '[';
            bool first = true;
            for (const auto& item : v.get_array()) {
                if (!first) out += ',';
                first = false;
                write(out, item);
            }
            out += ']';
            break;
        }
        case boost::json::kind::object: {
            out += '{';
            bool first = true;
            for (const auto& [key, item] : v.get_object()) {
                if (!first) out += ',';
                first = false;
                out += boost::json::serialize(boost::json::string_view(key));
                out += ':';
                write(out, item);
            }
            out += '}';
            break;
        }
    }
}

}  // namespace

std::string to_text(const boost::json::value& value) {
    std::string out;
    write(out, value);
    return out;
}

}  // namespace cohort::detail
