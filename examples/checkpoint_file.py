"""A worker's training state on disk, for the Python training examples
(train_numpy.py, torch/train_elastic.py): the same idea and the same text
format as cohort-train's (examples/cohort_train/checkpoint.hpp says why a
worker needs one: when every worker restarts, only these files still hold
the state the coordinator counted shards into).

    KIND checkpoint 1
    job NAME
    created_at SECONDS
    fingerprint N
    values COUNT
    VALUE            (COUNT lines, each the shortest text that reads back exactly)

A file belongs to one job instance (its name and creation time on the
coordinator) and one set of model and data flags (the fingerprint): a file
left by another job or other flags, or one cut off, is ignored with a line
saying why. Files are written to a temporary name and renamed over the old
one, so a reader (or a kill) never sees half a file.
"""

import os
import re

VERSION = 1


def checkpoint_file(flag, member, kind):
    """The file for this worker: --checkpoint FILE when given, else
    $COHORT_CHECKPOINT_DIR/KIND-<LOCAL_RANK or member>.ckpt (cohort-run
    sets the variable); None when neither is set: no checkpoints."""
    if flag:
        return flag
    directory = os.environ.get("COHORT_CHECKPOINT_DIR")
    if not directory:
        return None
    who = os.environ.get("LOCAL_RANK") or member
    who = re.sub(r"[^A-Za-z0-9._-]", "_", who)  # a name, not a path, whatever the variables hold
    return os.path.join(directory, f"{kind}-{who}.ckpt")


class Checkpoint:
    """One worker's checkpoint file. owner: (job, created_at, fingerprint)."""

    def __init__(self, path, owner, kind):
        self.path = path
        self.job, self.created_at, self.fingerprint = owner
        self.magic = f"{kind} checkpoint {VERSION}"

    def load(self, size):
        """(values, note): the saved values when the file exists, belongs to
        this owner and holds `size` of them; else (None, why) where a file was
        there but not used, (None, "") when there was none."""
        where = f"checkpoint '{self.path}'"
        try:
            with open(self.path) as f:
                lines = f.read().split("\n")
        except FileNotFoundError:
            return None, ""
        except OSError as e:
            return None, f"cannot read {where}: {e.strerror}"
        except UnicodeDecodeError:
            return None, f"{where}: not a text file; ignored"
        if lines[0] != self.magic:
            return None, f"{where}: not a {self.magic.rsplit(' ', 1)[0]} (first line {lines[0][:60]!r}); ignored"
        head = {}
        for line, key in zip(lines[1:5], ("job", "created_at", "fingerprint", "values")):
            name, _, value = line.partition(" ")
            if name != key:
                return None, f"{where}: damaged header; ignored"
            head[key] = value
        try:
            created_at, fingerprint, count = float(head["created_at"]), int(head["fingerprint"]), int(head["values"])
        except ValueError:
            return None, f"{where}: damaged header; ignored"
        if head["job"] != self.job or created_at != self.created_at:
            return None, (f"{where}: written for job '{head['job']}' created at {created_at!r}, not this job "
                          f"'{self.job}' created at {self.created_at!r}; ignored")
        if fingerprint != self.fingerprint or count != size:
            return None, f"{where}: written with other model or data flags; ignored"
        values = []
        for line in lines[5:5 + size]:
            try:
                values.append(float(line))
            except ValueError:
                break
        if len(values) != size:
            return None, (f"{where}: value {len(values) + 1} of {size} is missing or not a number "
                          "(a cut-off file?); ignored")
        return values, None

    def save(self, values):
        """Writes `values` (floats) atomically; OSError naming the file when
        it cannot."""
        values = [float(v) for v in values]
        text = (f"{self.magic}\njob {self.job}\ncreated_at {self.created_at!r}\nfingerprint {self.fingerprint}\n"
                f"values {len(values)}\n" + "\n".join(map(repr, values)) + "\n")
        tmp = f"{self.path}.tmp{os.getpid()}"
        try:
            with open(tmp, "w") as f:
                f.write(text)
            os.replace(tmp, self.path)
        except OSError as e:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise OSError(e.errno, f"cannot write checkpoint '{self.path}': {e.strerror}") from None


def job_created_at(client, job):
    """The job's creation time on the coordinator: with its name, what tells
    this job from an earlier one of the same name whose files are still on
    disk."""
    state = client.job_state(job)
    at = state.get("created_at") if isinstance(state, dict) else None
    if not isinstance(at, (int, float)):
        raise ValueError(f"job '{job}': the coordinator's job state has no created_at number")
    return float(at)
