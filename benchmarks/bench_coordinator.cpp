// Question: does one coordinator keep up with a 10,000-member job on one
// machine? It hosts cohort::Coordinator in this process (its own io thread)
// and simulates the members with asynchronous Beast clients multiplexed over
// a pool of keep-alive connections on one client thread:
//   1. all join a job with min = max = N; time from the last join's answer
//      until every member has read its rank from GET .../world?peers=false
//      (the rank without the N-entry peer list);
//   2. each member heartbeats once per interval (spread evenly) for S
//      seconds: latency percentiles and the server thread's CPU;
//   3. one member falls silent: time until every survivor has seen the new
//      round (rendezvous: true) in a heartbeat answer.
// Targets (issue 6, section 10): phase 1 within 1 s (last_call excluded),
// heartbeat p99 under 10 ms, detection within failure_timeout + 1 interval.
// With --data-dir DIR the three phases run twice in the same process, first
// with the state in memory, then journaled to a fresh directory under DIR,
// and a last table sets the two side by side (issue 13, section 4: the
// journal must not make heartbeats slower). With --etcd ENDPOINTS they run
// once more with the state in etcd (CoordinatorOptions::etcd, one replica,
// elected before the run starts), and the last table has a third column
// (issue 17: heartbeats with the etcd backend).
//
//   build/benchmarks/bench_coordinator [--members 10000] [--seconds 30]
//       [--interval 1.0] [--failure-timeout 5] [--connections 128]
//       [--data-dir DIR] [--etcd ENDPOINTS]
//
// It exits 1 when the server answers anything unexpected or a phase does
// not finish within its bound.
#include <cohort/coordinator.hpp>

#include "bench_coordinator_client.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace {

using namespace bench;
using std::chrono::duration;

struct Options {
    std::size_t members = 10000;
    double seconds = 30;
    double interval = 1.0;
    double failure_timeout = 5;
    double last_call = 0.5;
    std::size_t connections = 128;
    std::string data_dir;  // empty: only the in-memory run
    std::string etcd;      // not empty: a run with the state in etcd too
};

// Which store a run keeps the state in.
struct Backend {
    std::string data_dir;
    std::string etcd, etcd_prefix;
    std::string name() const {
        return !etcd.empty() ? "etcd " + etcd + etcd_prefix : data_dir.empty() ? "no data dir" : "data dir " + data_dir;
    }
};

double seconds_between(Clock::time_point a, Clock::time_point b) {
    return duration<double>(b - a).count();
}

// CPU seconds (user + system) of one thread of this process.
double thread_cpu(long tid) {
    std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto paren = text.rfind(')');
    if (paren == std::string::npos) return -1;
    std::istringstream fields(text.substr(paren + 2));
    std::string field;
    double ticks = 0;
    // After the command come field 3 (state) onwards; utime is 14, stime 15.
    for (int i = 3; i <= 15 && fields >> field; ++i)
        if (i >= 14) ticks += std::stod(field);
    return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double process_cpu() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    auto tv = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
    return tv(usage.ru_utime) + tv(usage.ru_stime);
}

std::set<long> threads() {
    std::set<long> out;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task"))
        out.insert(std::stol(entry.path().filename().string()));
    return out;
}

std::string load_average() {
    std::ifstream in("/proc/loadavg");
    std::string one, five, fifteen;
    in >> one >> five >> fifteen;
    return one + " " + five + " " + fifteen;
}

std::string first_line(const std::string& path, const std::string& prefix) {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);)
        if (line.rfind(prefix, 0) == 0) return line.substr(line.find_first_not_of(" \t:", prefix.size()));
    return "?";
}

struct Member {
    std::string id;
    std::size_t connection = 0;
    uint64_t generation = 0;
    long rank = -1;
    bool heartbeating = false;  // from its world's answer until it is silenced
    bool in_flight = false;
    bool silenced = false;
    bool saw_round = false;
    Clock::time_point last_sent;
};

struct Percentiles {
    std::size_t count = 0;
    double p50 = 0, p90 = 0, p99 = 0, max = 0;
};

