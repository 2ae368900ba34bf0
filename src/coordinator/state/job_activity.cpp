// Round causes and the job's activity histograms.
#include "coordinator/state/job_activity.hpp"

#include <algorithm>
#include <string_view>
#include <utility>

namespace cohort::coord {

namespace {

constexpr std::array<std::string_view, kRoundCauseCount> kCauseNames = {"created", "failed",    "left", "rejoined",
                                                                        "grew",    "requested", "other"};

template <std::size_t... I>
std::array<Histogram, sizeof...(I)> round_histograms(std::index_sequence<I...>) {
    return {((void)I, Histogram(JobActivity::kRoundBounds))...};
}

}  // namespace

RoundCause round_cause(std::string_view reason) noexcept {
    if (reason == "job created") return RoundCause::created;
    if (reason.starts_with("requested by node ")) return RoundCause::requested;
    if (reason.find(" waiting to join the world of ") != std::string_view::npos) return RoundCause::grew;
    if (reason.starts_with("node '")) {
        // The node id is quoted and may hold anything, so look past its
        // closing quote: the text after "node 'ID'" says what happened.
        for (std::size_t q = reason.find("' ", 6); q != std::string_view::npos; q = reason.find("' ", q + 1)) {
            const std::string_view rest = reason.substr(q + 2);
            if (rest == "left") return RoundCause::left;
            if (rest == "failed" || rest.starts_with("failed: ")) return RoundCause::failed;
            if (rest.starts_with("joined again while in generation ")) return RoundCause::rejoined;
        }
        return RoundCause::other;
    }
    if (reason.find(" nodes failed, ") != std::string_view::npos) return RoundCause::failed;
    return RoundCause::other;
}

std::string_view to_string(RoundCause cause) noexcept {
    return kCauseNames[static_cast<std::size_t>(cause)];
}

JobActivity::JobActivity()
    : rounds_(round_histograms(std::make_index_sequence<kRoundCauseCount>())), steps_(kStepBounds) {}

void JobActivity::round_closed(std::string_view reason, double opened_at, double closed_at) {
    rounds_[static_cast<std::size_t>(round_cause(reason))].observe(std::max(0.0, closed_at - opened_at));
}

}  // namespace cohort::coord
