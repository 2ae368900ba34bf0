// The JSON forms of a health evaluation. Absent values are left out, not
// null, as in the rest of the job state.
#include "health/job_health.hpp"

#include <boost/json.hpp>

namespace cohort::health {

namespace json = boost::json;

json::object to_json(const NodeHealth& n) {
    json::object o;
    o["member"] = n.member;
    o["rank"] = n.rank;
    if (n.relative_score) o["relative_score"] = *n.relative_score;
    if (n.individual_score) o["individual_score"] = *n.individual_score;
    if (n.busy) {
        o["busy"] = *n.busy;
        o["busy_per"] = to_string(n.busy_unit);
    }
    o["straggler"] = n.straggler;
    if (n.slow_since) o["slow_since"] = *n.slow_since;
    if (n.step) o["step"] = *n.step;
    if (n.stalled_for) o["stalled_for"] = *n.stalled_for;
    o["hung"] = n.hung;
    if (n.diagnosis) o["diagnosis"] = to_json(*n.diagnosis);
    return o;
}

json::object to_json(const JobHealth& j) {
    json::object o;
    o["time"] = j.time;
    o["hung"] = j.hung;
    if (j.diagnosis) o["diagnosis"] = to_json(*j.diagnosis);
    o["hung_nodes"] = j.hung_nodes;
    json::array stragglers(j.stragglers.begin(), j.stragglers.end());
    o["stragglers"] = std::move(stragglers);
    json::array nodes;
    nodes.reserve(j.nodes.size());
    for (const NodeHealth& n : j.nodes) nodes.push_back(to_json(n));
    o["nodes"] = std::move(nodes);
    return o;
}

}  // namespace cohort::health
