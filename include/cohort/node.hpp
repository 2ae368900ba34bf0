// A node of the cluster: one process that takes part in the job (a host may
// run several), with its role, place in the network and hardware.
#pragma once

#include <cohort/export.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cohort {

enum class Role : int32_t { worker = 0, chief = 1, evaluator = 2, parameter_server = 3, coordinator = 4 };
enum class NodeStatus : int32_t { ready = 0, joining = 1, draining = 2, down = 3 };

// Locality levels, closest first. A label at one level is only meaningful
// inside its parent: rack "r1" of zone "a" and rack "r1" of zone "b" differ.
enum class Level : int32_t { host = 0, network_switch = 1, rack = 2, zone = 3, region = 4 };
inline constexpr int kLevelCount = 5;

COHORT_API std::string_view to_string(Role role) noexcept;
COHORT_API std::string_view to_string(NodeStatus status) noexcept;
COHORT_API std::string_view to_string(Level level) noexcept;  // "host", "switch", ...
COHORT_API std::optional<Role> parse_role(std::string_view text) noexcept;
COHORT_API std::optional<NodeStatus> parse_status(std::string_view text) noexcept;
COHORT_API std::optional<Level> parse_level(std::string_view text) noexcept;

struct COHORT_API Node {
    std::string id;
    std::string host;     // empty: the node is alone on its own host
    std::string address;  // data-plane address, "HOST:PORT"; may be empty
    Role role = Role::worker;
    NodeStatus status = NodeStatus::ready;
    // Labels for switch, rack, zone, region (index = Level - 1); "" = unknown.
    std::array<std::string, kLevelCount - 1> labels;
    uint32_t gpu_count = 0;
    uint64_t gpu_memory_bytes = 0;  // per GPU

    // The host the node runs on: `host`, or its id when host is empty.
    const std::string& host_name() const { return host.empty() ? id : host; }
    const std::string& label(Level level) const;  // level must not be host
    void set_label(Level level, std::string value);
};

}  // namespace cohort
