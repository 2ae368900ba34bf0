// What one evaluation of a job's health found, per member and for the job:
// the form that goes into the job state, /metrics and the rule engine.
#pragma once

#include "health/diagnosis.hpp"
#include "health/straggler.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <boost/json/object.hpp>

namespace cohort::health {

struct NodeHealth {
    std::string member;
    uint32_t rank = 0;
    std::optional<double> relative_score;  // see Scores
    std::optional<double> individual_score;
    BusyUnit busy_unit = BusyUnit::none;
    std::optional<double> busy;          // recent busy seconds per busy_unit
    bool straggler = false;              // relative score below the threshold for straggler_for
    std::optional<double> slow_since;    // since when it has been below the threshold
    std::optional<uint64_t> step;        // the highest step; empty: not judged for hangs yet
    std::optional<double> stalled_for;   // seconds since the step last advanced
    bool hung = false;                   // stalled_for >= hang_timeout
    std::optional<Diagnosis> diagnosis;  // when hung
};

struct JobHealth {
    double time = 0;                     // when it was evaluated
    bool hung = false;                   // every judged member hung, and at least one judged
    std::optional<Diagnosis> diagnosis;  // when hung
    std::size_t hung_nodes = 0;
    std::vector<std::string> stragglers;  // member ids, in rank order
    std::vector<NodeHealth> nodes;        // in the order they were passed in
};

boost::json::object to_json(const NodeHealth& node);
boost::json::object to_json(const JobHealth& job);

}  // namespace cohort::health
