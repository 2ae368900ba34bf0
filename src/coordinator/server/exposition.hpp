// Prometheus' text exposition format (version 0.0.4), as GET /metrics
// writes it: a family's HELP and TYPE lines, then its samples, families
// never interleaved (promtool check metrics enforces this).
#pragma once

#include "coordinator/state/histogram.hpp"

#include <string>
#include <string_view>

namespace cohort::coord::server {

// A label value, quoted: backslash, quote and newline escaped.
std::string label_text(std::string_view value);
// The HELP and TYPE lines of family `name`.
void family(std::string& out, std::string_view name, std::string_view type, std::string_view help);
// The _bucket, _sum and _count samples of one histogram series; `labels` is
// empty or `job="a",reason="b"` (values already label_text()).
void histogram_series(std::string& out, std::string_view name, std::string_view labels, const Histogram& h);

}  // namespace cohort::coord::server
