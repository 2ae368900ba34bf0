// Prometheus' text exposition format: quoting, family headers, histograms.
#include "coordinator/server/exposition.hpp"

#include <fmt/format.h>

namespace cohort::coord::server {

std::string label_text(std::string_view value) {
    std::string out = "\"";
    for (char c : value) {
        if (c == '\\' || c == '"') out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    out += '"';
    return out;
}

void family(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void histogram_series(std::string& out, std::string_view name, std::string_view labels, const Histogram& h) {
    const std::string_view comma = labels.empty() ? "" : ",";
    for (std::size_t i = 0; i < h.bounds().size(); ++i) {
        out += fmt::format("{}_bucket{{{}{}le=\"{}\"}} {}\n", name, labels, comma, h.bounds()[i], h.cumulative(i));
    }
    out += fmt::format("{}_bucket{{{}{}le=\"+Inf\"}} {}\n", name, labels, comma, h.count());
    const std::string braces = labels.empty() ? std::string() : fmt::format("{{{}}}", labels);
    out += fmt::format("{}_sum{} {}\n{}_count{} {}\n", name, braces, h.sum(), name, braces, h.count());
}

}  // namespace cohort::coord::server
