// The commonest hang in synchronous training: some ranks wait inside a
// collective that others never entered (a rank stuck in its data loader,
// a rank that took another code path, a rank whose GPU died). Each member
// reports the sequence number of the latest collective it entered and
// whether it is inside it; comparing them names the ranks that lag.
#pragma once

#include "health/diagnosis.hpp"
#include "health/window.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace cohort::health {

struct CollectiveStall {
    uint64_t seq = 0;                          // N: the highest collective some rank is inside
    std::vector<uint32_t> waiting;             // ranks inside N, sorted
    std::vector<uint32_t> lagging;             // ranks whose latest collective is below N, sorted
    std::vector<std::string> lagging_members;  // their member ids, same order
    // "ranks 2, 3 (members w2, w3) never entered collective 57; ranks 0, 1 wait in it"
    std::string summary;

    // Whether the node waits in N or lags behind it: the stall explains its hang.
    bool involves(const NodeWindow& window) const;
    // The collective diagnosis, blaming the lagging ranks.
    Diagnosis diagnosis(std::vector<std::string> evidence) const;
};

// Empty when no rank is inside a collective, or none lags behind the
// highest one. Ranks that report no collective state are left out.
std::optional<CollectiveStall> find_collective_stall(std::span<const NodeInput> nodes);

}  // namespace cohort::health