Percentiles percentiles(std::vector<double> v) {
    Percentiles p;
    p.count = v.size();
    if (v.empty()) return p;
    std::sort(v.begin(), v.end());
    auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size()))) - 1)]; };
    p.p50 = at(0.50), p.p90 = at(0.90), p.p99 = at(0.99), p.max = v.back();
    return p;
}

enum class Phase { forming, steady, failure, done };

class ScaleRun {
public:
    ScaleRun(asio::io_context& io, Options options, const std::string& token, uint16_t port)
        : io_(io), o_(options), auth_("Bearer " + token), endpoint_(asio::ip::make_address("127.0.0.1"), port) {}

    asio::awaitable<void> run();
    int exit_code() const { return failed() ? 1 : 0; }

    // Figures, read after run().
    double joins_s = 0, rank_s = 0, world_mb = 0;
    Percentiles forming_hb, steady_hb;
    std::size_t late = 0, steady_late = 0;
    double steady_wall = 0, server_cpu = -1, client_cpu = 0, process_cpu_s = 0;
    double detection_s = -1, first_seen_s = -1;
    int phases_done = 0;
    std::size_t survivors_seen = 0;
    long server_tid = -1;
    long journal_tid = -1;  // the coordinator's journal writer, when it has one
    double journal_cpu = -1;

private:
    bool failed() const { return errors_ > 0; }
    void error(const std::string& what) {
        if (phase_ == Phase::done) return;  // requests cut short by the closing connections
        if (errors_++ < 5) std::fprintf(stderr, "bench_coordinator: %s\n", what.c_str());
    }
    bool check(const Reply& r, std::string_view what) {
        if (r.status >= 200 && r.status < 300) return true;
        error(std::string(what) + ": " +
              (r.status == 0 ? r.error : std::to_string(r.status) + " " + r.body.substr(0, 300)));
        return false;
    }
    void send(std::size_t member, http::verb method, std::string target, std::string body,
              std::function<void(Reply&)> done, bool urgent = false) {
        connections_[members_[member].connection]->send({method, std::move(target), std::move(body), std::move(done)},
                                                        urgent);
    }
    std::string job_path(std::string_view action) const { return "/v1/jobs/scale/" + std::string(action); }
    // Waits until done() or failure; false (with an error) after limit_s.
    asio::awaitable<bool> until(std::function<bool()> done, double limit_s, std::string what);
    asio::awaitable<void> pause(double seconds);
    asio::awaitable<void> heartbeats();
    void heartbeat(std::size_t i);
    void fetch_world(std::size_t i);

    asio::io_context& io_;
    Options o_;
    std::string auth_;
    tcp::endpoint endpoint_;
    std::vector<std::shared_ptr<Connection>> connections_;
    std::vector<Member> members_;
    std::size_t errors_ = 0;
    Phase phase_ = Phase::forming;
    std::vector<double> forming_ms_, steady_ms_;
    std::size_t ranked_ = 0, seen_ = 0;
    Clock::time_point last_ranked_, first_seen_, last_seen_;
};

asio::awaitable<bool> ScaleRun::until(std::function<bool()> done, double limit_s, std::string what) {
    const auto deadline = Clock::now() + duration<double>(limit_s);
    asio::steady_timer timer(io_);
    while (!done()) {
        if (failed()) co_return false;
        if (Clock::now() > deadline) {
            error(what + ": not done within " + std::to_string(limit_s) + " s");
            co_return false;
        }
        timer.expires_after(std::chrono::milliseconds(1));
        co_await timer.async_wait(asio::use_awaitable);
    }
    co_return !failed();
}

asio::awaitable<void> ScaleRun::pause(double seconds) {
    const auto end = Clock::now() + duration<double>(seconds);
    asio::steady_timer timer(io_);
    while (Clock::now() < end && !failed()) {
        timer.expires_after(std::chrono::milliseconds(10));
        co_await timer.async_wait(asio::use_awaitable);
    }
}

