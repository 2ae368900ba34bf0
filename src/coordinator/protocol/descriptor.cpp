// Node descriptors: checks and JSON.
#include "coordinator/protocol/descriptor.hpp"

#include "core/json_fields.hpp"
#include "core/text.hpp"

#include <array>

#include <fmt/format.h>

namespace cohort::coord {

namespace json = boost::json;

namespace {

constexpr std::size_t kMaxName = 256;
constexpr uint64_t kMaxGpus = 1u << 16;
constexpr std::array<Level, 4> kLabelLevels = {Level::network_switch, Level::rack, Level::zone, Level::region};

}  // namespace

void validate_name(std::string_view what, std::string_view name) {
    if (name.empty()) throw Error(Errc::invalid_argument, fmt::format("{} must not be empty", what));
    if (name.size() > kMaxName) {
        throw Error(Errc::invalid_argument, fmt::format("{} '{}' is {} bytes; at most {} are allowed", what,
                                                        detail::escape_bytes(name, 40), name.size(), kMaxName));
    }
    for (char c : name) {
        if (c <= ' ' || c > '~' || c == '/') {
            throw Error(
                Errc::invalid_argument,
                fmt::format("{} {} holds {}; use printable ASCII without spaces or '/'", what, detail::quote(name),
                            c == '/' ? std::string("'/'") : fmt::format("byte 0x{:02x}", static_cast<uint8_t>(c))));
        }
    }
}

void validate_descriptor(const Node& node, std::string_view where) {
    validate_name(fmt::format("{}: node id", where), node.id);
    if (!node.address.empty()) {
        const auto colon = node.address.rfind(':');
        const bool port_ok = colon != std::string::npos && colon > 0 && colon + 1 < node.address.size() &&
                             node.address.find_first_not_of("0123456789", colon + 1) == std::string::npos &&
                             node.address.size() - colon - 1 <= 5 &&
                             std::stoul(node.address.substr(colon + 1)) <= 65535;
        if (!port_ok) {
            throw Error(Errc::invalid_argument,
                        fmt::format("{}: node '{}': address {} is not HOST:PORT (IPv6 as [ADDR]:PORT)", where, node.id,
                                    detail::quote(node.address)));
        }
    }
    if (node.status != NodeStatus::ready) {
        throw Error(Errc::invalid_argument, fmt::format("{}: node '{}': a joining node's status is 'ready', not '{}'",
                                                        where, node.id, to_string(node.status)));
    }
}

json::object descriptor_to_json(const Node& node) {
    json::object o;
    o["id"] = node.id;
    if (!node.host.empty()) o["host"] = node.host;
    if (!node.address.empty()) o["address"] = node.address;
    o["role"] = to_string(node.role);
    json::object locality;
    for (Level level : kLabelLevels) {
        if (!node.label(level).empty()) locality[to_string(level)] = node.label(level);
    }
    if (!locality.empty()) o["locality"] = std::move(locality);
    if (node.gpu_count != 0) o["gpus"] = node.gpu_count;
    if (node.gpu_memory_bytes != 0) o["gpu_memory"] = node.gpu_memory_bytes;
    return o;
}

Node descriptor_from_json(const json::value& value, std::string_view where, Errc code) {
    detail::FieldReader reader(value, std::string(where), code);
    reader.allow({"id", "host", "address", "role", "locality", "gpus", "gpu_memory"});
    Node node;
    node.id = reader.string("id");
    node.host = reader.string_or("host", "");
    node.address = reader.string_or("address", "");
    if (reader.has("role")) {
        const std::string text = reader.string("role");
        const auto role = parse_role(text);
        if (!role) {
            reader.fail("role", fmt::format("unknown role {} (expected worker, chief, evaluator, "
                                            "parameter_server or coordinator)",
                                            detail::quote(text)));
        }
        node.role = *role;
    }
    if (reader.has("locality")) {
        detail::FieldReader locality(reader.value("locality"), fmt::format("{}: locality", where), code);
        locality.allow({"switch", "rack", "zone", "region"});
        for (Level level : kLabelLevels) node.set_label(level, locality.string_or(to_string(level), ""));
    }
    const uint64_t gpus = reader.uint_or("gpus", 0);
    if (gpus > kMaxGpus) reader.fail("gpus", fmt::format("{} is more than {} GPUs", gpus, kMaxGpus));
    node.gpu_count = static_cast<uint32_t>(gpus);
    if (const json::value* memory = reader.find("gpu_memory")) {
        if (memory->is_string()) {
            const auto bytes = detail::parse_size(memory->get_string());
            if (!bytes)
                reader.fail("gpu_memory",
                            fmt::format("{} is not a size such as 80GiB", detail::quote(memory->get_string())));
            node.gpu_memory_bytes = *bytes;
        } else {
            node.gpu_memory_bytes = reader.uint("gpu_memory");
        }
    }
    try {
        validate_descriptor(node, where);
    } catch (const Error& e) {
        throw Error(code, e.what());
    }
    return node;
}

bool same_descriptor(const Node& a, const Node& b) {
    return a.id == b.id && a.host == b.host && a.address == b.address && a.role == b.role && a.labels == b.labels &&
           a.gpu_count == b.gpu_count && a.gpu_memory_bytes == b.gpu_memory_bytes && a.status == b.status;
}

}  // namespace cohort::coord
