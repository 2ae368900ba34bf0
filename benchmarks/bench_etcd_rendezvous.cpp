// Question: how long do N ranks take to form a world through etcd:// alone,
// against the tcp:// store (rank 0 hosts it) in the same run? Each rank is a
// thread with a store of its own (its own etcd client, lease keeper and
// connections, as a separate process would have) and does what a
// Communicator's bootstrap does with its store: open it, add to its
// instance counter, set its address, wait for every rank's, and read them
// all. A run is timed from the moment all threads are released until the
// last has read every address. Target (issue 17): 64 ranks under 2 s
// against a local etcd.
//
//   build/benchmarks/bench_etcd_rendezvous [--ranks 64] [--runs 5]
//       [--endpoints HOST:PORT,...]
//
// Without --endpoints it starts a one-member etcd (/usr/bin/etcd) on free
// loopback ports in a temporary folder and removes it afterwards. It exits
// 1 when a run fails.
#include "../tests/fixtures/etcd_cluster.hpp"

#include <cohort/error.hpp>
#include <cohort/store.hpp>

#include <algorithm>
#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// One rendezvous of `ranks` threads on stores that `open(rank)` opens;
// seconds from release to the last rank done.
template <typename Open>
double rendezvous(int ranks, Open open) {
    std::barrier start(ranks + 1);
    std::vector<std::thread> threads;
    std::vector<std::string> errors(static_cast<std::size_t>(ranks));
    Clock::time_point released;
    for (int rank = 0; rank < ranks; ++rank) {
        threads.emplace_back([&, rank] {
            start.arrive_and_wait();
            try {
                auto store = open(rank);
                store->add("instances/" + std::to_string(rank), 1);
                store->set("rank/" + std::to_string(rank), "127.0.0.1\n" + std::to_string(20000 + rank) + "\nhost");
                std::vector<std::string> keys;
                for (int r = 0; r < ranks; ++r) keys.push_back("rank/" + std::to_string(r));
                store->wait(keys, 60s);
                for (const auto& k : keys) {
                    if (store->get(k, 1s).empty()) throw std::runtime_error("empty address under " + k);
                }
            } catch (const std::exception& e) {
                errors[static_cast<std::size_t>(rank)] = e.what();
            }
        });
    }
    released = Clock::now();
    start.arrive_and_wait();
    for (auto& t : threads) t.join();
    const double seconds = std::chrono::duration<double>(Clock::now() - released).count();
    for (int rank = 0; rank < ranks; ++rank) {
        if (!errors[static_cast<std::size_t>(rank)].empty()) {
            std::fprintf(stderr, "rank %d: %s\n", rank, errors[static_cast<std::size_t>(rank)].c_str());
            std::exit(1);
        }
    }
    return seconds;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    int ranks = 64, runs = 5;
    std::string endpoints;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
        if (arg == "--ranks" && value) {
            ranks = std::atoi(value), ++i;
        } else if (arg == "--runs" && value) {
            runs = std::atoi(value), ++i;
        } else if (arg == "--endpoints" && value) {
            endpoints = value, ++i;
        } else {
            std::fprintf(stderr, "usage: %s [--ranks 64] [--runs 5] [--endpoints HOST:PORT,...]\n", argv[0]);
            return 2;
        }
    }
    if (ranks < 1 || runs < 1) {
        std::fprintf(stderr, "--ranks and --runs must be at least 1\n");
        return 2;
    }
    std::optional<cohort::test::EtcdCluster> etcd;
    if (endpoints.empty()) {
        etcd.emplace();
        endpoints = etcd->endpoints();
    }
    cohort::StoreOptions options;
    options.timeout = 30s;

    std::vector<double> etcd_times, tcp_times;
    for (int run = 0; run < runs; ++run) {
        const std::string url = "etcd://" + endpoints + "/bench/rendezvous/" + std::to_string(::getpid()) + "/" +
                                std::to_string(run);
        etcd_times.push_back(rendezvous(ranks, [&](int) { return cohort::open_store(url, options); }));

        // The anchor: rank 0 hosts the tcp:// store's server in this process.
        cohort::StoreServer server("127.0.0.1", 0);
        tcp_times.push_back(rendezvous(ranks, [&](int) { return cohort::open_store(server.url(), options); }));
    }
    std::printf("%d ranks form a world through the store, %d runs (median, min, max seconds)\n\n", ranks, runs);
    std::printf("| store | median | min | max |\n|---|---|---|---|\n");
    const auto row = [](const char* name, const std::vector<double>& t) {
        std::printf("| %s | %.3f | %.3f | %.3f |\n", name, median(t), *std::min_element(t.begin(), t.end()),
                    *std::max_element(t.begin(), t.end()));
    };
    row("etcd://", etcd_times);
    row("tcp:// (anchor)", tcp_times);
    std::printf("\netcd:// / tcp:// = %.1fx; target: etcd:// under 2 s at 64 ranks: %s\n",
                median(etcd_times) / median(tcp_times), median(etcd_times) < 2.0 ? "met" : "MISSED");
    return 0;
}
