// cohort_k8s_double: the API-server double as a program, for tests that run
// kubectl or cohort-run against it. Prints "listening on URL" once ready
// and serves until SIGTERM or SIGINT.
//
//   cohort_k8s_double [--port N] [--namespace NS] [--run-pods] [--capacity N]
//                     [--bookmark-ms N] [--log-requests]
//                     [--tls-cert FILE --tls-key FILE [--client-ca FILE]]
//   cohort_k8s_double --make-pki DIR
//
// --tls-cert and --tls-key serve HTTPS; --client-ca also requires client
// certificates it signed (mTLS). --make-pki writes a test CA with server and
// client certificates (test_pki.hpp) into DIR and exits.
#include "api_server.hpp"
#include "control_routes.hpp"
#include "pod_runner.hpp"
#include "test_pki.hpp"

#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include <pthread.h>

int main(int argc, char** argv) {
    using namespace cohort::k8s_double;
    ServerOptions options;
    std::string ns = "default";
    bool run_pods = false;
    int capacity = 1 << 20;
    TlsOptions tls;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        const auto value = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::cerr << "cohort_k8s_double: " << arg << " needs a value\n";
                std::exit(2);
            }
            return argv[++i];
        };
        try {
            if (arg == "--port") {
                options.port = static_cast<uint16_t>(std::stoi(value()));
            } else if (arg == "--namespace") {
                ns = value();
            } else if (arg == "--run-pods") {
                run_pods = true;
            } else if (arg == "--capacity") {
                capacity = std::stoi(value());
            } else if (arg == "--bookmark-ms") {
                options.bookmark_interval = std::chrono::milliseconds(std::stoi(value()));
            } else if (arg == "--log-requests") {
                options.log_requests = true;
            } else if (arg == "--tls-cert") {
                tls.cert = value();
            } else if (arg == "--tls-key") {
                tls.key = value();
            } else if (arg == "--client-ca") {
                tls.client_ca = value();
            } else if (arg == "--make-pki") {
                const std::string dir = value();
                try {
                    make_test_pki(dir);
                } catch (const std::exception& e) {
                    std::cerr << "cohort_k8s_double: --make-pki " << dir << ": " << e.what() << "\n";
                    return 1;
                }
                return 0;
            } else {
                std::cerr << "cohort_k8s_double: unknown argument '" << arg
                          << "' (see the usage at the top of tests/support/k8s_double/main.cpp)\n";
                return 2;
            }
        } catch (const std::exception&) {
            std::cerr << "cohort_k8s_double: " << arg << ": not a number\n";
            return 2;
        }
    }
    if (tls.cert.empty() != tls.key.empty() || (!tls.client_ca.empty() && tls.cert.empty())) {
        std::cerr << "cohort_k8s_double: HTTPS needs both --tls-cert and --tls-key (and --client-ca only with them)\n";
        return 2;
    }
    if (!tls.cert.empty()) options.tls = tls;
    // Block the stop signals in every thread; main waits for them.
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, nullptr);
    PodStore store(ns);
    std::unique_ptr<ApiServer> served;
    try {
        served = std::make_unique<ApiServer>(store, options);
    } catch (const std::exception& e) {
        std::cerr << "cohort_k8s_double: " << e.what() << "\n";
        return 1;
    }
    ApiServer& server = *served;
    std::unique_ptr<PodRunner> runner;
    if (run_pods) runner = std::make_unique<PodRunner>(store, capacity);
    server.set_control(control_routes(store, server, runner.get()));
    std::printf("listening on %s\n", server.url().c_str());
    std::fflush(stdout);
    int sig = 0;
    sigwait(&stop, &sig);
    return 0;
}
