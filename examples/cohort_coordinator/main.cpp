// cohort-coordinator: the elastic coordinator on its own, serving jobs over
// HTTP until SIGINT or SIGTERM. A starting point to copy: everything here
// uses the public C++ API.
#include "../common/args.hpp"
#include "../common/files.hpp"

#include <cohort/coordinator.hpp>
#include <cohort/error.hpp>

#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>

namespace {

constexpr const char* kHelp = R"help(usage: cohort-coordinator [--host HOST] [--port PORT] [--token-file FILE]
                          [--data-dir DIR] [--max-connections N]
                          [--max-connections-per-client N]
                          [--idle-timeout SECONDS]
                          [--crowded-idle-timeout SECONDS] [--keep-fd-limit]
                          [--max-members N]
                          [--idempotency-window SECONDS] [--idempotency-keys N]
                          [--tls-cert FILE --tls-key FILE [--tls-client-ca FILE]]
                          [--etcd ENDPOINTS [--etcd-prefix P] [--etcd-cacert FILE]
                           [--etcd-cert FILE --etcd-key FILE] [--etcd-user USER
                           --etcd-password-file FILE] [--leader-ttl SECONDS]
                           [--advertise-url URL] [--replica-id ID]]

Serves the elastic coordinator (docs/coordinator.md): training jobs'
rendezvous, heartbeats, key-value store and dataset shards, over HTTP/1.1 +
JSON, until interrupted (SIGINT or SIGTERM). Prints its URL on the first line.

options:
      --host HOST        the address to listen on (default 127.0.0.1; 0.0.0.0
                         for every interface)
  -p, --port PORT        the port (default 0: any free port)
      --token-file FILE  require "Authorization: Bearer <token>" with the
                         token in FILE (surrounding whitespace ignored);
                         default: $COHORT_COORDINATOR_TOKEN, or none
      --data-dir DIR     keep the state in DIR (a journal and snapshots):
                         started again on the same DIR after a crash or
                         kill -9, it carries on with nothing answered lost;
                         one coordinator per DIR (default: state in memory
                         only)
      --max-connections N
                         connections open at once; more are refused, and
                         counted in /metrics (default: the open-file limit
                         less 128, at most 65536)
      --max-connections-per-client N
                         connections open at once from one address
                         (default: a quarter of --max-connections)
      --idle-timeout SECONDS
                         close a connection that waits this long for a
                         request (default 60)
      --crowded-idle-timeout SECONDS
                         the same once more than four fifths of
                         --max-connections are open (default 2)
      --idempotency-window SECONDS
                         answer a retry that carries the Idempotency-Key of
                         a request answered this recently with that answer,
                         instead of applying it again (default 600)
      --idempotency-keys N
                         the most keys kept for that (default 10000)
      --keep-fd-limit    do not raise the soft open-file limit to the hard
                         limit at start
      --max-members N    members held across all jobs (failed and departed
                         ones too, until their job is deleted); a join past
                         it gets 503 (default 100000; 0: no cap)

HTTPS (docs/coordinator.md, "HTTPS"):
      --tls-cert FILE, --tls-key FILE
                         serve HTTPS only, with this certificate (PEM, its
                         chain after it) and private key (PEM); the URL
                         printed is https://
      --tls-client-ca FILE
                         mutual TLS: every client must present a
                         certificate signed by the CA in FILE (PEM)

high availability (docs/coordinator.md, "High availability"): run 2 or 3
replicas with the same --etcd and --etcd-prefix; one is elected leader, the
others follow it and answer clients with 503 and the leader's URL.
      --etcd ENDPOINTS   keep the state in etcd at ENDPOINTS
                         ("host:2379,https://host2:2379"), not in --data-dir
      --etcd-prefix P    the key prefix (default /cohort/coordinator): one
                         coordinator per prefix
      --etcd-cacert FILE, --etcd-cert FILE, --etcd-key FILE
                         TLS to etcd: the CA that signed its certificates,
                         and this client's certificate and key
      --etcd-user USER, --etcd-password-file FILE
                         etcd's own authentication
      --leader-ttl SECONDS
                         the leader's etcd lease: a dead leader is replaced
                         about this long after its last refresh (default 2,
                         whole seconds)
      --advertise-url URL
                         where clients reach this replica (default: the URL
                         printed on the first line)
      --replica-id ID    this replica's name in the leader key (default
                         HOSTNAME:PID)
  -h, --help             this help
      --version          print the version

