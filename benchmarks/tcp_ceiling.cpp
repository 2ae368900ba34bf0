// Question: how fast can TCP between these endpoints move data when every
// endpoint sends and receives at once, as the ranks of an all-reduce do?
// The ceiling the all-reduce tables are read against (docs/benchmarks.md).
//
//   tcp_ceiling --endpoints HOST:PORT,HOST:PORT[,...] --rank R
//       [--bytes 64M] [--reps 5] [--buffer 0] [--ranks N]
//
// One process per endpoint (the emulated hosts run one each). Endpoints
// form a ring: each connects to the next and accepts the previous, and in
// every repetition sends --bytes to the next while it receives as many from
// the previous, on two threads with blocking sockets: nothing cohort does.
// With two endpoints that is a bidirectional exchange. A repetition's time
// is the slowest endpoint's; the rate is bytes / best time, per direction.
//
// The bound, printed by rank 0: any all-reduce of S bytes over N ranks must
// send and receive 2(N-1)/N x S bytes per rank, and busbw is defined as
// S/t x 2(N-1)/N, so on a ring of N endpoints busbw <= rate. With N ranks on
// H hosts (--ranks N, one endpoint per host), the bytes that must cross a
// host's link are 2(H-1)/H x S each way (the host's ranks can combine
// first), so t >= 2(H-1)/H x S / rate and busbw <= rate x ((N-1)/N) / ((H-1)/H).
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
    std::vector<std::string> endpoints;
    int rank = -1;
    std::size_t bytes = std::size_t(64) << 20;
    int reps = 5;
    int buffer = 0;  // SO_SNDBUF/SO_RCVBUF; 0 leaves the kernel's autotuning
    int ranks = 0;   // all-reduce ranks the bound is for; 0: one per endpoint
};

std::size_t parse_size(std::string_view text) {
    std::size_t end = 0;
    const std::string s(text);
    unsigned long long value = 0;
    try {
        value = std::stoull(s, &end);
    } catch (const std::exception&) {
        throw std::invalid_argument("bad size '" + s + "': use bytes or a K, M or G suffix (64M)");
    }
    const std::string_view unit = text.substr(end);
    if (unit.empty()) return value;
    if (unit == "K") return value << 10;
    if (unit == "M") return value << 20;
    if (unit == "G") return value << 30;
    throw std::invalid_argument("bad size '" + s + "': use bytes or a K, M or G suffix (64M)");
}

Options parse_options(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 == argc) throw std::invalid_argument(std::string(arg) + " needs a value");
            return argv[++i];
        };
        if (arg == "--endpoints") {
            const std::string list = value();
            for (std::size_t start = 0; start <= list.size();) {
                const std::size_t comma = std::min(list.find(',', start), list.size());
                o.endpoints.push_back(list.substr(start, comma - start));
                start = comma + 1;
            }
        } else if (arg == "--rank") {
            o.rank = std::stoi(value());
        } else if (arg == "--bytes") {
            o.bytes = parse_size(value());
        } else if (arg == "--reps") {
            o.reps = std::stoi(value());
        } else if (arg == "--buffer") {
            o.buffer = static_cast<int>(parse_size(value()));
        } else if (arg == "--ranks") {
            o.ranks = std::stoi(value());
        } else {
            throw std::invalid_argument("unknown option '" + std::string(arg) + "'");
        }
    }
    const int n = static_cast<int>(o.endpoints.size());
    if (n < 2) throw std::invalid_argument("--endpoints needs two or more HOST:PORT, comma-separated");
    if (o.rank < 0 || o.rank >= n) throw std::invalid_argument("--rank must be 0.." + std::to_string(n - 1));
    if (o.bytes == 0 || o.reps < 1) throw std::invalid_argument("--bytes and --reps must be positive");
    if (o.ranks != 0 && o.ranks < n) throw std::invalid_argument("--ranks must be at least the endpoint count");
    return o;
}

[[noreturn]] void die(const std::string& what) {
    throw std::runtime_error(what + ": " + std::strerror(errno));
}

sockaddr_in resolve(const std::string& endpoint) {
    const std::size_t colon = endpoint.rfind(':');
    if (colon == std::string::npos) throw std::invalid_argument("endpoint '" + endpoint + "' is not HOST:PORT");
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const std::string host = endpoint.substr(0, colon), port = endpoint.substr(colon + 1);
    if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || found == nullptr)
        throw std::runtime_error("cannot resolve '" + endpoint + "'");
    sockaddr_in address{};
    std::memcpy(&address, found->ai_addr, sizeof address);
    freeaddrinfo(found);
    return address;
}

void tune(int fd, int buffer) {
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (buffer > 0) {
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof buffer);
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof buffer);
    }
}

