// Question: how does cohort's all-reduce over TCP compare with Gloo's
// ring-chunked all-reduce and Open MPI's MPI_Allreduce, on the same buffers,
// in the same run, from 1 KiB to 256 MiB?
//
//   mpirun -np 4 --oversubscribe --allow-run-as-root --bind-to none --mca pml ob1
//       --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo
//       --mca mpi_yield_when_idle 1 build/benchmarks/bench_allreduce
//       [--sizes 1K,4K,...,256M] [--iters auto|N] [--seconds 0.5]
//       [--dtype float32|float64] [--mem-bytes 256M] [--label TEXT] [--json FILE]
//       [--iface eth0] [--socket-buffer 4M] [--max-frame 4M] [--cohort-also doubling,star]
//
// benchmarks/run_allreduce.sh runs it at 2 and 4 ranks with those flags.
// Every rank takes its rank and size from MPI. For each size and library:
// one all-reduce checks the sums (rank r holds (r+1) times small integers),
// then two warm-ups, then the timed iterations; the time of an iteration is
// the largest of the ranks' means. busbw = algbw * 2(n-1)/n, as nccl-tests
// report it. cohort's rows end with its busbw over the better anchor's and,
// up to 64 KiB, its time over MPI's. Built with BENCH_NO_COHORT (CMake
// option COHORT_BENCH_NO_COHORT) it measures the two anchors only.
//
// Before the all-reduces every rank copies and then sums a --mem-bytes
// buffer at the same time as the others (memory_bandwidth.hpp explains why):
// the header gives the per-rank rates and every row's `limit` column is its
// fraction of the memory-bandwidth floor t_min(S) = S / memcpy rate.
// --label names the run in the header and the JSON (run_allreduce.sh passes
// the Open MPI transport, as its tables differ only in that).
#ifndef BENCH_NO_COHORT
#include <cohort/communicator.hpp>
#include <cohort/error.hpp>
#endif

#include <gloo/allreduce_ring_chunked.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <mpi.h>

#include "memory_bandwidth.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace {

#ifdef BENCH_NO_COHORT
struct Communicator {};
#else
using cohort::Communicator;
#endif

constexpr int kWarmups = 2;
constexpr int kMinIters = 3;
constexpr int kMaxIters = 100000;
constexpr std::size_t kLatencySizes = std::size_t(64) << 10;  // up to here, also time / MPI's

struct Options {
    std::vector<std::size_t> sizes;
    int iters = 0;  // 0: as many as fit in `seconds`
    double seconds = 0.5;
    std::string dtype = "float32";
    std::size_t mem_bytes = std::size_t(256) << 20;  // 0: no memory-bandwidth limit
    std::string label;
    std::string json;
    // The interface Gloo and cohort connect over; empty: loopback. Across
    // emulated hosts (run_hosts_allreduce.py) it is eth0.
    std::string iface;
    // cohort's CommOptions::socket_buffer and max_frame, for measuring them;
    // unset: the library's defaults.
    std::optional<std::size_t> socket_buffer;
    std::optional<std::size_t> max_frame;
    // cohort algorithms measured after auto (and ring, when auto is not
    // ring), to compare them at the same sizes in the same run.
    std::vector<std::string> cohort_also;
};

// "1K" = 1024, "4M", "1G", or bytes.
std::size_t parse_size(std::string_view text) {
    std::size_t end = 0;
    const std::string s(text);
    const unsigned long long value = std::stoull(s, &end);
    const std::string_view unit = text.substr(end);
    if (unit.empty() || unit == "B") return value;
    if (unit == "K" || unit == "KiB") return value << 10;
    if (unit == "M" || unit == "MiB") return value << 20;
    if (unit == "G" || unit == "GiB") return value << 30;
    throw std::invalid_argument("bad size '" + s + "': use bytes or a K, M or G suffix (1K, 4M)");
}

