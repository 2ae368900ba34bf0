// Helpers shared by the API tests: test data, error checks, seeds and
// random clusters and datasets.
#pragma once

#include <cohort/cohort.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace cohort::test {

// A file under tests/data: $COHORT_TEST_DATA (set by ctest), else the
// source tree's copy.
inline std::filesystem::path data_path(const std::string& name) {
    const char* dir = std::getenv("COHORT_TEST_DATA");
    return std::filesystem::path(dir != nullptr && *dir != '\0' ? dir : COHORT_TEST_DATA_DEFAULT) / name;
}

// Runs `f`, which must throw cohort::Error with `code`; returns its message.
template <typename F>
std::string error_message(Errc code, F&& f) {
    try {
        f();
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), code) << "message: " << e.what();
        return e.what();
    }
    ADD_FAILURE() << "expected cohort::Error(" << errc_name(code) << "), nothing was thrown";
    return {};
}

// A fresh seed per run, printed (and recorded in the XML report) so that a
// failure can be replayed with COHORT_TEST_SEED=<seed>.
inline uint64_t test_seed() {
    uint64_t seed = 0;
    if (const char* fixed = std::getenv("COHORT_TEST_SEED"); fixed != nullptr && *fixed != '\0') {
        seed = std::strtoull(fixed, nullptr, 10);
    } else {
        std::random_device device;
        seed = (uint64_t{device()} << 32) ^ device();
    }
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::cout << "[   SEED   ] " << info->test_suite_name() << "." << info->name() << " seed=" << seed
              << " (replay with COHORT_TEST_SEED=" << seed << ")\n";
    ::testing::Test::RecordProperty("seed", std::to_string(seed));
    return seed;
}

struct Place {
    std::string region, zone, rack, network_switch;
};

inline Node make_node(std::string id, std::string host = {}, const Place& place = {}, Role role = Role::worker,
                      NodeStatus status = NodeStatus::ready) {
    Node n;
    n.id = std::move(id);
    n.host = std::move(host);
    n.role = role;
    n.status = status;
    n.set_label(Level::region, place.region);
    n.set_label(Level::zone, place.zone);
    n.set_label(Level::rack, place.rack);
    n.set_label(Level::network_switch, place.network_switch);
    return n;
}

// `count` ready workers, each alone on its own host.
inline Topology flat_cluster(int count, const std::string& prefix = "node-") {
    Topology t;
    for (int i = 0; i < count; ++i) t.add(make_node(prefix + std::to_string(i)));
    return t;
}

// racks x hosts_per_rack x nodes_per_host ready workers; rack labels are
// "rack-R", hosts "rR-hH", ids "rR-hH-nN".
inline Topology racked_cluster(int racks, int hosts_per_rack, int nodes_per_host) {
    Topology t;
    for (int r = 0; r < racks; ++r)
        for (int h = 0; h < hosts_per_rack; ++h)
            for (int n = 0; n < nodes_per_host; ++n) {
                const std::string host = "r" + std::to_string(r) + "-h" + std::to_string(h);
                t.add(make_node(host + "-n" + std::to_string(n), host,
                                Place{"region", "zone", "rack-" + std::to_string(r), "sw-" + std::to_string(r)}));
            }
    return t;
}

// A random cluster: random counts of regions, zones, racks, switches, hosts
// and nodes per host. Labels repeat under different parents ("rack-0" in
// every zone) and whole levels are sometimes unlabelled. Host names are
// unique; labels are consistent within a host.
inline Topology random_cluster(std::mt19937_64& rng, int max_nodes = 200) {
    auto pick = [&](int lo, int hi) { return static_cast<int>(lo + rng() % static_cast<uint64_t>(hi - lo + 1)); };
    auto maybe = [&](const std::string& label) { return rng() % 4 == 0 ? std::string() : label; };
    Topology t;
    int host_id = 0;
    const int regions = pick(1, 3);
    for (int g = 0; g < regions && static_cast<int>(t.size()) < max_nodes; ++g) {
        const std::string region = maybe("region-" + std::to_string(g));
        for (int z = 0, zones = pick(1, 3); z < zones; ++z) {
            const std::string zone = maybe("zone-" + std::to_string(z));
            for (int r = 0, racks = pick(1, 3); r < racks; ++r) {
                const std::string rack = maybe("rack-" + std::to_string(r));
                for (int s = 0, switches = pick(1, 2); s < switches; ++s) {
                    const std::string sw = maybe("sw-" + std::to_string(s));
                    for (int h = 0, hosts = pick(1, 3); h < hosts; ++h) {
                        // Some nodes have no host name: alone on a host named by their id.
                        const bool unnamed = rng() % 8 == 0;
                        const std::string host = "host-" + std::to_string(host_id++);
                        const int nodes = unnamed ? 1 : pick(1, 4);
                        for (int n = 0; n < nodes && static_cast<int>(t.size()) < max_nodes; ++n) {
                            t.add(make_node(host + "-gpu" + std::to_string(n), unnamed ? std::string() : host,
                                            Place{region, zone, rack, sw}));
                        }
                    }
                }
            }
        }
    }
    return t;
}

// The same nodes in a random order.
inline Topology shuffled(const Topology& t, std::mt19937_64& rng) {
    std::vector<Node> nodes(t.nodes().begin(), t.nodes().end());
    std::shuffle(nodes.begin(), nodes.end(), rng);
    Topology out;
    for (auto& n : nodes) out.add(std::move(n));
    return out;
}

inline Dataset dataset_of(const std::vector<uint64_t>& sizes) {
    Dataset d;
    for (std::size_t i = 0; i < sizes.size(); ++i) d.add(DataFile{"file-" + std::to_string(i), sizes[i], {}});
    return d;
}

}  // namespace cohort::test
