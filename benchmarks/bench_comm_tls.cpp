// Question: what does TLS on the links cost an all-reduce, against plain
// TCP, at 1 MiB and 64 MiB? Both run in the same invocation, alternating
// round by round, on the same buffers; with two anchors measured there too:
//
//   - the TCP ceiling on loopback: two threads with blocking sockets, each
//     sending --anchor-bytes to the other while receiving as many (as
//     tcp_ceiling does), rate per direction;
//   - the crypto ceiling: AES-256-GCM (what TLS 1.3 negotiates here)
//     encrypting then decrypting --anchor-bytes on one thread through
//     OpenSSL's EVP interface; every byte of a TLS all-reduce is encrypted
//     once by its sender and decrypted once by its receiver.
//
//   bench_comm_tls [--ranks 2] [--sizes 1M,64M] [--reps 10] [--rounds 2]
//                  [--anchor-bytes 64M]
//
// Ranks are threads of this process, on loopback, with shared memory and
// direct copies off so every byte crosses a link. The certificates (EC
// P-256, one CA) are made with the openssl command in a temp folder and
// removed afterwards. Time per all-reduce is the slowest rank's, median of
// --reps after one warm-up; busbw = S/t x 2(N-1)/N. docs/benchmarks.md has
// the figures and the command.
#include <cohort/communicator.hpp>
#include <cohort/store.hpp>

#include <openssl/evp.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
    int ranks = 2;
    std::vector<std::size_t> sizes = {std::size_t(1) << 20, std::size_t(64) << 20};
    int reps = 10;
    int rounds = 2;
    std::size_t anchor_bytes = std::size_t(64) << 20;
};

std::size_t parse_size(std::string_view text) {
    std::size_t used = 0;
    const std::string s(text);
    unsigned long long value = 0;
    try {
        value = std::stoull(s, &used);
    } catch (const std::exception&) {
        throw std::invalid_argument("bad size '" + s + "': use bytes or a K, M or G suffix (64M)");
    }
    const std::string suffix = s.substr(used);
    if (suffix == "K") value <<= 10;
    else if (suffix == "M") value <<= 20;
    else if (suffix == "G") value <<= 30;
    else if (!suffix.empty()) throw std::invalid_argument("bad size '" + s + "': use bytes or a K, M or G suffix");
    return static_cast<std::size_t>(value);
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) throw std::invalid_argument(std::string(arg) + " needs a value");
            return argv[++i];
        };
        if (arg == "--ranks") o.ranks = std::stoi(value());
        else if (arg == "--reps") o.reps = std::stoi(value());
        else if (arg == "--rounds") o.rounds = std::stoi(value());
        else if (arg == "--anchor-bytes") o.anchor_bytes = parse_size(value());
        else if (arg == "--sizes") {
            o.sizes.clear();
            std::string list = value();
            for (std::size_t at = 0; at <= list.size();) {
                const auto comma = std::min(list.find(',', at), list.size());
                o.sizes.push_back(parse_size(std::string_view(list).substr(at, comma - at)));
                at = comma + 1;
            }
        } else
            throw std::invalid_argument("unknown argument " + std::string(arg) +
                                        " (--ranks N --sizes 1M,64M --reps R --rounds K --anchor-bytes 64M)");
    }
    if (o.ranks < 2 || o.ranks > 64 || o.reps < 1 || o.rounds < 1 || o.sizes.empty() || o.anchor_bytes == 0)
        throw std::invalid_argument("--ranks 2..64, --reps and --rounds at least 1, --sizes not empty");
    for (auto s : o.sizes)
        if (s < 4 || s % 4 != 0) throw std::invalid_argument("sizes must be whole float32 counts");
    return o;
}

void sh(const std::string& command) {
    if (std::system((command + " >/dev/null 2>&1").c_str()) != 0)
        throw std::runtime_error("failed: " + command + " (is the openssl command installed? scripts/deps.sh)");
}