// A comma list; "..." continues the ratio of the two sizes before it up to
// the one after it: "1K,4K,...,256M".
std::vector<std::size_t> parse_sizes(std::string_view text) {
    std::vector<std::string_view> items;
    for (std::size_t start = 0; start <= text.size();) {
        const std::size_t comma = std::min(text.find(',', start), text.size());
        items.push_back(text.substr(start, comma - start));
        start = comma + 1;
    }
    std::vector<std::size_t> sizes;
    for (std::size_t i = 0; i < items.size(); ++i) {
        if (items[i] != "...") {
            sizes.push_back(parse_size(items[i]));
            continue;
        }
        if (sizes.size() < 2 || i + 1 == items.size() || sizes[sizes.size() - 2] == 0)
            throw std::invalid_argument("'...' in --sizes needs two sizes before it and one after");
        const std::size_t ratio = sizes.back() / sizes[sizes.size() - 2];
        const std::size_t last = parse_size(items[i + 1]);
        if (ratio < 2 || sizes.back() % sizes[sizes.size() - 2] != 0)
            throw std::invalid_argument("'...' in --sizes needs a whole ratio of 2 or more, as in 1K,4K,...,1M");
        for (std::size_t next = sizes.back() * ratio; next < last; next *= ratio) sizes.push_back(next);
    }
    return sizes;
}

Options parse_options(int argc, char** argv) {
    Options options;
    options.sizes = parse_sizes("1K,4K,...,256M");
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        auto value = [&]() -> std::string_view {
            if (i + 1 == argc) throw std::invalid_argument(std::string(arg) + " needs a value");
            return argv[++i];
        };
        if (arg == "--iface") {
            options.iface = value();
        } else if (arg == "--socket-buffer") {
            options.socket_buffer = parse_size(value());
        } else if (arg == "--max-frame") {
            options.max_frame = parse_size(value());
        } else if (arg == "--sizes") {
            options.sizes = parse_sizes(value());
        } else if (arg == "--iters") {
            const std::string v(value());
            options.iters = v == "auto" ? 0 : std::stoi(v);
            if (options.iters < 0) throw std::invalid_argument("--iters takes 'auto' or a count of 1 or more");
        } else if (arg == "--seconds") {
            options.seconds = std::stod(std::string(value()));
        } else if (arg == "--dtype") {
            options.dtype = value();
            if (options.dtype == "float") options.dtype = "float32";
            if (options.dtype == "double") options.dtype = "float64";
            if (options.dtype != "float32" && options.dtype != "float64")
                throw std::invalid_argument("--dtype takes float32 or float64, not '" + options.dtype + "'");
        } else if (arg == "--mem-bytes") {
            options.mem_bytes = parse_size(value());
        } else if (arg == "--cohort-also") {
            const std::string_view list = value();
            for (std::size_t start = 0; start <= list.size();) {
                const std::size_t comma = std::min(list.find(',', start), list.size());
                if (comma > start) options.cohort_also.emplace_back(list.substr(start, comma - start));
#ifndef BENCH_NO_COHORT
                if (comma > start) {
                    try {
                        (void)cohort::parse_algorithm(options.cohort_also.back());
                    } catch (const std::exception& e) {
                        throw std::invalid_argument(std::string("--cohort-also: ") + e.what());
                    }
                }
#endif
                start = comma + 1;
            }
        } else if (arg == "--label") {
            options.label = value();
        } else if (arg == "--json") {
            options.json = value();
        } else if (arg == "--help" || arg == "-h") {
            throw std::invalid_argument("");
        } else {
            throw std::invalid_argument("unknown option '" + std::string(arg) + "'");
        }
    }
    return options;
}

std::string format_size(std::size_t bytes) {
    if (bytes >= (std::size_t(1) << 30) && bytes % (std::size_t(1) << 30) == 0)
        return std::to_string(bytes >> 30) + " GiB";
    if (bytes >= (std::size_t(1) << 20) && bytes % (std::size_t(1) << 20) == 0)
        return std::to_string(bytes >> 20) + " MiB";
    if (bytes >= (std::size_t(1) << 10) && bytes % (std::size_t(1) << 10) == 0)
        return std::to_string(bytes >> 10) + " KiB";
    return std::to_string(bytes) + " B";
}

