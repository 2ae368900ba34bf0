// cohort-train's worker: the elastic loop that keeps every shard counted
// exactly once per epoch through failures and new worlds.
//
// Every rank holds the same TrainState. A step: each rank computes at most
// one shard of the current epoch that the state does not include yet (a
// lease from the coordinator), then the ranks all-reduce the gradient sums
// and all-gather which shards they computed, and every rank adds them alike.
// A step whose collective fails adds nothing anywhere it failed; the ranks
// meet again in the next world, where the state of the rank that applied
// the most steps is broadcast to all, so the set of included shards travels
// with the gradient it stands for. A lease is reported done only after a
// later collective succeeded, when every rank of the world has the state
// that includes its shard: a shard reported done can no longer be lost with
// one rank's state. A shard leased again after its holder died (the lease
// went back to the queue) is found in the state and only reported.
#pragma once

#include "options.hpp"

namespace cohort_train {

// Runs as a member of the job in the environment (COHORT_*) until training
// finished; returns the exit status (0, or 3 when the check failed).
// Throws cohort::Error on a runtime failure.
int run_elastic(const Options& options);

}  // namespace cohort_train