// Member i's heartbeat falls at i/N of each interval, so the load is even.
asio::awaitable<void> ScaleRun::heartbeats() {
    const auto interval = std::chrono::duration_cast<Clock::duration>(duration<double>(o_.interval));
    const std::size_t n = members_.size();
    auto cycle = Clock::now();
    std::size_t next = 0;
    asio::steady_timer timer(io_);
    while (phase_ != Phase::done && !failed()) {
        const auto now = Clock::now();
        while (cycle + interval * static_cast<long>(next) / static_cast<long>(n) <= now) {
            heartbeat(next);
            if (++next == n) next = 0, cycle += interval;
        }
        timer.expires_after(std::chrono::milliseconds(1));
        co_await timer.async_wait(asio::use_awaitable);
    }
}

void ScaleRun::heartbeat(std::size_t i) {
    Member& m = members_[i];
    if (!m.heartbeating || m.silenced) return;
    if (m.in_flight) {  // the last one is still unanswered: the client or server lags
        ++late;
        return;
    }
    m.in_flight = true;
    const std::string body = "{\"member\":\"" + m.id + "\",\"generation\":" + std::to_string(m.generation) + "}";
    send(i, http::verb::post, job_path("heartbeat"), body, [this, i](Reply& r) {
        Member& sender = members_[i];
        sender.in_flight = false;
        sender.last_sent = r.sent;
        if (!check(r, "heartbeat of " + sender.id)) return;
        const double ms = seconds_between(r.sent, r.received) * 1e3;
        const bool round = json_field(r.body, "rendezvous") == "true";
        if (phase_ == Phase::forming) forming_ms_.push_back(ms);
        if (phase_ == Phase::steady) steady_ms_.push_back(ms);
        if (phase_ != Phase::failure && round) error("heartbeat of " + sender.id + ": a round opened: " + r.body);
        if (phase_ == Phase::failure && round && !sender.saw_round) {
            sender.saw_round = true;
            ++seen_;
            if (seen_ == 1) first_seen_ = r.received;
            last_seen_ = std::max(last_seen_, r.received);
        }
    }, true);
}

void ScaleRun::fetch_world(std::size_t i) {
    send(i, http::verb::get, job_path("world?member=" + members_[i].id + "&peers=false"), {}, [this, i](Reply& r) {
        if (!check(r, "world of " + members_[i].id)) return;
        world_mb += static_cast<double>(r.body.size()) / 1e6;
        if (json_field(r.body, "state") != "\"active\"") {  // the round has not closed yet: ask again
            auto timer = std::make_shared<asio::steady_timer>(io_, std::chrono::milliseconds(10));
            timer->async_wait([this, i, timer](beast::error_code) { fetch_world(i); });
            return;
        }
        Member& m = members_[i];
        const auto gen = json_field(r.body, "generation");
        const auto rank = json_field(r.body, "rank");
        std::from_chars(gen.data(), gen.data() + gen.size(), m.generation);
        std::from_chars(rank.data(), rank.data() + rank.size(), m.rank);
        if (m.rank < 0) error("world of " + m.id + ": no rank in " + r.body.substr(0, 200));
        ++ranked_;
        last_ranked_ = std::max(last_ranked_, r.received);
    });
}