// One measured (size, library) pair, kept by rank 0.
struct Row {
    std::size_t bytes = 0;
    std::string library;    // "mpi", "gloo", "cohort"
    std::string algorithm;  // what ran: "MPI_Allreduce", "ring_chunked", "ring", ...
    int iters = 0;
    double seconds = 0;  // per iteration, the slowest rank's mean
    double algbw = 0;    // GB/s
    double busbw = 0;    // GB/s
    std::optional<double> busbw_vs_anchor;
    std::optional<double> time_vs_mpi;
    std::optional<double> of_limit;  // t_min / seconds (memory_bandwidth.hpp)
};

// What this rank's communicator talks to each peer over, e.g. "self, shm",
// printed in the header so a table says which transport it measured.
[[maybe_unused]] std::string transport_summary([[maybe_unused]] const Communicator& comm) {
    std::string out;
#ifndef BENCH_NO_COHORT
    for (const cohort::Transport t : comm.transports())
        out += (out.empty() ? "" : ", ") + std::string(cohort::transport_name(t));
#endif
    return out;
}

class Bench {
public:
    Bench(const Options& options, int rank, int size, std::optional<membw::Rates> memory)
        : options_(options), rank_(rank), size_(size), memory_(memory) {}

    // Checks one all-reduce, then times `run`. False when the sums are wrong.
    template <typename T>
    bool measure(std::vector<T>& buf, const std::string& library, const std::string& algorithm,
                 const std::function<void()>& run) {
        MPI_Barrier(MPI_COMM_WORLD);
        for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<T>((rank_ + 1) * int(i % 13 + 1));
        run();
        const T ranks_sum = static_cast<T>(size_ * (size_ + 1) / 2);
        std::size_t wrong = buf.size();
        for (std::size_t i = 0; i < buf.size() && wrong == buf.size(); ++i)
            if (buf[i] != ranks_sum * static_cast<T>(i % 13 + 1)) wrong = i;
        if (wrong != buf.size())
            std::fprintf(stderr, "FAIL: rank %d, %s %s, %s: element %zu is %g, expected %g\n", rank_, library.c_str(),
                         algorithm.c_str(), format_size(buf.size() * sizeof(T)).c_str(), wrong, double(buf[wrong]),
                         double(ranks_sum * static_cast<T>(wrong % 13 + 1)));
        int failed = wrong != buf.size() ? 1 : 0;
        MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (failed != 0) return false;

        // Positive values that only grow (to +inf on long runs, which adds
        // at full speed): never a denormal.
        for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<T>(1.0 + double(i % 7) / 8.0);
        for (int i = 0; i < kWarmups; ++i) run();
        const int iters = options_.iters > 0 ? options_.iters : calibrate(run);

        MPI_Barrier(MPI_COMM_WORLD);
        const auto start = Clock::now();
        for (int i = 0; i < iters; ++i) run();
        double mean = std::chrono::duration<double>(Clock::now() - start).count() / iters;
        double slowest = 0;
        MPI_Reduce(&mean, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank_ == 0) add_row(buf.size() * sizeof(T), library, algorithm, iters, slowest);
        return true;
    }

    void print_header(const std::string& transports) const {
        if (!options_.label.empty()) std::printf("run: %s\n", options_.label.c_str());
        std::printf("all-reduce, %d ranks, %s, sum in place; time = slowest rank's mean; GB/s = 1e9 B/s\n", size_,
                    options_.dtype.c_str());
        if (!transports.empty()) std::printf("cohort transports (rank 0): %s\n", transports.c_str());
        if (memory_)
            std::printf(
                "memory: memcpy %.2f GB/s per rank (%d concurrent), read %.2f GB/s per rank; %s buffers, "
                "best of %d; limit = t_min / time, t_min = size / memcpy rate\n",
                memory_->memcpy_gbps, memory_->ranks, memory_->read_gbps, format_size(memory_->bytes).c_str(),
                memory_->repeats);
        std::printf("%9s  %-7s %-14s %7s %12s %9s %9s %14s %8s %6s\n", "size", "library", "algorithm", "iters",
                    "time (us)", "algbw", "busbw", "busbw/anchor", "time/MPI", "limit");
    }

