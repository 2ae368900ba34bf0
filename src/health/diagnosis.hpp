// Why a member or a job is hung, as far as the evidence shows: a cause, a
// one-line summary that names the ranks to look at, and the evidence behind
// it. Users read it in the job state, and rules match on the cause.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/object.hpp>

namespace cohort::health {

enum class Cause : int {
    collective = 0,  // some ranks never entered the collective the others wait in
    gpu = 1,         // the GPU sample shows a fault: an Xid, idle with memory held, too hot
    unknown = 2,     // nothing above; the evidence lists what is known
};
std::string_view to_string(Cause cause) noexcept;
std::optional<Cause> parse_cause(std::string_view text) noexcept;

// The most ranks a Diagnosis lists: a job of 10,000 hung ranks must not
// copy 10,000 names into each of them. The summary gives the full count.
inline constexpr std::size_t kMaxNamed = 16;

struct Diagnosis {
    Cause cause = Cause::unknown;
    std::string summary;
    std::vector<std::string> evidence;  // always filled, also when a cause is named
    std::vector<uint32_t> ranks;        // the ranks blamed, in order, at most kMaxNamed
    std::vector<std::string> members;   // their member ids, same order

    bool operator==(const Diagnosis&) const = default;
};

boost::json::object to_json(const Diagnosis& diagnosis);

// "rank 2", "ranks 2, 3", "ranks 0-9, 12": runs of three or more as ranges,
// and past a few ranges "... and N more". `ranks` sorted.
std::string name_ranks(std::span<const uint32_t> ranks);
// name_ranks and the member ids: "ranks 2, 3 (members w2, w3)".
std::string name_nodes(std::span<const uint32_t> ranks, std::span<const std::string> members);

}  // namespace cohort::health
