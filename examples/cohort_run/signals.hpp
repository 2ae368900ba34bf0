// SIGINT and SIGTERM for the launcher: the handler only records the
// signal; the loop takes it and stops the workers, forwarding it to them.
#pragma once

namespace cohort_run::signals {

void install();
// The signal received since the last call, or 0.
int take();

// Thrown from a wait that a signal interrupts.
struct Stop {
    int signal = 0;
};

}  // namespace cohort_run::signals
