// A worker's copy of the training state on disk, so that a worker the
// launcher restarts (every worker at once, after a hang) goes on from
// where the job was instead of from nothing.
//
// Why it is needed: the coordinator counts a shard done once some rank's
// state includes it, and it keeps that count when workers die. The state
// itself lives in the workers; while one of them survives, the state sync
// hands it to the others. When all of them restart, only this file still
// has it. It is written after every applied step, before the next
// collective, and a shard is reported done only after that collective, so
// every rank's file includes every shard the coordinator counted.
//
// A file belongs to one job instance (the job's name and creation time on
// the coordinator) and one set of model and data flags: a file left by
// another job, or by other flags, is ignored with a line saying why.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace cohort_train {

// What a checkpoint belongs to.
struct CheckpointOwner {
    std::string job;
    double created_at = 0;  // the job's creation time on the coordinator
    uint64_t fingerprint = 0;  // of the model and data flags
};

class Checkpoint {
public:
    Checkpoint(std::filesystem::path file, CheckpointOwner owner);

    // The saved state when the file exists, belongs to `owner` and holds
    // `size` values; otherwise nullopt, with `note` saying why when a file
    // was there but not used (empty when there was no file).
    std::optional<std::vector<double>> load(std::size_t size, std::string& note) const;

    // Writes `state` to a temporary file beside the checkpoint and renames
    // it over the old one, so a reader (or a kill) never sees half a file.
    // Error(io) naming the file when it cannot be written.
    void save(std::span<const double> state) const;

private:
    std::filesystem::path file_;
    CheckpointOwner owner_;
};

// The file for this worker: --checkpoint FILE when given, else
// $COHORT_CHECKPOINT_DIR/cohort-train-<LOCAL_RANK or member>.ckpt (set by
// cohort-run); empty when neither is set: no checkpoints.
std::filesystem::path checkpoint_file(const std::string& flag, const std::string& member);

}  // namespace cohort_train
