// A transfer the scheduler holds, from submit to its result: the request,
// its place in the order (priority, boost, age), holds, and the decisions
// taken on it.
#pragma once

#include <cohort/transfers.hpp>

#include <cctype>
#include <chrono>
#include <cstdint>
#include <future>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace cohort::data {

using Clock = std::chrono::steady_clock;
using Values = std::vector<std::pair<std::string, double>>;

inline double seconds(Clock::duration d) {
    return std::chrono::duration<double>(d).count();
}

struct Pending {
    TransferRequest request;
    uint64_t seq = 0;
    Clock::time_point submitted;
    int base = 0;  // the request's priority plus its workload's
    int boost = 0;
    Clock::time_point hold_until{};
    bool admitted = false;  // the policy was asked when it was queued
    bool held = false, boosted = false;
    std::size_t waited_for_depth = SIZE_MAX;  // the depth last recorded as making it wait
    bool stage = false;
    std::promise<TransferResult> promise;
    TransferResult result;

    // effective = priority + workload priority + boost + aging × seconds waited
    double effective(Clock::time_point now, double aging) const {
        return double(base) + double(boost) + aging * seconds(now - submitted);
    }
    void record(Clock::time_point now, std::string rule, std::string action, Values values, std::string effect,
                double delay = 0) {
        result.decisions.push_back(TransferDecision{seconds(now - submitted), std::move(rule), std::move(action),
                                                    std::move(values), std::move(effect), delay});
    }
};

// The staging file's name: the sequence number keeps names unique; the id,
// with anything but letters, digits, '.' and '-' made '_', makes it findable.
inline std::string staging_name(const Pending& p) {
    std::string name = fmt::format("{}-", p.seq);
    for (char c : p.request.id) name += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ? c : '_';
    return name;
}

}  // namespace cohort::data
