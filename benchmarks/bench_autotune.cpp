// Question: does the Autotuner, online from the defaults, reach at least
// 95 % of the throughput of the best fixed setting a grid search finds, and
// in how many steps? Horovod's search (Bayesian optimisation, a Gaussian
// process with expected improvement) is the anchor, in the same run.
//
//   bench_autotune [--ranks 2] [--transport shm|tcp] [--step-reps 5]
//                  [--final-rounds 5] [--max-steps 500]
//
// Processes of this host (fork), meeting on a tcp:// store rank 0 hosts:
// with --transport shm they share memory (the parameters that matter then
// are fusion_threshold, pipeline_chunk and shm_single_round_max), with tcp
// shared memory is off and the ranks talk over loopback TCP
// (fusion_threshold, doubling_max, pipeline_chunk). A step is a named
// all-reduce of a training-like set of 40 float32 tensors of mixed sizes
// (4 KiB to 2 MiB, 17.6 MB in all); its throughput is bytes / seconds on
// rank 0.
//
//  1. Grid search: every point of the joint grid (comm_parameters' grids),
//     one warm-up step then the median of --step-reps steps.
//  2. From the defaults, the Autotuner with its default options (3 warm-up
//     steps, 1 settling step, median of 5), coordinate descent, until it
//     freezes; then the same with the Bayesian anchor.
//  3. The grid's best, each search's result and the defaults measured again
//     round-robin (--final-rounds rounds of --step-reps steps each, median),
//     so the ratios compare figures taken side by side, not minutes apart.
#include <cohort/autotune.hpp>
#include <cohort/communicator.hpp>
#include <cohort/error.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
    int ranks = 2;
    std::string transport = "shm";
    int step_reps = 5;
    int final_rounds = 5;
    int max_steps = 500;
};

[[noreturn]] void usage(const char* why) {
    std::fprintf(stderr,
                 "bench_autotune: %s\nusage: bench_autotune [--ranks N] [--transport shm|tcp] [--step-reps N] "
                 "[--final-rounds N] [--max-steps N]\n",
                 why);
    std::exit(2);
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (i + 1 >= argc) usage(("missing value after " + a).c_str());
        const std::string v = argv[++i];
        auto number = [&](int least) {
            char* end = nullptr;
            const long n = std::strtol(v.c_str(), &end, 10);
            if (end == v.c_str() || *end != '\0' || n < least || n > 100000)
                usage((a + " '" + v + "' is not a whole number from " + std::to_string(least)).c_str());
            return int(n);
        };
        if (a == "--ranks")
            o.ranks = number(2);
        else if (a == "--transport") {
            if (v != "shm" && v != "tcp") usage("--transport must be shm or tcp");
            o.transport = v;
        } else if (a == "--step-reps")
            o.step_reps = number(1);
        else if (a == "--final-rounds")
            o.final_rounds = number(1);
        else if (a == "--max-steps")
            o.max_steps = number(1);
        else
            usage(("unknown option " + a).c_str());
    }
    return o;
}

uint16_t free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof a;
    uint16_t port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &length) == 0)
        port = ntohs(a.sin_port);
    ::close(fd);
    return port;
}

// 40 tensors, a model's mix: many small (biases, norms), some large.
std::vector<std::size_t> tensor_bytes() {
    std::vector<std::size_t> out;
    const std::size_t pattern[] = {4 << 10, 16 << 10, 2 << 20, 64 << 10, 256 << 10, 4 << 10, 1 << 20, 16 << 10};
    for (int i = 0; i < 40; ++i) out.push_back(pattern[i % 8]);
    return out;
}

