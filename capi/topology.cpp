// C ABI: topology and rank order.
#include "handles.hpp"

#include <fmt/format.h>

using cohort::capi::guard;
using cohort::capi::require;
using cohort::Errc;
using cohort::Error;

namespace {

cohort::Format to_format(int32_t format, const char* function) {
    if (format < COHORT_FORMAT_AUTO || format > COHORT_FORMAT_LISTING)
        throw Error(Errc::invalid_argument, fmt::format("{}: unknown format {}", function, format));
    return static_cast<cohort::Format>(format);
}

cohort::Node& node_by_id(cohort_topology* topology, const char* id, const char* function) {
    require(topology, function, "topology");
    require(id, function, "id");
    return topology->impl.at(id);
}

const cohort::Node& node_at(const cohort_topology* topology, uint32_t index, const char* function) {
    require(topology, function, "topology");
    if (index >= topology->impl.size()) {
        throw Error(Errc::out_of_range,
                    fmt::format("{}: node index {} is past the end ({} nodes)", function, index, topology->impl.size()));
    }
    return topology->impl[index];
}

}  // namespace

extern "C" {

int cohort_topology_create(cohort_topology** out) {
    return guard(__func__, [&](const char* fn) {
        require(out, fn, "out");
        *out = new cohort_topology{};
    });
}

int cohort_topology_load_file(const char* path, cohort_topology** out) {
    return guard(__func__, [&](const char* fn) {
        require(path, fn, "path");
        require(out, fn, "out");
        *out = new cohort_topology{cohort::Topology::from_file(path)};
    });
}

int cohort_topology_load_string(const char* text, size_t length, int32_t format, const char* source_name,
                                cohort_topology** out) {
    return guard(__func__, [&](const char* fn) {
        require(text, fn, "text");
        require(out, fn, "out");
        *out = new cohort_topology{cohort::Topology::from_string(
            {text, length}, to_format(format, fn), source_name ? source_name : "<string>")};
    });
}

void cohort_topology_destroy(cohort_topology* topology) { delete topology; }

int cohort_topology_add_node(cohort_topology* topology, const char* id, const char* host, const char* address,
                             int32_t role) {
    return guard(__func__, [&](const char* fn) {
        require(topology, fn, "topology");
        require(id, fn, "id");
        if (role < COHORT_ROLE_WORKER || role > COHORT_ROLE_COORDINATOR)
            throw Error(Errc::invalid_argument, fmt::format("{}: unknown role {}", fn, role));
        cohort::Node node;
        node.id = id;
        node.host = host ? host : "";
        node.address = address ? address : "";
        node.role = static_cast<cohort::Role>(role);
        topology->impl.add(std::move(node));
    });
}

int cohort_topology_set_locality(cohort_topology* topology, const char* id, int32_t level, const char* label) {
    return guard(__func__, [&](const char* fn) {
        if (level < COHORT_LEVEL_SWITCH || level > COHORT_LEVEL_REGION) {
            throw Error(Errc::invalid_argument,
                        fmt::format("{}: level {} is not switch, rack, zone or region (host is set by "
                                    "cohort_topology_add_node)",
                                    fn, level));
        }
        node_by_id(topology, id, fn).set_label(static_cast<cohort::Level>(level), label ? label : "");
    });
}

int cohort_topology_set_gpus(cohort_topology* topology, const char* id, uint32_t gpu_count,
                             uint64_t gpu_memory_bytes) {
    return guard(__func__, [&](const char* fn) {
        cohort::Node& node = node_by_id(topology, id, fn);
        node.gpu_count = gpu_count;
        node.gpu_memory_bytes = gpu_memory_bytes;
    });
}

int cohort_topology_set_status(cohort_topology* topology, const char* id, int32_t status) {
    return guard(__func__, [&](const char* fn) {
        if (status < COHORT_STATUS_READY || status > COHORT_STATUS_DOWN)
            throw Error(Errc::invalid_argument, fmt::format("{}: unknown status {}", fn, status));
        node_by_id(topology, id, fn).status = static_cast<cohort::NodeStatus>(status);
    });
}

int cohort_topology_node_count(const cohort_topology* topology, uint32_t* out) {
    return guard(__func__, [&](const char* fn) {
        require(topology, fn, "topology");
        require(out, fn, "out");
        *out = static_cast<uint32_t>(topology->impl.size());
    });
}

int cohort_topology_find(const cohort_topology* topology, const char* id, uint32_t* index) {
    return guard(__func__, [&](const char* fn) {
        require(topology, fn, "topology");
        require(id, fn, "id");
        require(index, fn, "index");
        auto found = topology->impl.find(id);
        if (!found) throw Error(Errc::not_found, fmt::format("{}: no node with id '{}'", fn, id));
        *index = static_cast<uint32_t>(*found);
    });
}

int cohort_topology_node_str(const cohort_topology* topology, uint32_t index, int32_t field, const char** out) {
    return guard(__func__, [&](const char* fn) {
        const cohort::Node& node = node_at(topology, index, fn);
        require(out, fn, "out");
        switch (field) {
            case COHORT_FIELD_ID: *out = node.id.c_str(); break;
            case COHORT_FIELD_HOST: *out = node.host_name().c_str(); break;
            case COHORT_FIELD_ADDRESS: *out = node.address.c_str(); break;
            case COHORT_FIELD_SWITCH: *out = node.label(cohort::Level::network_switch).c_str(); break;
            case COHORT_FIELD_RACK: *out = node.label(cohort::Level::rack).c_str(); break;
            case COHORT_FIELD_ZONE: *out = node.label(cohort::Level::zone).c_str(); break;
            case COHORT_FIELD_REGION: *out = node.label(cohort::Level::region).c_str(); break;
            case COHORT_FIELD_ROLE: *out = cohort::to_string(node.role).data(); break;
            case COHORT_FIELD_STATUS: *out = cohort::to_string(node.status).data(); break;
            default: throw Error(Errc::invalid_argument, fmt::format("{}: unknown field {}", fn, field));
        }
    });
}

int cohort_topology_node_info(const cohort_topology* topology, uint32_t index, int32_t* role, int32_t* status,
                              uint32_t* gpu_count, uint64_t* gpu_memory_bytes) {
    return guard(__func__, [&](const char* fn) {
        const cohort::Node& node = node_at(topology, index, fn);
        if (role) *role = static_cast<int32_t>(node.role);
        if (status) *status = static_cast<int32_t>(node.status);
        if (gpu_count) *gpu_count = node.gpu_count;
        if (gpu_memory_bytes) *gpu_memory_bytes = node.gpu_memory_bytes;
    });
}

int cohort_topology_to_json(const cohort_topology* topology, char** json, size_t* length) {
    return guard(__func__, [&](const char* fn) {
        require(topology, fn, "topology");
        require(json, fn, "json");
        const std::string text = topology->impl.to_json();
        *json = cohort::capi::copy_out(text);
        if (length) *length = text.size();
    });
}

int cohort_rank_order_create(const cohort_topology* topology, uint32_t role_mask, cohort_rank_order** out) {
    return guard(__func__, [&](const char* fn) {
        require(topology, fn, "topology");
        require(out, fn, "out");
        if ((role_mask & ~COHORT_ROLES_ALL) != 0)
            throw Error(Errc::invalid_argument, fmt::format("{}: role mask {:#x} has unknown role bits", fn, role_mask));
        *out = new cohort_rank_order{cohort::RankOrder(topology->impl, role_mask == 0 ? cohort::kTrainingRoles : role_mask)};
    });
}

void cohort_rank_order_destroy(cohort_rank_order* order) { delete order; }

int cohort_rank_order_size(const cohort_rank_order* order, int32_t* world_size) {
    return guard(__func__, [&](const char* fn) {
        require(order, fn, "order");
        require(world_size, fn, "world_size");
        *world_size = static_cast<int32_t>(order->impl.world_size());
    });
}

int cohort_rank_order_host_count(const cohort_rank_order* order, uint32_t* hosts) {
    return guard(__func__, [&](const char* fn) {
        require(order, fn, "order");
        require(hosts, fn, "hosts");
        *hosts = order->impl.host_count();
    });
}

int cohort_rank_order_get(const cohort_rank_order* order, int32_t rank, cohort_rank_info* out) {
    return guard(__func__, [&](const char* fn) {
        require(order, fn, "order");
        require(out, fn, "out");
        if (rank < 0) throw Error(Errc::out_of_range, fmt::format("{}: rank {} is negative", fn, rank));
        if (static_cast<uint32_t>(rank) >= order->impl.world_size()) {
            throw Error(Errc::out_of_range,
                        fmt::format("{}: rank {} is past the end (world size {})", fn, rank, order->impl.world_size()));
        }
        const cohort::RankInfo& info = order->impl[rank];
        *out = cohort_rank_info{info.node_index, static_cast<int32_t>(info.local_rank),
                                static_cast<int32_t>(info.local_world_size), static_cast<int32_t>(info.node_rank)};
    });
}

int cohort_rank_order_rank_of(const cohort_rank_order* order, const char* id, int32_t* rank) {
    return guard(__func__, [&](const char* fn) {
        require(order, fn, "order");
        require(id, fn, "id");
        require(rank, fn, "rank");
        auto found = order->impl.rank_of(id);
        if (!found) throw Error(Errc::not_found, fmt::format("{}: node '{}' has no rank in this order", fn, id));
        *rank = static_cast<int32_t>(*found);
    });
}

int cohort_rank_order_ring_crossings(const cohort_rank_order* order, int32_t level, uint32_t* crossings) {
    return guard(__func__, [&](const char* fn) {
        require(order, fn, "order");
        require(crossings, fn, "crossings");
        if (level < COHORT_LEVEL_HOST || level > COHORT_LEVEL_REGION)
            throw Error(Errc::invalid_argument, fmt::format("{}: unknown level {}", fn, level));
        *crossings = cohort::ring_crossings(order->impl, static_cast<cohort::Level>(level));
    });
}

}  // extern "C"
