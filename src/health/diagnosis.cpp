// Diagnosis: its JSON form and the phrases that name ranks and members.
#include "health/diagnosis.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace cohort::health {

namespace json = boost::json;

namespace {

// Past this many ranges or members a summary says "and N more".
constexpr std::size_t kMaxListed = 8;

}  // namespace

std::string_view to_string(Cause cause) noexcept {
    switch (cause) {
        case Cause::collective:
            return "collective";
        case Cause::gpu:
            return "gpu";
        case Cause::unknown:
            return "unknown";
    }
    return "?";
}

std::optional<Cause> parse_cause(std::string_view text) noexcept {
    for (Cause c : {Cause::collective, Cause::gpu, Cause::unknown}) {
        if (to_string(c) == text) return c;
    }
    return std::nullopt;
}

json::object to_json(const Diagnosis& d) {
    json::object o;
    o["cause"] = to_string(d.cause);
    o["summary"] = d.summary;
    json::array evidence(d.evidence.begin(), d.evidence.end());
    o["evidence"] = std::move(evidence);
    json::array ranks(d.ranks.begin(), d.ranks.end());
    o["ranks"] = std::move(ranks);
    json::array members(d.members.begin(), d.members.end());
    o["members"] = std::move(members);
    return o;
}

std::string name_ranks(std::span<const uint32_t> ranks) {
    if (ranks.size() == 1) return fmt::format("rank {}", ranks[0]);
    std::string text = "ranks";
    std::size_t listed = 0;
    std::size_t i = 0;
    for (; i < ranks.size() && listed < kMaxListed; ++listed) {
        std::size_t j = i;
        while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
        const char* sep = listed == 0 ? " " : ", ";
        if (j - i >= 2) {
            text += fmt::format("{}{}-{}", sep, ranks[i], ranks[j]);
        } else {
            j = i;  // a run of two reads better as "2, 3"
            text += fmt::format("{}{}", sep, ranks[i]);
        }
        i = j + 1;
    }
    if (i < ranks.size()) text += fmt::format(" and {} more", ranks.size() - i);
    return text;
}

std::string name_nodes(std::span<const uint32_t> ranks, std::span<const std::string> members) {
    std::string text = name_ranks(ranks);
    if (members.empty()) return text;
    text += members.size() == 1 ? " (member " : " (members ";
    const std::size_t shown = std::min(members.size(), kMaxListed);
    for (std::size_t i = 0; i < shown; ++i) text += (i == 0 ? "" : ", ") + members[i];
    if (shown < members.size()) text += fmt::format(" and {} more", members.size() - shown);
    return text + ")";
}

}  // namespace cohort::health