    const std::optional<membw::Rates>& memory() const { return memory_; }

    const std::vector<Row>& rows() const { return rows_; }

private:
    using Clock = std::chrono::steady_clock;

    // The iterations that fill --seconds: batches grow until one takes a
    // tenth of it (one iteration is a poor guess: small messages vary
    // tenfold), every rank agreeing on the slowest rank's time.
    int calibrate(const std::function<void()>& run) const {
        int batch = 1;
        for (;;) {
            const auto start = Clock::now();
            for (int i = 0; i < batch; ++i) run();
            double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
            MPI_Allreduce(MPI_IN_PLACE, &elapsed, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            const double wanted = options_.seconds / 10;
            if (elapsed >= wanted || batch >= kMaxIters)
                return int(
                    std::clamp(std::ceil(options_.seconds * batch / elapsed), double(kMinIters), double(kMaxIters)));
            batch = int(std::min(double(kMaxIters), batch * std::clamp(wanted / std::max(elapsed, 1e-9), 2.0, 10.0)));
        }
    }

    void add_row(std::size_t bytes, const std::string& library, const std::string& algorithm, int iters,
                 double seconds) {
        Row row{bytes, library, algorithm, iters, seconds, 0, 0, {}, {}, {}};
        row.algbw = double(bytes) / seconds / 1e9;
        row.busbw = row.algbw * 2.0 * (size_ - 1) / size_;
        std::string versus;
        if (library == "cohort") {
            const Row* best = nullptr;
            const Row* mpi = nullptr;
            for (const Row& r : rows_) {
                if (r.bytes != bytes || r.library == "cohort") continue;
                if (best == nullptr || r.busbw > best->busbw) best = &r;
                if (r.library == "mpi") mpi = &r;
            }
            char text[64] = "";
            if (best != nullptr && best->busbw > 0) {
                row.busbw_vs_anchor = row.busbw / best->busbw;
                std::snprintf(text, sizeof text, "%.2f (%s)", *row.busbw_vs_anchor, best->library.c_str());
            }
            versus = text;
            if (mpi != nullptr && bytes <= kLatencySizes) row.time_vs_mpi = seconds / mpi->seconds;
        }
        char vs_mpi[32] = "";
        if (row.time_vs_mpi) std::snprintf(vs_mpi, sizeof vs_mpi, "%.2f", *row.time_vs_mpi);
        char limit[32] = "";
        if (memory_) {
            row.of_limit = membw::fraction_of_limit(*memory_, bytes, seconds);
            std::snprintf(limit, sizeof limit, "%.3f", *row.of_limit);
        }
        std::printf("%9s  %-7s %-14s %7d %12.1f %9.3f %9.3f %14s %8s %6s\n", format_size(bytes).c_str(),
                    library.c_str(), algorithm.c_str(), iters, seconds * 1e6, row.algbw, row.busbw, versus.c_str(),
                    vs_mpi, limit);
        std::fflush(stdout);
        rows_.push_back(row);
    }

    const Options& options_;
    int rank_;
    int size_;
    std::optional<membw::Rates> memory_;
    std::vector<Row> rows_;
};

// The label is the caller's text: only quotes and backslashes are escaped.
std::string json_string(const std::string& text) {
    std::string out = "\"";
    for (const char c : text) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out + "\"";
}

void write_json(const std::string& path, const Options& options, int size, const Bench& bench) {
    const std::vector<Row>& rows = bench.rows();
    std::FILE* out = std::fopen(path.c_str(), "w");
    if (out == nullptr) throw std::runtime_error("cannot write --json file '" + path + "'");
    std::fprintf(out, "{\"benchmark\": \"allreduce\", \"ranks\": %d, \"dtype\": \"%s\", \"label\": %s, ", size,
                 options.dtype.c_str(), json_string(options.label).c_str());
    if (const auto& m = bench.memory())
        std::fprintf(out,
                     "\"memory\": {\"memcpy_gbps_per_rank\": %.4f, \"read_gbps_per_rank\": %.4f, "
                     "\"concurrent_ranks\": %d, \"bytes\": %zu, \"repeats\": %d}, ",
                     m->memcpy_gbps, m->read_gbps, m->ranks, m->bytes, m->repeats);
    std::fprintf(out, "\"rows\": [");
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const Row& r = rows[i];
        std::fprintf(out,
                     "%s\n  {\"bytes\": %zu, \"library\": \"%s\", \"algorithm\": \"%s\", \"iters\": %d, "
                     "\"time_us\": %.3f, \"algbw_gbps\": %.4f, \"busbw_gbps\": %.4f",
                     i == 0 ? "" : ",", r.bytes, r.library.c_str(), r.algorithm.c_str(), r.iters, r.seconds * 1e6,
                     r.algbw, r.busbw);
        if (r.busbw_vs_anchor) std::fprintf(out, ", \"busbw_vs_best_anchor\": %.4f", *r.busbw_vs_anchor);
        if (r.time_vs_mpi) std::fprintf(out, ", \"time_vs_mpi\": %.4f", *r.time_vs_mpi);
        if (r.of_limit) std::fprintf(out, ", \"fraction_of_memory_limit\": %.4f", *r.of_limit);
        std::fprintf(out, "}");
    }
    std::fprintf(out, "\n]}\n");
    if (std::fclose(out) != 0) throw std::runtime_error("cannot write --json file '" + path + "'");
}

