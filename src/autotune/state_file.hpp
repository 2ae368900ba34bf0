// The per-job file where rank 0 keeps the best values found, so that a
// restarted job starts tuned: JSON {"format": "cohort-autotune 1", "job",
// "ranks", "search", "frozen", "step", "throughput", "values": {name: value}}.
#pragma once

#include <cohort/autotune.hpp>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <variant>

namespace cohort::autotune {

struct SavedState {
    std::string job;
    int ranks = 0;
    std::string search;
    bool frozen = false;
    int64_t step = 0;
    double throughput = 0;
    std::map<std::string, double> values;
};

// The file's state, or why it cannot be used, in words naming the file
// ("... belongs to job 'a', not 'b'", "... is damaged: ..."). A file that
// does not exist is nothing and no reason.
std::variant<std::monostate, SavedState, std::string> load_state(const std::filesystem::path& path,
                                                                 const std::string& job, int ranks);
// Writes through a temporary file and a rename; the reason on failure.
std::optional<std::string> save_state(const std::filesystem::path& path, const SavedState& state);

}  // namespace cohort::autotune
