// The parts of the coordinator's job state (GET /v1/jobs/{job}) the
// launcher acts on: the world, each member's step and health, the shards.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cohort_run {

struct Diagnosis {
    std::string cause;  // "collective", "gpu", "unknown"
    std::string summary;
    std::vector<std::string> evidence;
};

struct MemberView {
    std::string state;
    std::optional<uint32_t> rank;
    std::optional<uint64_t> step;
    double samples_per_sec = 0;
    uint64_t heartbeats = 0;
    std::optional<double> straggler_score;
    bool straggler = false;
    double slow_for = 0;  // seconds under the threshold so far
    bool hung = false;
    std::optional<Diagnosis> diagnosis;
};

struct EpochView {
    uint32_t epoch = 0;
    uint64_t total = 0, done = 0;
};

struct JobView {
    std::string phase;  // "forming", "rendezvous", "running"
    uint64_t generation = 0;
    uint32_t world_size = 0;
    std::map<std::string, MemberView> members;
    std::vector<std::string> world;  // member ids by rank
    bool hung = false;
    std::optional<Diagnosis> hang;
    std::vector<EpochView> epochs;
    uint64_t duplicate_reports = 0;
    bool shards_finished = false;
};

// Throws cohort::Error(parse) when the text is not a job state.
JobView parse_job(const std::string& text, double health_time_now);

}  // namespace cohort_run
