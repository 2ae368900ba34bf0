// The cluster file schema (docs/formats.md), read and written.
#include "core/json_text.hpp"
#include "config/document.hpp"

#include <cohort/error.hpp>
#include <cohort/topology.hpp>

#include <boost/json.hpp>
#include <fmt/format.h>

namespace cohort {

namespace {

using detail::Field;

constexpr uint64_t kMaxGpus = 1u << 16;

Node read_node(const Field& field) {
    field.expect_map({"id", "host", "address", "role", "status", "locality", "gpus", "gpu_memory"});
    Node node;
    auto id = field.get("id");
    if (!id) field.fail("missing required field 'id'");
    node.id = id->as_string();
    if (auto f = field.get("host")) node.host = f->as_string();
    if (auto f = field.get("address")) node.address = f->as_string();
    if (auto f = field.get("role")) {
        const std::string text = f->as_string();
        auto role = parse_role(text);
        if (!role)
            f->fail(fmt::format("unknown role '{}' (expected worker, chief, evaluator, "
                                "parameter_server or coordinator)",
                                text));
        node.role = *role;
    }
    if (auto f = field.get("status")) {
        const std::string text = f->as_string();
        auto status = parse_status(text);
        if (!status) f->fail(fmt::format("unknown status '{}' (expected ready, joining, draining or down)", text));
        node.status = *status;
    }
    if (auto f = field.get("locality")) {
        f->expect_map({"switch", "rack", "zone", "region"});
        for (Level level : {Level::network_switch, Level::rack, Level::zone, Level::region}) {
            if (auto label = f->get(to_string(level))) node.set_label(level, label->as_string());
        }
    }
    if (auto f = field.get("gpus")) node.gpu_count = static_cast<uint32_t>(f->as_uint(kMaxGpus));
    if (auto f = field.get("gpu_memory")) node.gpu_memory_bytes = f->as_size();
    return node;
}

Topology read_cluster(const detail::Document& document) {
    const Field root = document.root();
    if (root.is_null()) root.fail("empty document: expected a mapping with a 'nodes' list");
    root.expect_map({"name", "nodes"});
    auto nodes = root.get("nodes");
    if (!nodes) root.fail("missing required field 'nodes'");
    const auto items = nodes->items();
    if (items.empty()) nodes->fail("empty cluster: 'nodes' must list at least one node");
    Topology topology;
    if (auto name = root.get("name")) topology.set_name(name->as_string());
    for (const Field& item : items) {
        Node node = read_node(item);
        if (auto first = topology.find(node.id)) {
            item.get("id")->fail(fmt::format("duplicate node id '{}' (first used by {}[{}])", node.id,
                                             nodes->path(), *first));
        }
        topology.add(std::move(node));
    }
    return topology;
}

}  // namespace

Topology Topology::from_file(const std::filesystem::path& path) {
    const std::string text = detail::read_text_file(path);
    const Format format = detail::format_from_extension(path, Format::automatic);
    return read_cluster(detail::Document(text, format, path.string()));
}

Topology Topology::from_string(std::string_view text, Format format, std::string_view source_name) {
    if (format == Format::listing)
        throw Error(Errc::invalid_argument, "a cluster is YAML or JSON; the listing format is for datasets");
    return read_cluster(detail::Document(text, format, std::string(source_name)));
}

std::string Topology::to_json() const {
    boost::json::array nodes;
    for (const Node& node : nodes_) {
        boost::json::object o;
        o["id"] = node.id;
        if (!node.host.empty()) o["host"] = node.host;
        if (!node.address.empty()) o["address"] = node.address;
        o["role"] = std::string(to_string(node.role));
        o["status"] = std::string(to_string(node.status));
        boost::json::object locality;
        for (Level level : {Level::region, Level::zone, Level::rack, Level::network_switch}) {
            if (!node.label(level).empty()) locality[std::string(to_string(level))] = node.label(level);
        }
        if (!locality.empty()) o["locality"] = std::move(locality);
        if (node.gpu_count != 0) o["gpus"] = node.gpu_count;
        if (node.gpu_memory_bytes != 0) o["gpu_memory"] = node.gpu_memory_bytes;
        nodes.push_back(std::move(o));
    }
    boost::json::object root;
    if (!name_.empty()) root["name"] = name_;
    root["nodes"] = std::move(nodes);
    return detail::to_text(root);
}

}  // namespace cohort
