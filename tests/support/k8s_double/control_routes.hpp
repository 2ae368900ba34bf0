// The double's /_double/ routes, for a test in another process:
//   POST /_double/pods/NAME/FATE[?exitCode=N&reason=R]   FATE: running, succeeded, failed,
//        oom_killed, evicted, preempted, node_lost, unschedulable, image_pull_error
//   POST /_double/pods/NAME/oom          SIGKILL its process (with a runner) and report OOMKilled
//   POST /_double/capacity?pods=N        how many pods the runner runs at once
//   POST /_double/compact                forget history (watches from before get 410)
//   POST /_double/drop-watches | /_double/expire-watches
//   POST /_double/delay?ms=N | /_double/drop-next?count=N | /_double/gone-as-http?on=1
//   GET  /_double/pods                   names and phases, one per line
//   GET  /_double/stats                  request counts as JSON
#pragma once

#include "api_server.hpp"
#include "pod_runner.hpp"
#include "pod_store.hpp"

namespace cohort::k8s_double {

// `runner` may be null (no processes: fates are set by hand only).
ApiServer::Control control_routes(PodStore& store, ApiServer& server, PodRunner* runner);

}  // namespace cohort::k8s_double