void send_all(int fd, const char* data, std::size_t bytes) {
    while (bytes > 0) {
        const ssize_t n = ::send(fd, data, bytes, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) die("send");
        data += n;
        bytes -= std::size_t(n);
    }
}

void recv_all(int fd, char* data, std::size_t bytes) {
    while (bytes > 0) {
        const ssize_t n = ::recv(fd, data, bytes, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n == 0) throw std::runtime_error("recv: the previous endpoint closed the connection");
        if (n < 0) die("recv");
        data += n;
        bytes -= std::size_t(n);
    }
}

int run(const Options& o) {
    const int n = static_cast<int>(o.endpoints.size());
    const sockaddr_in self = resolve(o.endpoints[std::size_t(o.rank)]);
    const sockaddr_in next = resolve(o.endpoints[std::size_t((o.rank + 1) % n)]);

    const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (o.buffer > 0) setsockopt(listener, SOL_SOCKET, SO_RCVBUF, &o.buffer, sizeof o.buffer);
    if (::bind(listener, reinterpret_cast<const sockaddr*>(&self), sizeof self) != 0)
        die("bind " + o.endpoints[std::size_t(o.rank)]);
    if (::listen(listener, 4) != 0) die("listen");

    // The next endpoint may not listen yet: retry for up to 30 s.
    int out = -1;
    const auto give_up = Clock::now() + std::chrono::seconds(30);
    for (;;) {
        out = ::socket(AF_INET, SOCK_STREAM, 0);
        if (o.buffer > 0) setsockopt(out, SOL_SOCKET, SO_SNDBUF, &o.buffer, sizeof o.buffer);
        if (::connect(out, reinterpret_cast<const sockaddr*>(&next), sizeof next) == 0) break;
        ::close(out);
        if (Clock::now() > give_up) die("connect to " + o.endpoints[std::size_t((o.rank + 1) % n)] + " for 30 s");
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const int in = ::accept(listener, nullptr, nullptr);
    if (in < 0) die("accept");
    ::close(listener);
    tune(out, o.buffer);
    tune(in, o.buffer);

    // Every endpoint's largest value, passed n-1 times around the ring.
    auto ring_max = [&](double value) {
        double best = value;
        for (int i = 0; i + 1 < n; ++i) {
            send_all(out, reinterpret_cast<const char*>(&best), sizeof best);
            double got = 0;
            recv_all(in, reinterpret_cast<char*>(&got), sizeof got);
            best = std::max(best, got);
        }
        return best;
    };

    std::vector<char> source(o.bytes, 1), sink(o.bytes);
    std::vector<double> times;
    for (int rep = 0; rep < o.reps + 1; ++rep) {  // the first warms the connections up
        ring_max(0);                              // a barrier
        const auto start = Clock::now();
        std::thread sender([&] { send_all(out, source.data(), o.bytes); });
        recv_all(in, sink.data(), o.bytes);
        sender.join();
        const double seconds = ring_max(std::chrono::duration<double>(Clock::now() - start).count());
        if (rep > 0) times.push_back(seconds);
    }
    ::close(out);
    ::close(in);

    if (o.rank == 0) {
        std::sort(times.begin(), times.end());
        const double best = times.front(), median = times[times.size() / 2];
        const double rate = double(o.bytes) / best / 1e9;
        const int ranks = o.ranks > 0 ? o.ranks : n;
        const double bound = rate * (double(ranks - 1) / ranks) / (double(n - 1) / n);
        std::printf("tcp_ceiling: %d endpoints in a ring, %zu bytes each way per endpoint, best of %d\n", n, o.bytes,
                    o.reps);
        std::printf("  best %.2f ms, median %.2f ms: %.2f GB/s per direction (median %.2f)\n", best * 1e3, median * 1e3,
                    rate, double(o.bytes) / median / 1e9);
        std::printf("  all-reduce bound for %d ranks on these %d endpoints: busbw <= %.2f GB/s\n", ranks, n, bound);
        std::printf(
            "ceiling endpoints=%d ranks=%d bytes=%zu best_s=%.6f median_s=%.6f rate_GBps=%.3f bound_GBps=%.3f\n", n,
            ranks, o.bytes, best, median, rate, bound);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options options;
    try {
        options = parse_options(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr,
                     "tcp_ceiling: %s\nusage: tcp_ceiling --endpoints HOST:PORT,HOST:PORT[,...] --rank R "
                     "[--bytes 64M] [--reps 5] [--buffer 0] [--ranks N]\n",
                     e.what());
        return 2;
    }
    try {
        return run(options);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "tcp_ceiling: rank %d: %s\n", options.rank, e.what());
        return 1;
    }
}
