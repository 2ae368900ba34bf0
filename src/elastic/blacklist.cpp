// The host blacklist: a host on which workers fail again and again (a bad
// GPU, a full disk) is kept off for a while, twice as long each time it
// comes back and fails again, so a flaky host costs less each round.
#include <cohort/error.hpp>
#include <cohort/scaling.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace cohort {

HostBlacklist::HostBlacklist(BlacklistOptions options) : options_(options) {
    const double window = options.window.count(), base = options.base_cooldown.count(),
                 max = options.max_cooldown.count();
    if (options.after_failures < 0)
        throw Error(Errc::invalid_argument,
                    fmt::format("HostBlacklist: after_failures must be 0 (never blacklist) or more, not {}",
                                options.after_failures));
    if (!(window > 0) || !(base > 0) || !(max >= base) || !std::isfinite(max))
        throw Error(Errc::invalid_argument,
                    fmt::format("HostBlacklist: window ({}s) and base_cooldown ({}s) must be positive and "
                                "max_cooldown ({}s) finite and at least base_cooldown",
                                window, base, max));
}

bool HostBlacklist::record_failure(std::string_view host, double now) {
    if (options_.after_failures == 0 || host.empty()) return false;
    auto it = hosts_.find(host);
    if (it == hosts_.end()) it = hosts_.emplace(std::string(host), Entry{}).first;
    Entry& entry = it->second;
    // Workers placed before the host went off may still fail on it; that
    // is no news about the host, so it does not extend its time off.
    if (entry.times > 0 && now < entry.until) return false;
    const double oldest = now - options_.window.count();
    std::erase_if(entry.failures, [&](double t) { return t < oldest; });
    entry.failures.push_back(now);
    if (static_cast<int>(entry.failures.size()) < options_.after_failures) return false;
    entry.failures.clear();
    ++entry.times;
    const double cooldown = std::min(std::ldexp(options_.base_cooldown.count(), std::min(entry.times - 1, 1000)),
                                     options_.max_cooldown.count());
    entry.until = now + cooldown;
    return true;
}

bool HostBlacklist::blacklisted(std::string_view host, double now) const {
    return until(host, now).has_value();
}

std::optional<double> HostBlacklist::until(std::string_view host, double now) const {
    auto it = hosts_.find(host);
    if (it == hosts_.end() || it->second.times == 0 || now >= it->second.until) return std::nullopt;
    return it->second.until;
}

int HostBlacklist::times_blacklisted(std::string_view host) const {
    auto it = hosts_.find(host);
    return it == hosts_.end() ? 0 : it->second.times;
}

std::vector<std::string> HostBlacklist::hosts(double now) const {
    std::vector<std::string> out;
    for (const auto& [name, entry] : hosts_)
        if (entry.times > 0 && now < entry.until) out.push_back(name);
    return out;
}

}  // namespace cohort
