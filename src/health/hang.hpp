// Hang detection and diagnosis. A live member whose step has not advanced
// for hang_timeout is hung; a member that has never reported a step is not
// judged (it may still be loading or compiling). The job is hung when every
// judged member is. A diagnosis names a cause where the evidence allows, in
// this order: a collective some ranks never entered, a GPU fault, unknown.
#pragma once

#include "health/collective.hpp"
#include "health/diagnosis.hpp"
#include "health/job_health.hpp"
#include "health/settings.hpp"
#include "health/window.hpp"

#include <optional>
#include <span>
#include <string>
#include <vector>

namespace cohort::health {

// Seconds since the node's step last advanced; empty before its first step.
std::optional<double> stalled_for(const NodeWindow& window, double now);

// What is known of a stalled node: its step and for how long it has not
// advanced, its collective state, its GPUs.
std::vector<std::string> node_evidence(const NodeWindow& window, double now);

// Why `node` is hung. `stall` is the job's collective stall, if any.
Diagnosis diagnose_node(const NodeInput& node, const CollectiveStall* stall, double now, const Settings& settings);

// Why the job is hung: `health[i]` is the evaluation of `nodes[i]`, with a
// diagnosis for each hung node.
Diagnosis diagnose_job(std::span<const NodeInput> nodes, std::span<const NodeHealth> health,
                       const CollectiveStall* stall);

}  // namespace cohort::health
