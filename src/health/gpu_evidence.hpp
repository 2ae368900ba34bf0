// What a member's GPU samples say about a stall. The sample is whatever the
// member sent (a GpuSample::to_json object, or a list of them), so it is read
// defensively: a field of the wrong type or missing is simply not evidence.
#pragma once

#include "health/settings.hpp"
#include "health/window.hpp"

#include <span>
#include <string>
#include <vector>

#include <boost/json/value.hpp>

namespace cohort::health {

// A GPU holding more than this at 0 % utilisation holds a job's tensors, not
// just a CUDA context (a few hundred MiB): its process is alive but stuck.
inline constexpr double kHeldMemoryBytes = 1024.0 * 1024 * 1024;

// The Xid events in a GPU sample.
std::vector<XidNote> read_xids(const boost::json::value& gpu, double received_at);

// Findings that could explain a stall, the likeliest first: Xid events, GPUs
// idle with memory held, GPUs at or over the temperature limit. Empty: none.
std::vector<std::string> gpu_faults(const boost::json::value& gpu, std::span<const XidNote> xids,
                                    const Settings& settings);

// One line of evidence on the member's GPUs: "GPU 0: 97 % utilisation,
// 40.0 GiB held, 65 °C (sample 2 s old)", or "no GPU samples".
std::string gpu_overview(const boost::json::value& gpu, double gpu_at, double now);

}  // namespace cohort::health
