// Built twice by the consumer project: against the installed shared library
// (cohort::cohort) and the static one (cohort::cohort_static). Uses the C++
// API, including an exception thrown inside the library and caught here,
// and the C ABI from the same library.
#include <cohort.h>
#include <cohort/cohort.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#ifndef CONSUMER_KIND
#error "build with -DCONSUMER_KIND=\"shared\" or \"static\""
#endif

static_assert(cohort::kVersionMajor == COHORT_VERSION_MAJOR);
static_assert(cohort::kVersionMinor == COHORT_VERSION_MINOR);
static_assert(cohort::kVersionPatch == COHORT_VERSION_PATCH);
static_assert(static_cast<int>(cohort::Errc::callback) == COHORT_ERR_CALLBACK);
static_assert(static_cast<int>(cohort::Format::listing) == COHORT_FORMAT_LISTING);

namespace {

int failures = 0;

void expect(bool ok, const char* what) {
    if (!ok) {
        std::fprintf(stderr, "consumer (%s): FAILED: %s\n", CONSUMER_KIND, what);
        ++failures;
    }
}

void cxx_api() {
    cohort::Topology topology;
    topology.add(cohort::Node{.id = "w1", .host = "h1"});
    topology.add(cohort::Node{.id = "c0", .host = "h0", .role = cohort::Role::chief});
    topology.add(cohort::Node{.id = "w2", .host = "h0"});
    topology.add(cohort::Node{.id = "w3", .host = "h1"});
    try {
        topology.add(cohort::Node{.id = "w1"});
        expect(false, "a duplicate id throws");
    } catch (const cohort::Error& e) {
        expect(e.code() == cohort::Errc::invalid_argument, "duplicate id: invalid_argument");
        expect(std::string(e.what()).find("w1") != std::string::npos, "the message names the id");
    }

    const cohort::RankOrder order(topology);
    expect(order.world_size() == 4 && order.host_count() == 2, "4 ranks on 2 hosts");
    expect(topology[order[0].node_index].id == "c0", "the chief is rank 0");
    expect(cohort::ring_crossings(order, cohort::Level::host) == 2, "2 host crossings");

    const auto yaml = cohort::Topology::from_string("nodes:\n  - id: x\n    gpus: 2\n",
                                                     cohort::Format::yaml, "inline.yaml");
    expect(yaml.size() == 1 && yaml[0].gpu_count == 2, "Topology::from_string");
    try {
        (void)cohort::Topology::from_string("nodes: 3\n", cohort::Format::yaml, "bad.yaml");
        expect(false, "a malformed cluster throws");
    } catch (const cohort::Error& e) {
        expect(e.code() == cohort::Errc::parse, "malformed cluster: parse error");
        expect(std::string(e.what()).find("bad.yaml") != std::string::npos, "the message names the file");
    }

    cohort::Dataset dataset;
    dataset.add({"a.bin", 1000, 10});
    dataset.add({"b.bin", 3000, std::nullopt});
    const auto shards = cohort::ShardSet::split(dataset, {.shard_bytes = 0, .shard_count = 4});
    expect(shards.size() == 4, "4 shards");
    const auto plan = cohort::ShardPlan::create(shards, topology);
    uint64_t placed = 0;
    for (uint32_t m = 0; m < plan.member_count(); ++m) placed += plan.load(m);
    expect(placed == 4, "every shard placed once");

    const auto indices = cohort::epoch_order(10, 0, 0, 1, 3, {.shuffle = false});
    expect(indices.size() == 4 && indices[0] == 1 && indices[3] == 0, "epoch_order pads");
}

void c_abi() {
    expect(std::string(cohort_version()) == cohort::kVersion, "cohort_version() == kVersion");
    cohort_topology* topology = nullptr;
    expect(cohort_topology_create(&topology) == COHORT_OK, "topology_create");
    expect(cohort_topology_add_node(topology, "a", "h1", nullptr, COHORT_ROLE_CHIEF) == COHORT_OK, "add a");
    expect(cohort_topology_add_node(topology, "b", "h2", nullptr, COHORT_ROLE_WORKER) == COHORT_OK, "add b");
    expect(cohort_topology_add_node(topology, "c", "h1", nullptr, COHORT_ROLE_WORKER) == COHORT_OK, "add c");
    cohort_rank_order* order = nullptr;
    expect(cohort_rank_order_create(topology, 0, &order) == COHORT_OK, "rank_order_create");
    int32_t world = 0, rank = 99;
    expect(cohort_rank_order_size(order, &world) == COHORT_OK && world == 3, "world size 3");
    expect(cohort_rank_order_rank_of(order, "c", &rank) == COHORT_OK && rank == 1, "c is rank 1");
    uint32_t index = 0;
    expect(cohort_topology_find(topology, "nobody", &index) == COHORT_ERR_NOT_FOUND, "find fails");
    expect(std::string(cohort_last_error()).find("nobody") != std::string::npos, "error names it");

    std::vector<uint64_t> indices(8);
    size_t count = 0;
    expect(cohort_epoch_order(8, 1, 0, 0, 2, COHORT_EPOCH_SHUFFLE, indices.data(), indices.size(),
                              &count) == COHORT_OK && count == 4,
           "epoch_order");
    cohort_rank_order_destroy(order);
    cohort_topology_destroy(topology);
}

// open_store's coordinator:// scheme registers itself from the coordinator
// client's object; a static link must still get it (the cohort_static
// target's --undefined), though this program names nothing of the client.
void coordinator_store_scheme() {
    cohort::Coordinator coordinator(cohort::CoordinatorOptions{});
    cohort::StoreOptions options;
    options.timeout = std::chrono::seconds(5);
    try {
        auto store = cohort::open_store(coordinator.url().replace(0, 7, "coordinator://") + "/nojob/1", options);
        store->set("k", "v");
        expect(false, "a store of a job that does not exist throws on use");
    } catch (const cohort::Error& e) {
        // Opened through the scheme (it reached the server, which has no such
        // job), not refused as an unknown scheme.
        expect(std::string(e.what()).find("unknown scheme") == std::string::npos, "coordinator:// is a known scheme");
    }
}

}  // namespace

int main() {
    try {
        cxx_api();
        c_abi();
        coordinator_store_scheme();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "consumer (%s): unexpected exception: %s\n", CONSUMER_KIND, e.what());
        return 1;
    }
    if (failures != 0) return 1;
    std::printf("consumer (%s cohort %s): ok\n", CONSUMER_KIND, cohort::kVersion);
    return 0;
}
