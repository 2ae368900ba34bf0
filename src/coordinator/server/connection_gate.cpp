// ConnectionGate: counts per address, and the idle connections in the order
// they started waiting, so the oldest is always at the front.
#include "coordinator/server/connection_gate.hpp"

namespace cohort::coord::server {

std::string_view to_string(Refusal why) {
    switch (why) {
        case Refusal::max_connections:
            return "max_connections";
        case Refusal::per_client:
            return "per_client";
        case Refusal::descriptors:
            return "descriptors";
        case Refusal::tls_handshake:
            return "tls_handshake";
    }
    return "unknown";
}

std::optional<Refusal> ConnectionGate::admit(const std::string& client) {
    auto it = per_client_.find(client);
    const std::size_t from_client = it == per_client_.end() ? 0 : it->second;
    if (from_client >= limits_.per_client) return Refusal::per_client;
    if (open_ >= limits_.max_connections) return Refusal::max_connections;
    if (it == per_client_.end()) it = per_client_.emplace(client, 0).first;
    ++it->second;
    ++open_;
    return std::nullopt;
}

void ConnectionGate::release(const std::string& client) {
    const auto it = per_client_.find(client);
    if (it == per_client_.end()) return;
    if (--it->second == 0) per_client_.erase(it);
    if (open_ > 0) --open_;
}

ConnectionGate::Ticket ConnectionGate::start_waiting(uint64_t id, Clock::time_point since) {
    // Waits start in time order on the one io thread, so appending keeps
    // the list sorted.
    return idle_.insert(idle_.end(), {id, since});
}

std::vector<uint64_t> ConnectionGate::shed(Clock::time_point now) {
    std::vector<uint64_t> out;
    if (!crowded()) return out;
    for (const auto& [id, since] : idle_) {
        if (now - since < limits_.crowded_idle_timeout) break;  // the rest waited less
        out.push_back(id);
    }
    shed_ += out.size();
    return out;
}

std::optional<uint64_t> ConnectionGate::displace() {
    if (open_ < limits_.max_connections || idle_.empty()) return std::nullopt;
    ++displaced_;
    return idle_.front().first;
}

std::vector<uint64_t> ConnectionGate::make_room(std::size_t n) {
    std::vector<uint64_t> out;
    for (auto it = idle_.begin(); it != idle_.end() && out.size() < n; ++it) out.push_back(it->first);
    displaced_ += out.size();
    return out;
}

std::optional<ConnectionGate::Clock::time_point> ConnectionGate::next_shed() const {
    if (idle_.empty()) return std::nullopt;
    return idle_.front().second + limits_.crowded_idle_timeout;
}

}  // namespace cohort::coord::server