Exit status: 0 after a signal, 1 when the server cannot start (the address
is taken, DIR is in use or its journal is damaged, etcd settings cannot
work), 2 for bad usage.
)help";

[[noreturn]] void usage(std::string message) {
    throw cohort::Error(cohort::Errc::invalid_argument, std::move(message));
}

// A whole number, or nothing when `text` is not one.
std::optional<std::size_t> whole_number(std::string_view text) {
    std::size_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return value;
}

std::size_t count_or_zero(std::string_view flag, std::string_view text) {
    const auto value = whole_number(text);
    if (!value) usage(fmt::format("{}: expected a whole number (0: no cap), got '{}'", flag, text));
    return *value;
}

std::size_t positive_count(std::string_view flag, std::string_view text) {
    const auto value = whole_number(text);
    if (!value || *value == 0) {
        usage(fmt::format("{}: expected a whole number of connections, at least 1, got '{}'", flag, text));
    }
    return *value;
}

// Seconds, as a number with a fraction allowed, to milliseconds (at least 1).
std::chrono::milliseconds positive_seconds(std::string_view flag, std::string_view text) {
    double value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || !(value >= 0.001) || value > 86400.0 * 365) {
        usage(fmt::format("{}: expected seconds, from 0.001 to a year, got '{}'", flag, text));
    }
    return std::chrono::milliseconds(static_cast<int64_t>(value * 1000 + 0.5));
}

std::string read_token(std::string_view flag, const std::string& path) {
    std::string token;
    if (const int error = cohort_examples::read_file(path, token); error != 0)
        usage(fmt::format("{}: cannot read '{}': {}", flag, path, std::strerror(error)));
    const auto first = token.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) usage(fmt::format("{}: '{}' is empty", flag, path));
    token = token.substr(first, token.find_last_not_of(" \t\r\n") - first + 1);
    return token;
}

