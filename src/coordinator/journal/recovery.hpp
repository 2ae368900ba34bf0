// Start-up: the state rebuilt from a data directory's newest snapshot and
// the journals after it (see durable_state.hpp for the rules).
#pragma once

#include "coordinator/state/state.hpp"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

namespace cohort::coord::journal {

struct Recovered {
    CoordinatorState state;
    uint64_t last_seq = 0;                 // the last event replayed (or the snapshot's)
    std::optional<uint64_t> snapshot;      // the snapshot loaded
    std::optional<uint64_t> last_journal;  // the newest journal replayed: appends go there
};

// Error(parse) naming file and byte offset for corruption; a torn last line
// is cut off the newest journal and reported through `warn`.
Recovered recover(const std::filesystem::path& dir, const std::function<void(std::string)>& warn);

}  // namespace cohort::coord::journal
