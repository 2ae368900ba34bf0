#include "signals.hpp"

#include <atomic>
#include <csignal>

namespace cohort_run::signals {
namespace {

std::atomic<int> received{0};

void on_signal(int sig) { received.store(sig); }

}  // namespace

void install() {
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
    // A worker's closed pipe must not end the launcher.
    signal(SIGPIPE, SIG_IGN);
}

int take() { return received.exchange(0); }

}  // namespace cohort_run::signals