// Empty after printing help or the version.
std::optional<cohort::CoordinatorOptions> parse_options(int argc, char** argv) {
    cohort::CoordinatorOptions options;
    bool idle_given = false, crowded_given = false;
    cohort_examples::Args args(argc, argv);
    std::string_view arg;
    while (args.next(arg)) {
        if (cohort_examples::Args::help_or_version(arg, kHelp, "cohort-coordinator")) {
            return std::nullopt;
        } else if (arg == "--host") {
            options.host = args.value();
        } else if (arg == "-p" || arg == "--port") {
            const std::string_view text = args.value();
            uint16_t port = 0;
            const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
            if (ec != std::errc() || end != text.data() + text.size()) {
                usage(fmt::format("{}: expected a port number 0..65535, got '{}'", arg, text));
            }
            options.port = port;
        } else if (arg == "--token-file") {
            options.token = read_token(arg, std::string(args.value()));
        } else if (arg == "--data-dir") {
            options.data_dir = std::string(args.value());
        } else if (arg == "--max-connections") {
            options.max_connections = positive_count(arg, args.value());
        } else if (arg == "--max-connections-per-client") {
            options.max_connections_per_client = positive_count(arg, args.value());
        } else if (arg == "--idle-timeout") {
            options.idle_timeout = positive_seconds(arg, args.value());
            idle_given = true;
        } else if (arg == "--crowded-idle-timeout") {
            options.crowded_idle_timeout = positive_seconds(arg, args.value());
            crowded_given = true;
        } else if (arg == "--max-members") {
            options.max_members = count_or_zero(arg, args.value());
        } else if (arg == "--idempotency-window") {
            options.idempotency_window = positive_seconds(arg, args.value());
        } else if (arg == "--idempotency-keys") {
            options.idempotency_keys = positive_count(arg, args.value());
        } else if (arg == "--etcd") {
            options.etcd = args.value();
        } else if (arg == "--etcd-prefix") {
            options.etcd_prefix = args.value();
        } else if (arg == "--tls-cert") {
            options.tls_cert_file = args.value();
        } else if (arg == "--tls-key") {
            options.tls_key_file = args.value();
        } else if (arg == "--tls-client-ca") {
            options.tls_client_ca_file = args.value();
        } else if (arg == "--etcd-cacert") {
            options.etcd_ca_file = args.value();
        } else if (arg == "--etcd-cert") {
            options.etcd_cert_file = args.value();
        } else if (arg == "--etcd-key") {
            options.etcd_key_file = args.value();
        } else if (arg == "--etcd-user") {
            options.etcd_user = args.value();
        } else if (arg == "--etcd-password-file") {
            options.etcd_password = read_token(arg, std::string(args.value()));
        } else if (arg == "--leader-ttl") {
            const auto ttl = whole_number(args.value());
            if (!ttl || *ttl == 0 || *ttl > 3600) usage(fmt::format("{}: expected whole seconds, 1 to 3600", arg));
            options.leader_ttl = std::chrono::seconds(*ttl);
        } else if (arg == "--advertise-url") {
            options.advertise_url = args.value();
            if (!options.advertise_url.starts_with("http://") && !options.advertise_url.starts_with("https://")) {
                usage(fmt::format("{}: expected http://HOST:PORT, got '{}'", arg, options.advertise_url));
            }
        } else if (arg == "--replica-id") {
            options.replica_id = args.value();
        } else if (arg == "--keep-fd-limit") {
            options.raise_fd_limit = false;
        } else if (arg.starts_with("-")) {
            usage(fmt::format("unknown option '{}' (see --help)", args.current()));
        } else {
            usage(fmt::format("unexpected argument '{}' (cohort-coordinator takes options only; see --help)", arg));
        }
    }
    if (options.etcd.empty() && (options.etcd_prefix != cohort::CoordinatorOptions().etcd_prefix ||
                                 !options.advertise_url.empty() || !options.replica_id.empty())) {
        usage("--etcd-prefix, --advertise-url and --replica-id go with --etcd");
    }
    if (!options.etcd.empty() && !options.data_dir.empty()) {
        usage("--etcd and --data-dir: give one; with --etcd the state lives in etcd");
    }
    if (options.crowded_idle_timeout > options.idle_timeout) {
        // A short --idle-timeout alone brings the crowded one down with it.
        if (crowded_given || !idle_given) {
            usage(fmt::format("--crowded-idle-timeout ({} s) must not exceed --idle-timeout ({} s)",
                              options.crowded_idle_timeout.count() / 1000.0, options.idle_timeout.count() / 1000.0));
        }
        options.crowded_idle_timeout = options.idle_timeout;
    }
    return options;
}

}  // namespace

int main(int argc, char** argv) {
    std::optional<cohort::CoordinatorOptions> options;
    try {
        options = parse_options(argc, argv);
    } catch (const cohort::Error& e) {
        fmt::print(stderr, "cohort-coordinator: {}\n", e.what());
        return 2;
    }
    if (!options) return 0;

    // Block the signals before the server's thread starts, so only this
    // thread receives them, then wait for one.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    try {
        cohort::Coordinator coordinator(std::move(*options));
        fmt::print("{}\n", coordinator.url());
        std::fflush(stdout);
        int signal = 0;
        sigwait(&signals, &signal);
        fmt::print(stderr, "cohort-coordinator: {}, stopping\n", signal == SIGINT ? "interrupted" : "terminated");
        coordinator.stop();
    } catch (const cohort::Error& e) {
        fmt::print(stderr, "cohort-coordinator: {}\n", e.what());
        return 1;
    }
    return 0;
}