struct Workload {
    std::vector<std::vector<float>> buffers;
    std::size_t bytes = 0;
    Workload() {
        for (std::size_t b : tensor_bytes()) {
            buffers.emplace_back(b / 4, 1.0f);
            bytes += b;
        }
    }
    // One step: the named all-reduce; bytes / seconds.
    double step(cohort::Communicator& comm) {
        std::map<std::string, cohort::Tensor> tensors;
        char name[32];
        for (std::size_t i = 0; i < buffers.size(); ++i) {
            std::snprintf(name, sizeof name, "t%02zu", i);
            tensors[name] = {std::as_writable_bytes(std::span(buffers[i])), cohort::DataType::float32};
        }
        const auto start = Clock::now();
        comm.allreduce_named(tensors, cohort::ReduceOp::avg);
        return double(bytes) / std::chrono::duration<double>(Clock::now() - start).count();
    }
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

using Values = std::map<std::string, double>;

void apply_values(std::vector<cohort::TunableParameter>& params, const Values& values) {
    for (auto& p : params) p.apply(values.at(p.name));
}

std::string text(const Values& v) {
    std::string out;
    for (const auto& [name, x] : v) {
        char buf[64];
        if (x >= 1 << 20 && std::fmod(x, 1 << 20) == 0)
            std::snprintf(buf, sizeof buf, "%s=%.0fM", name.c_str(), x / (1 << 20));
        else if (x >= 1024 && std::fmod(x, 1024) == 0)
            std::snprintf(buf, sizeof buf, "%s=%.0fK", name.c_str(), x / 1024);
        else
            std::snprintf(buf, sizeof buf, "%s=%g", name.c_str(), x);
        out += (out.empty() ? "" : " ") + std::string(buf);
    }
    return out;
}

// The same decision on every rank: rank 0's median, through a broadcast.
double agreed(cohort::Communicator& comm, double value) {
    comm.broadcast(&value, sizeof value, 0);
    return value;
}

double measure(cohort::Communicator& comm, Workload& w, int reps) {
    w.step(comm);  // settles the new values
    std::vector<double> s;
    for (int i = 0; i < reps; ++i) s.push_back(w.step(comm));
    return agreed(comm, median(s));
}

struct Tuned {
    Values values;
    int64_t steps = 0;
    int64_t bound = 0;
    double seconds = 0;
};

Tuned tune(cohort::Communicator& comm, Workload& w, cohort::AutotuneSearch search, int max_steps) {
    comm.set_tuning(cohort::CommTuning{});
    cohort::AutotuneOptions o;
    o.job_id = std::string("bench-") + cohort::autotune_search_name(search);
    o.search = search;
    o.max_steps = max_steps;
    o.log = [](const std::string&) {};
    const auto start = Clock::now();
    cohort::Autotuner tuner(comm, o);
    Tuned out;
    out.bound = tuner.step_bound();
    while (!tuner.frozen()) tuner.step(w.step(comm));
    out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    out.values = tuner.values();
    out.steps = tuner.steps();
    return out;
}

int run_rank(int rank, const Options& opt, uint16_t port) {
    cohort::CommOptions co;
    co.rank = rank;
    co.size = opt.ranks;
    co.store_url = "tcp://127.0.0.1:" + std::to_string(port);
    co.address = "127.0.0.1";
    co.job_id = "bench-autotune";
    if (opt.transport == "tcp") {
        co.shm_size = 0;
        co.direct_copy = false;
    }
    cohort::Communicator comm(co);
    Workload w;
    auto params = cohort::comm_parameters(comm);
    const bool lead = rank == 0;

    // 1. Grid search over the joint grid.
    std::vector<std::size_t> index(params.size(), 0);
    Values best_values;
    double best = -1;
    int points = 0;
    const auto grid_start = Clock::now();
    for (;;) {
        Values v;
        for (std::size_t i = 0; i < params.size(); ++i) v[params[i].name] = params[i].candidates[index[i]];
        apply_values(params, v);
        const double t = measure(comm, w, opt.step_reps);
        ++points;
        if (t > best) best = t, best_values = v;
        std::size_t d = 0;
        for (; d < params.size(); ++d) {
            if (++index[d] < params[d].candidates.size()) break;
            index[d] = 0;
        }
        if (d == params.size()) break;
    }
    const double grid_seconds = std::chrono::duration<double>(Clock::now() - grid_start).count();

    // 2. The searches, from the defaults.
    const Tuned coord = tune(comm, w, cohort::AutotuneSearch::coordinate, opt.max_steps);
    const Tuned bayes = tune(comm, w, cohort::AutotuneSearch::bayesian, opt.max_steps);
    comm.set_tuning(cohort::CommTuning{});
    Values defaults;
    for (const auto& p : params) defaults[p.name] = p.initial;

    // 3. Side by side.
    const std::vector<std::pair<std::string, Values>> configs = {
        {"grid best", best_values}, {"coordinate", coord.values}, {"bayesian", bayes.values}, {"defaults", defaults}};
    std::vector<std::vector<double>> finals(configs.size());
    for (int round = 0; round < opt.final_rounds; ++round)
        for (std::size_t c = 0; c < configs.size(); ++c) {
            apply_values(params, configs[c].second);
            finals[c].push_back(measure(comm, w, opt.step_reps));
        }
    if (!lead) return 0;
    std::vector<double> final_median;
    for (auto& f : finals) final_median.push_back(median(f));

    std::printf("ranks %d, transport %s, step: named all-reduce (avg) of %zu float32 tensors, %.1f MB\n", opt.ranks,
                opt.transport.c_str(), w.buffers.size(), double(w.bytes) / 1e6);
    std::printf("parameters tuned:");
    for (const auto& p : params) std::printf(" %s (%zu)", p.name.c_str(), p.candidates.size());
    std::printf("\ngrid search: %d points x %d steps (+1 warm-up each) in %.1f s, best %.3f GB/s: %s\n", points,
                opt.step_reps, grid_seconds, best / 1e9, text(best_values).c_str());
    std::printf("\n%-11s %6s %6s %8s %12s %8s  %s\n", "setting", "steps", "bound", "seconds", "GB/s", "vs grid",
                "values");
    for (std::size_t c = 0; c < configs.size(); ++c) {
        const Tuned* t = c == 1 ? &coord : c == 2 ? &bayes : nullptr;
        char steps[16] = "-", bound[16] = "-", secs[16] = "-";
        if (t) {
            std::snprintf(steps, sizeof steps, "%lld", static_cast<long long>(t->steps));
            std::snprintf(bound, sizeof bound, "%lld", static_cast<long long>(t->bound));
            std::snprintf(secs, sizeof secs, "%.1f", t->seconds);
        }
        std::printf("%-11s %6s %6s %8s %12.3f %8.3f  %s\n", configs[c].first.c_str(), steps, bound, secs,
                    final_median[c] / 1e9, final_median[c] / final_median[0], text(configs[c].second).c_str());
    }
    std::printf("\n(final figures: median of %d rounds, round-robin, of the median of %d steps)\n", opt.final_rounds,
                opt.step_reps);
    const double ratio = final_median[1] / final_median[0];
    std::printf("coordinate descent reached %.3f of the grid's best in %lld steps (target >= 0.95): %s\n", ratio,
                static_cast<long long>(coord.steps), ratio >= 0.95 ? "met" : "MISSED");
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const Options opt = parse(argc, argv);
    unsetenv("COHORT_AUTOTUNE_DIR");  // no state from an earlier run
    {
        std::ifstream load("/proc/loadavg");
        std::string a, b, c;
        load >> a >> b >> c;
        std::printf("cpus %ld, load %s %s %s (1, 5, 15 min)\n", sysconf(_SC_NPROCESSORS_ONLN), a.c_str(), b.c_str(),
                    c.c_str());
        std::fflush(stdout);
    }
    const uint16_t port = free_port();
    std::vector<pid_t> children;
    for (int r = 0; r < opt.ranks; ++r) {
        const pid_t pid = fork();
        if (pid == 0) {
            alarm(1800);  // never outlives a stuck run
            try {
                const int rc = run_rank(r, opt, port);
                std::fflush(stdout);
                std::_Exit(rc);
            } catch (const std::exception& e) {
                std::fprintf(stderr, "bench_autotune: rank %d: %s\n", r, e.what());
                std::fflush(stdout);
                std::_Exit(1);
            }
        }
        if (pid < 0) {
            std::perror("fork");
            return 1;
        }
        children.push_back(pid);
    }
    int failed = 0;
    for (pid_t pid : children) {
        int status = 0;
        waitpid(pid, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
    }
    return failed == 0 ? 0 : 1;
}