asio::awaitable<void> ScaleRun::run() {
    const std::size_t n = o_.members;
    std::size_t connected = 0;
    for (std::size_t c = 0; c < o_.connections; ++c) {
        connections_.push_back(std::make_shared<Connection>(io_, "127.0.0.1", auth_, std::chrono::seconds(10)));
        connections_.back()->connect(endpoint_, [&](const std::string& e) {
            if (!e.empty()) error("connection: " + e);
            ++connected;
        });
    }
    members_.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
        char id[32];
        std::snprintf(id, sizeof id, "m%05zu", i);
        members_[i].id = id;
        members_[i].connection = i % o_.connections;
    }
    if (!co_await until([&] { return connected == o_.connections; }, 10, "connecting")) co_return;

    // Phase 1: the job, every join, then every member's world.
    bool created = false;
    std::ostringstream job;
    job << R"({"name":"scale","settings":{"min_nodes":)" << n << R"(,"max_nodes":)" << n << R"(,"last_call":)"
        << o_.last_call << R"(,"heartbeat_interval":)" << o_.interval << R"(,"failure_timeout":)"
        << o_.failure_timeout << "}}";
    connections_[0]->send({http::verb::post, "/v1/jobs", job.str(), [&](Reply& r) {
                               created = check(r, "create job");
                           }});
    if (!co_await until([&] { return created; }, 10, "creating the job")) co_return;

    std::size_t joined = 0;
    uint64_t announced = 0;  // the generation the last join's answer names
    Clock::time_point last_join;
    const auto join_start = Clock::now();
    for (std::size_t i = 0; i < n; ++i)
        send(i, http::verb::post, job_path("join"), "{\"id\":\"" + members_[i].id + "\"}", [&, i](Reply& r) {
            if (!check(r, "join of " + members_[i].id)) return;
            ++joined;
            const auto gen = json_field(r.body, "generation");
            if (json_field(r.body, "state") == "\"active\"")
                std::from_chars(gen.data(), gen.data() + gen.size(), announced);
            last_join = std::max(last_join, r.received);
        });
    if (!co_await until([&] { return joined == n; }, std::max(60.0, o_.failure_timeout), "joining")) co_return;
    joins_s = seconds_between(join_start, last_join);
    if (joins_s > o_.failure_timeout)
        error("the joins took " + std::to_string(joins_s) + " s, longer than failure_timeout: early joiners fail");

    if (announced == 0) error("no join was answered 'active': the round did not close at the last join");
    // A real member learns its generation from its world; here every member
    // heartbeats from the last join on with the generation that join's answer
    // named, so that one whose world is slow to come is not declared failed.
    for (auto& m : members_) m.generation = announced, m.heartbeating = true;
    asio::co_spawn(io_, heartbeats(), asio::detached);
    for (std::size_t i = 0; i < n; ++i) fetch_world(i);
    if (!co_await until([&] { return ranked_ == n; }, 120, "reading every member's world")) co_return;
    rank_s = seconds_between(last_join, last_ranked_);
    forming_hb = percentiles(forming_ms_);
    phases_done = 1;

    // Phase 2: steady heartbeats.
    const long client_tid = syscall(SYS_gettid);
    phase_ = Phase::steady;
    const std::size_t late_before = late;
    const double server0 = server_tid > 0 ? thread_cpu(server_tid) : 0, client0 = thread_cpu(client_tid),
                 process0 = process_cpu(), journal0 = journal_tid > 0 ? thread_cpu(journal_tid) : 0;
    const auto steady_start = Clock::now();
    co_await pause(o_.seconds);
    if (failed()) co_return;
    steady_wall = seconds_between(steady_start, Clock::now());
    if (server_tid > 0) server_cpu = thread_cpu(server_tid) - server0;
    if (journal_tid > 0) journal_cpu = thread_cpu(journal_tid) - journal0;
    client_cpu = thread_cpu(client_tid) - client0;
    process_cpu_s = process_cpu() - process0;
    steady_late = late - late_before;
    steady_hb = percentiles(steady_ms_);
    phases_done = 2;

    // Phase 3: one member falls silent.
    Member& victim = members_[n / 2];
    victim.silenced = true;
    if (n < 2 || !co_await until([&] { return !victim.in_flight; }, 10, "the silenced member's last heartbeat"))
        co_return;
    phase_ = Phase::failure;
    const double bound = o_.failure_timeout + 3 * o_.interval + 10;
    const bool all_seen = co_await until([&] { return seen_ == n - 1; }, bound, "failure detection");
    survivors_seen = seen_;
    if (seen_ > 0) first_seen_s = seconds_between(victim.last_sent, first_seen_);
    if (all_seen) detection_s = seconds_between(victim.last_sent, last_seen_);
    phases_done = 3;
    phase_ = Phase::done;
    for (auto& c : connections_) c->close();
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        if (flag == "--help" || flag == "-h") {
            std::printf(
                "usage: bench_coordinator [--members N] [--seconds S] [--interval I] "
                "[--failure-timeout F] [--last-call L] [--connections C] [--data-dir DIR] [--etcd ENDPOINTS]\n");
            std::exit(0);
        }
        if (i + 1 >= argc) throw std::runtime_error(flag + " needs a value; see --help");
        const std::string value = argv[++i];
        if (flag == "--data-dir") {
            o.data_dir = value;
            continue;
        }
        if (flag == "--etcd") {
            o.etcd = value;
            continue;
        }
        std::size_t used = 0;
        double v = 0;
        try {
            v = std::stod(value, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used != value.size() || !(v > 0)) throw std::runtime_error(flag + ": '" + value + "' is not a positive number");
        if (flag == "--members") o.members = static_cast<std::size_t>(v);
        else if (flag == "--seconds") o.seconds = v;
        else if (flag == "--interval") o.interval = v;
        else if (flag == "--failure-timeout") o.failure_timeout = v;
        else if (flag == "--last-call") o.last_call = v;
        else if (flag == "--connections") o.connections = static_cast<std::size_t>(v);
        else throw std::runtime_error("unknown flag '" + flag + "'; see --help");
    }
    if (o.members < 2) throw std::runtime_error("--members must be at least 2");
    if (o.failure_timeout <= o.interval) throw std::runtime_error("--failure-timeout must exceed --interval");
    o.connections = std::min(o.connections, o.members);
    return o;
}