struct Pki {
    std::filesystem::path dir;
    Pki() {
        char pattern[] = "/tmp/cohort-bench-tls-XXXXXX";
        if (!::mkdtemp(pattern)) throw std::runtime_error("mkdtemp failed");
        dir = pattern;
        const std::string d = dir.string() + "/";
        const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
        sh("openssl req -x509" + ec + " -days 1 -subj /CN=bench-ca -keyout " + d + "ca.key -out " + d + "ca.pem");
        sh("openssl req" + ec + " -subj /CN=bench-rank -keyout " + d + "rank.key -out " + d + "rank.csr");
        sh("openssl x509 -req -days 1 -in " + d + "rank.csr -CA " + d + "ca.pem -CAkey " + d +
           "ca.key -CAcreateserial -out " + d + "rank.pem");
    }
    ~Pki() {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    }
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Seconds per all-reduce (slowest rank, median over reps) for each size,
// one communicator per rank for the whole round.
std::vector<double> round_of(const Options& o, const Pki* tls, std::string& negotiated) {
    cohort::StoreServer server("127.0.0.1", 0);
    const std::string url = server.url();
    const std::size_t sizes = o.sizes.size();
    // times[size][rep][rank]
    std::vector<std::vector<std::vector<double>>> times(
        sizes, std::vector<std::vector<double>>(o.reps, std::vector<double>(o.ranks, 0)));
    std::vector<std::string> errors(o.ranks);
    std::vector<std::thread> threads;
    for (int rank = 0; rank < o.ranks; ++rank) {
        threads.emplace_back([&, rank] {
            try {
                cohort::CommOptions c;
                c.rank = rank;
                c.size = o.ranks;
                c.store = cohort::open_store(url, cohort::StoreOptions{std::chrono::seconds(30), false});
                c.address = "127.0.0.1";
                c.shm_size = 0;
                c.direct_copy = false;
                c.timeout = std::chrono::seconds(120);
                if (tls) {
                    c.tls_ca = (tls->dir / "ca.pem").string();
                    c.tls_cert = (tls->dir / "rank.pem").string();
                    c.tls_key = (tls->dir / "rank.key").string();
                }
                cohort::Communicator comm(c);
                if (rank == 0) {
                    const std::string d = comm.describe();
                    const auto at = d.find("\"tls\":");
                    negotiated = at == std::string::npos ? "?" : d.substr(at + 6, d.find(',', at) - at - 6);
                }
                for (std::size_t s = 0; s < sizes; ++s) {
                    std::vector<float> data(o.sizes[s] / 4, 1.0f + rank);
                    comm.allreduce(std::span<float>(data));  // warm-up
                    for (int r = 0; r < o.reps; ++r) {
                        comm.barrier();
                        const auto start = Clock::now();
                        comm.allreduce(std::span<float>(data));
                        times[s][r][rank] = std::chrono::duration<double>(Clock::now() - start).count();
                    }
                }
                comm.close();
            } catch (const std::exception& e) {
                errors[rank] = e.what();
            }
        });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < o.ranks; ++r)
        if (!errors[r].empty()) throw std::runtime_error("rank " + std::to_string(r) + ": " + errors[r]);
    std::vector<double> result;
    for (std::size_t s = 0; s < sizes; ++s) {
        std::vector<double> slowest;
        for (const auto& rep : times[s]) slowest.push_back(*std::max_element(rep.begin(), rep.end()));
        result.push_back(median(slowest));
    }
    return result;
}

// Bytes per second per direction, two loopback endpoints exchanging at once.
double tcp_anchor(std::size_t bytes) {
    const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof a;
    if (::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listener, 1) != 0 ||
        ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &length) != 0)
        throw std::runtime_error("tcp anchor: cannot listen on loopback");
    const int one = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (::connect(one, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) throw std::runtime_error("tcp anchor: connect");
    const int two = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    ::close(listener);
    const int flag = 1;
    for (int fd : {one, two}) ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &flag, sizeof flag);
    std::vector<char> out(bytes, 'x');
    std::vector<char> in1(bytes), in2(bytes);
    auto send_all = [&](int fd) {
        for (std::size_t done = 0; done < bytes;) {
            const ssize_t n = ::send(fd, out.data() + done, bytes - done, MSG_NOSIGNAL);
            if (n <= 0) throw std::runtime_error("tcp anchor: send failed");
            done += static_cast<std::size_t>(n);
        }
    };
    auto recv_all = [&](int fd, std::vector<char>& in) {
        for (std::size_t done = 0; done < bytes;) {
            const ssize_t n = ::recv(fd, in.data() + done, bytes - done, 0);
            if (n <= 0) throw std::runtime_error("tcp anchor: recv failed");
            done += static_cast<std::size_t>(n);
        }
    };
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
        const auto start = Clock::now();
        std::thread t1([&] { send_all(one); });
        std::thread t2([&] { send_all(two); });
        std::thread t3([&] { recv_all(one, in1); });
        recv_all(two, in2);
        t1.join();
        t2.join();
        t3.join();
        best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
    }
    ::close(one);
    ::close(two);
    return static_cast<double>(bytes) / best;
}