template <typename T>
MPI_Datatype mpi_type();
template <>
MPI_Datatype mpi_type<float>() {
    return MPI_FLOAT;
}
template <>
MPI_Datatype mpi_type<double>() {
    return MPI_DOUBLE;
}

// Every size through every library; false at the first wrong sum.
template <typename T>
bool run_sizes(Bench& bench, const Options& options, const std::shared_ptr<gloo::Context>& gloo_context,
               [[maybe_unused]] Communicator& comm) {
    for (const std::size_t bytes : options.sizes) {
        const std::size_t count = bytes / sizeof(T);
        std::vector<T> buf(count);
        const bool ok = bench.measure(buf, "mpi", "MPI_Allreduce", [&] {
            MPI_Allreduce(MPI_IN_PLACE, buf.data(), int(count), mpi_type<T>(), MPI_SUM, MPI_COMM_WORLD);
        });
        if (!ok) return false;
        {
            // Gloo's shape: the constructor registers the buffers, run() moves data.
            gloo::AllreduceRingChunked<T> ring(gloo_context, std::vector<T*>{buf.data()}, int(count));
            if (!bench.measure(buf, "gloo", "ring_chunked", [&] { ring.run(); })) return false;
        }
#ifndef BENCH_NO_COHORT
        const cohort::Algorithm chosen = comm.choose(bytes);
        const std::string label = std::string("auto:") + cohort::algorithm_name(chosen);
        auto cohort_run = [&](cohort::Algorithm algorithm) {
            return [&comm, &buf, algorithm] {
                comm.allreduce(std::span<T>(buf), cohort::ReduceOp::sum, cohort::CallOptions{algorithm, {}});
            };
        };
        if (!bench.measure(buf, "cohort", label, cohort_run(cohort::Algorithm::automatic))) return false;
        if (chosen != cohort::Algorithm::ring &&
            !bench.measure(buf, "cohort", "ring", cohort_run(cohort::Algorithm::ring)))
            return false;
        for (const std::string& name : options.cohort_also) {
            const cohort::Algorithm also = cohort::parse_algorithm(name);
            if (also == chosen || also == cohort::Algorithm::ring) continue;
            if (!bench.measure(buf, "cohort", name, cohort_run(also))) return false;
        }
#endif
    }
    return true;
}