const char* met(bool yes) {
    return yes ? "yes" : "**no**";
}

void rows(const Options& o, const ScaleRun& r, const Backend& backend, const std::string& load_before,
          const std::string& load_after) {
    std::printf("\nmachine: %ld cores, %s; load average before %s, after %s\n", sysconf(_SC_NPROCESSORS_ONLN),
                first_line("/proc/cpuinfo", "model name").c_str(), load_before.c_str(), load_after.c_str());
    std::printf(
        "members %zu, connections %zu, interval %.2f s, failure_timeout %.1f s, last_call %.2f s, "
        "steady phase %.0f s, tick 100 ms, %s\n\n",
        o.members, o.connections, o.interval, o.failure_timeout, o.last_call, o.seconds, backend.name().c_str());
    const auto& h = r.steady_hb;
    std::printf("| what | measured | target | met |\n|---|---:|---:|---|\n");
    if (r.phases_done < 1) return;
    std::printf("| %zu joins (last one closes the round) | %.3f s (%.0f joins/s) | | |\n", o.members, r.joins_s,
                static_cast<double>(o.members) / r.joins_s);
    std::printf("| last join's answer -> all %zu members read their rank (GET world?peers=false, %.1f MB) | %.3f s | <= 1 s | %s |\n",
                o.members, r.world_mb, r.rank_s, met(r.rank_s <= 1.0));
    std::printf("| heartbeats meanwhile | %zu, p50 %.2f ms, p99 %.2f ms, max %.1f ms | | |\n", r.forming_hb.count,
                r.forming_hb.p50, r.forming_hb.p99, r.forming_hb.max);
    if (r.phases_done < 2) return;
    std::printf("| steady heartbeats answered (expected %.0f) | %zu | | |\n",
                static_cast<double>(o.members) * o.seconds / o.interval, h.count);
    std::printf("| heartbeat latency p50 / p90 | %.2f / %.2f ms | | |\n", h.p50, h.p90);
    std::printf("| heartbeat latency p99 | %.2f ms | < 10 ms | %s |\n", h.p99, met(h.p99 < 10));
    std::printf("| heartbeat latency max | %.1f ms | | |\n", h.max);
    std::printf("| heartbeats skipped (previous one unanswered) | %zu | 0 | %s |\n", r.steady_late,
                met(r.steady_late == 0));
    if (r.server_cpu >= 0)
        std::printf("| coordinator io thread CPU (tid %ld, /proc/self/task) | %.2f s in %.1f s = %.0f%% of a core | | |\n",
                    r.server_tid, r.server_cpu, r.steady_wall, 100 * r.server_cpu / r.steady_wall);
    else
        std::printf("| process CPU minus the client thread's (server tid not found) | %.2f s in %.1f s = %.0f%% | | |\n",
                    r.process_cpu_s - r.client_cpu, r.steady_wall,
                    100 * (r.process_cpu_s - r.client_cpu) / r.steady_wall);
    if (r.journal_cpu >= 0)
        std::printf("| coordinator journal thread CPU (tid %ld) | %.2f s = %.0f%% of a core | | |\n", r.journal_tid,
                    r.journal_cpu, 100 * r.journal_cpu / r.steady_wall);
    std::printf("| client (load generator) thread CPU | %.2f s = %.0f%% of a core | | |\n", r.client_cpu,
                100 * r.client_cpu / r.steady_wall);
    const double target = o.failure_timeout + o.interval;
    if (r.phases_done < 3) return;
    if (r.first_seen_s >= 0)
        std::printf("| last heartbeat of the silenced member -> the first survivor saw the new round | %.3f s | | |\n",
                    r.first_seen_s);
    if (r.detection_s >= 0)
        std::printf("| last heartbeat of the silenced member -> all %zu survivors saw the new round | %.3f s | <= %.1f s | %s |\n",
                    o.members - 1, r.detection_s, target, met(r.detection_s <= target));
    else
        std::printf("| survivors that saw the new round | %zu of %zu | all within %.1f s | **no** |\n",
                    r.survivors_seen, o.members - 1, target);
}