// Bytes per second through AES-256-GCM, encrypt then decrypt, one thread.
double crypto_anchor(std::size_t bytes) {
    std::vector<unsigned char> plain(bytes, 7), sealed(bytes + 16), opened(bytes + 16);
    unsigned char key[32] = {1}, iv[12] = {2}, tag[16];
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
        const auto start = Clock::now();
        EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
        int n = 0, total = 0;
        EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr, key, iv);
        // In records of 16 KiB, as TLS does.
        for (std::size_t at = 0; at < bytes; at += 16384) {
            EVP_EncryptUpdate(ctx, sealed.data() + at, &n, plain.data() + at,
                              static_cast<int>(std::min<std::size_t>(16384, bytes - at)));
            total += n;
        }
        EVP_EncryptFinal_ex(ctx, sealed.data() + total, &n);
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, tag);
        EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr, key, iv);
        total = 0;
        for (std::size_t at = 0; at < bytes; at += 16384) {
            EVP_DecryptUpdate(ctx, opened.data() + at, &n, sealed.data() + at,
                              static_cast<int>(std::min<std::size_t>(16384, bytes - at)));
            total += n;
        }
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, 16, tag);
        const bool ok = EVP_DecryptFinal_ex(ctx, opened.data() + total, &n) == 1;
        EVP_CIPHER_CTX_free(ctx);
        if (!ok || std::memcmp(opened.data(), plain.data(), bytes) != 0)
            throw std::runtime_error("crypto anchor: AES-GCM round trip failed");
        best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
    }
    return static_cast<double>(bytes) / best;  // encrypt + decrypt of each byte
}

std::string size_text(std::size_t bytes) {
    if (bytes >= (std::size_t(1) << 20) && bytes % (std::size_t(1) << 20) == 0)
        return std::to_string(bytes >> 20) + " MiB";
    if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + " KiB";
    return std::to_string(bytes) + " B";
}

}  // namespace

int main(int argc, char** argv) {
    try {
        const Options o = parse(argc, argv);
        const Pki pki;
        std::vector<std::vector<double>> tcp, tls;  // [round][size]
        std::string negotiated, none;
        std::printf("bench_comm_tls: %d ranks on loopback, %d round(s) of TCP then TLS, %d reps each\n", o.ranks,
                    o.rounds, o.reps);
        for (int round = 0; round < o.rounds; ++round) {
            tcp.push_back(round_of(o, nullptr, none));
            tls.push_back(round_of(o, &pki, negotiated));
        }
        const double tcp_rate = tcp_anchor(o.anchor_bytes);
        const double aes_rate = crypto_anchor(o.anchor_bytes);
        std::printf("TLS negotiated: %s\n", negotiated.c_str());
        std::printf("anchor: TCP loopback exchange %.2f GB/s per direction; AES-256-GCM encrypt+decrypt %.2f GB/s "
                    "on one thread\n",
                    tcp_rate / 1e9, aes_rate / 1e9);
        std::printf("\n| size | TCP time | TLS time | TCP busbw | TLS busbw | TLS / TCP time |\n");
        std::printf("| --- | --- | --- | --- | --- | --- |\n");
        const double factor = 2.0 * (o.ranks - 1) / o.ranks;
        for (std::size_t s = 0; s < o.sizes.size(); ++s) {
            std::vector<double> a, b;
            for (int r = 0; r < o.rounds; ++r) {
                a.push_back(tcp[r][s]);
                b.push_back(tls[r][s]);
            }
            const double ta = *std::min_element(a.begin(), a.end());
            const double tb = *std::min_element(b.begin(), b.end());
            const double bytes = static_cast<double>(o.sizes[s]);
            std::printf("| %s | %.2f ms | %.2f ms | %.2f GB/s | %.2f GB/s | %.2fx |\n", size_text(o.sizes[s]).c_str(),
                        ta * 1e3, tb * 1e3, bytes / ta * factor / 1e9, bytes / tb * factor / 1e9, tb / ta);
        }
        std::printf("\nper round (ms, TCP / TLS):");
        for (int r = 0; r < o.rounds; ++r) {
            std::printf(" [");
            for (std::size_t s = 0; s < o.sizes.size(); ++s)
                std::printf("%s%.2f/%.2f", s ? ", " : "", tcp[r][s] * 1e3, tls[r][s] * 1e3);
            std::printf("]");
        }
        std::printf("\n");
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_comm_tls: %s\n", e.what());
        return 1;
    }
}