int run(int argc, char** argv, int rank, int size) {
    Options options;
    try {
        options = parse_options(argc, argv);
    } catch (const std::exception& e) {
        if (rank == 0) {
            if (*e.what() != '\0') std::fprintf(stderr, "bench_allreduce: %s\n", e.what());
            std::fprintf(stderr,
                         "usage: mpirun -np N ... bench_allreduce [--sizes 1K,4K,...,256M] [--iters auto|N] "
                         "[--seconds 0.5] [--dtype float32|float64] [--mem-bytes 256M|0] [--label TEXT] "
                         "[--json FILE] [--iface NAME] [--socket-buffer BYTES] [--max-frame BYTES] "
                         "[--cohort-also ALGORITHM,...]\n");
        }
        return 2;
    }
    const std::size_t element = options.dtype == "float64" ? sizeof(double) : sizeof(float);
    for (const std::size_t bytes : options.sizes) {
        if (bytes == 0 || bytes % element != 0 || bytes / element > std::size_t(INT_MAX)) {
            if (rank == 0)
                std::fprintf(stderr,
                             "bench_allreduce: size %zu is not a positive multiple of %zu below 2^31 elements\n", bytes,
                             element);
            return 2;
        }
    }

    // A folder every rank can reach (they share a host): rank 0 makes it.
    char dir[4096] = "";
    if (rank == 0) {
        const std::string pattern = (std::filesystem::temp_directory_path() / "bench_allreduce.XXXXXX").string();
        std::snprintf(dir, sizeof dir, "%s", pattern.c_str());
        if (::mkdtemp(dir) == nullptr) dir[0] = '\0';
        if (dir[0] != '\0') {
            std::filesystem::create_directory(std::filesystem::path(dir) / "gloo");
            std::filesystem::create_directory(std::filesystem::path(dir) / "cohort");
        }
    }
    MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (dir[0] == '\0') throw std::runtime_error("cannot make a temporary folder for the rendezvous");

    gloo::transport::tcp::attr attr("127.0.0.1");
    if (!options.iface.empty()) {
        attr.hostname.clear();
        attr.iface = options.iface;
    }
    auto device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore gloo_store(std::string(dir) + "/gloo");
    auto gloo_context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    gloo_context->setTimeout(std::chrono::seconds(300));
    gloo_context->connectFullMesh(gloo_store, device);

#ifdef BENCH_NO_COHORT
    Communicator comm;
#else
    cohort::CommOptions comm_options;
    comm_options.rank = rank;
    comm_options.size = size;
    comm_options.store_url = std::string("file://") + dir + "/cohort";
    comm_options.address = options.iface.empty() ? "127.0.0.1" : "";
    comm_options.ifname = options.iface;
    if (options.socket_buffer) comm_options.socket_buffer = *options.socket_buffer;
    if (options.max_frame) comm_options.max_frame = *options.max_frame;
    comm_options.job_id = "bench_allreduce";
    comm_options.timeout = std::chrono::seconds(300);
    Communicator comm(comm_options);
#endif

    // Before any all-reduce, with the buffers freed again before they run.
    std::optional<membw::Rates> memory;
    if (options.mem_bytes > 0) memory = membw::measure(MPI_COMM_WORLD, options.mem_bytes);

    Bench bench(options, rank, size, memory);
    if (rank == 0) bench.print_header(transport_summary(comm));
    const bool ok = options.dtype == "float64" ? run_sizes<double>(bench, options, gloo_context, comm)
                                               : run_sizes<float>(bench, options, gloo_context, comm);
#ifndef BENCH_NO_COHORT
    comm.close();
#endif
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        std::filesystem::remove_all(dir);
        if (!ok) std::printf("FAIL: an all-reduce returned wrong sums (details above)\n");
        if (ok && !options.json.empty()) write_json(options.json, options, size, bench);
    }
    return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    int rank = 0;
    int size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int status = 0;
    try {
        status = run(argc, argv, rank, size);
    } catch (const std::exception& e) {
        // A peer may be waiting inside a collective: take every rank down.
        std::fprintf(stderr, "bench_allreduce: rank %d: %s\n", rank, e.what());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Finalize();
    return status;
}