// The anchors the issue names, as published; they are not run here.
void report(const Options& o, const ScaleRun& r, const Backend& backend, const std::string& load_before,
            const std::string& load_after) {
    rows(o, r, backend, load_before, load_after);
    std::printf("| reference (not run): DLRover | a dead peer noticed after its 600 s no-heartbeat window | | |\n");
    std::printf("| reference (not run): torchelastic c10d rendezvous | keep-alive every 5 s, dead after 3 missed (15 s); last_call 30 s | | |\n");
}

std::string thread_name(long tid) {
    std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/comm");
    std::string name;
    std::getline(in, name);
    return name;
}

// What the side-by-side table compares.
struct Summary {
    bool ok = false;
    Percentiles hb;
    std::size_t late = 0;
    double server_cpu = -1, journal_cpu = -1, wall = 0;
};

// GET /v1/replica until this one replica says it leads (with etcd, the
// election comes first); false after 10 s.
bool wait_until_leading(uint16_t port) {
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (Clock::now() < deadline) {
        try {
            asio::io_context io;
            beast::tcp_stream stream(io);
            stream.expires_after(std::chrono::seconds(2));
            stream.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
            http::request<http::string_body> request(http::verb::get, "/v1/replica", 11);
            request.set(http::field::host, "127.0.0.1");
            http::write(stream, request);
            beast::flat_buffer buffer;
            http::response<http::string_body> response;
            http::read(stream, buffer, response);
            if (response.body().find("\"role\":\"leader\"") != std::string::npos) return true;
        } catch (const std::exception&) {
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
}

// One whole run (three phases) against a fresh coordinator keeping its
// state as `backend` says; prints its table.
Summary run_once(const Options& o, const Backend& backend) {
    const std::string load_before = load_average();
    cohort::CoordinatorOptions server_options;
    server_options.token = "bench-coordinator-token";
    server_options.body_limit = 1024 * 1024;
    server_options.data_dir = backend.data_dir;
    server_options.etcd = backend.etcd;
    if (!backend.etcd_prefix.empty()) server_options.etcd_prefix = backend.etcd_prefix;
    const auto before = threads();
    cohort::Coordinator coordinator(server_options);
    if (!backend.etcd.empty() && !wait_until_leading(coordinator.port())) {
        throw std::runtime_error("the etcd-backed coordinator was not elected within 10 s");
    }
    std::set<long> started;
    for (long t : threads())
        if (!before.count(t)) started.insert(t);

    asio::io_context io(1);
    ScaleRun run(io, o, server_options.token, coordinator.port());
    // The io thread, and perhaps a journal writer (cohort-journal, or
    // cohort-etcd-log with etcd); the etcd replica's own thread is neither.
    std::vector<long> io_threads;
    for (long t : started) {
        const std::string name = thread_name(t);
        if (name == "cohort-journal" || name == "cohort-etcd-log")
            run.journal_tid = t;
        else if (name != "cohort-replica")
            io_threads.push_back(t);
    }
    if (io_threads.size() == 1) run.server_tid = io_threads.front();
    std::exception_ptr failure;
    asio::co_spawn(io, run.run(), [&](std::exception_ptr e) {
        failure = e;
        io.stop();
    });
    io.run();
    if (failure) std::rethrow_exception(failure);
    coordinator.stop();
    report(o, run, backend, load_before, load_average());
    if (run.exit_code() != 0) std::fprintf(stderr, "bench_coordinator: the run failed (errors above)\n");
    Summary out;
    out.ok = run.exit_code() == 0 && run.phases_done >= 2;
    out.hb = run.steady_hb;
    out.late = run.steady_late;
    out.server_cpu = run.server_cpu;
    out.journal_cpu = run.journal_cpu;
    out.wall = run.steady_wall;
    return out;
}

// The runs side by side; the first (in memory) is the anchor.
void compare(const std::vector<std::pair<std::string, Summary>>& runs) {
    std::printf("\nsteady heartbeats, the same process: ");
    for (std::size_t i = 0; i < runs.size(); ++i) std::printf("%s%s", i ? " vs " : "", runs[i].first.c_str());
    std::printf("\n\n| what |");
    for (const auto& [name, s] : runs) std::printf(" %s |", name.c_str());
    for (std::size_t i = 1; i < runs.size(); ++i) std::printf(" %s / %s |", runs[i].first.c_str(), runs[0].first.c_str());
    std::printf("\n|---|");
    for (std::size_t i = 0; i < 2 * runs.size() - 1; ++i) std::printf("---:|");
    std::printf("\n");
    const auto row = [&](const char* what, double Percentiles::*field) {
        std::printf("| %s |", what);
        for (const auto& [name, s] : runs) std::printf(" %.2f ms |", s.hb.*field);
        const double anchor = runs[0].second.hb.*field;
        for (std::size_t i = 1; i < runs.size(); ++i)
            std::printf(" %.2f |", anchor > 0 ? runs[i].second.hb.*field / anchor : 0.0);
        std::printf("\n");
    };
    row("heartbeat latency p50", &Percentiles::p50);
    row("heartbeat latency p90", &Percentiles::p90);
    row("heartbeat latency p99", &Percentiles::p99);
    row("heartbeat latency max", &Percentiles::max);
    const auto share = [](double cpu, double wall) { return cpu >= 0 && wall > 0 ? 100 * cpu / wall : -1.0; };
    std::printf("| heartbeats answered |");
    for (const auto& [name, s] : runs) std::printf(" %zu |", s.hb.count);
    std::printf("\n| heartbeats skipped |");
    for (const auto& [name, s] : runs) std::printf(" %zu |", s.late);
    std::printf("\n| io thread CPU |");
    for (const auto& [name, s] : runs) std::printf(" %.0f%% |", share(s.server_cpu, s.wall));
    std::printf("\n| journal or etcd writer thread CPU |");
    for (const auto& [name, s] : runs) {
        if (s.journal_cpu >= 0) std::printf(" %.0f%% |", share(s.journal_cpu, s.wall));
        else std::printf(" none |");
    }
    std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
    try {
        const Options o = parse(argc, argv);
        std::vector<std::pair<std::string, Summary>> runs;
        runs.emplace_back("no data dir", run_once(o, Backend{}));
        if (!runs.back().second.ok) return 1;
        bool ok = true;
        if (!o.data_dir.empty()) {
            // A fresh directory each time: the run measures a new job, not
            // the replay of an old one.
            const std::filesystem::path dir =
                std::filesystem::path(o.data_dir) / ("bench-coordinator-" + std::to_string(getpid()));
            std::filesystem::remove_all(dir);
            runs.emplace_back("data dir", run_once(o, Backend{dir.string(), "", ""}));
            ok = ok && runs.back().second.ok;
            std::error_code ignored;
            std::filesystem::remove_all(dir, ignored);
        }
        if (!o.etcd.empty()) {
            // A fresh prefix: a new job, not an old one's log.
            runs.emplace_back("etcd", run_once(o, Backend{"", o.etcd, "/cohort/bench-" + std::to_string(getpid())}));
            ok = ok && runs.back().second.ok;
        }
        if (runs.size() > 1) compare(runs);
        return ok ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_coordinator: %s\n", e.what());
        return 1;
    }
}
