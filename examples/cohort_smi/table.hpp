// cohort-smi's output: a table like gpustat's for people, JSON for programs.
#pragma once

#include <cohort/cohort.hpp>

#include <string>
#include <vector>

namespace cohort_smi {

// "n/s" for not supported, "-" for not available, else the formatted value.
std::string cell(const cohort::Reading<double>& reading, const char* format);

// The header (host, time, backend, why auto passed over the others), one
// line per GPU, and lines for MIG instances, Xid events and a stale sample.
std::string table(const cohort::GpuSample& sample, const std::vector<cohort::BackendChoice>& selection);

}  // namespace cohort_smi
