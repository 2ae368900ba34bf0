// The process's open-file limit (RLIMIT_NOFILE). Servers raise the soft
// limit to the hard one at start: the common soft limit of 1024 is a
// default from the days of select(), and a server at it stops accepting
// long before the machine runs short of anything.
#pragma once

#include <cstdint>
#include <string>

namespace cohort::detail {

struct FdLimit {
    uint64_t before = 0;  // the soft limit found
    uint64_t soft = 0;    // the soft limit now
    uint64_t hard = 0;
    std::string error;  // why raising failed; empty when it did not
};

// The soft limit now (the kernel's nr_open when unlimited).
uint64_t open_file_limit();

// Raises the soft limit to the hard limit (or to fs.nr_open when the hard
// limit is unlimited). Idempotent; never throws.
FdLimit raise_open_file_limit();

}  // namespace cohort::detail
