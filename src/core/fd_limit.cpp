// RLIMIT_NOFILE: read it, and raise the soft limit to the hard one.
#include "core/fd_limit.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>

#include <sys/resource.h>

namespace cohort::detail {

namespace {

// setrlimit refuses RLIM_INFINITY for RLIMIT_NOFILE above fs.nr_open.
uint64_t kernel_ceiling() {
    std::ifstream in("/proc/sys/fs/nr_open");
    uint64_t value = 0;
    if (in >> value && value > 0) return value;
    return 1024 * 1024;  // Linux's default nr_open
}

uint64_t finite(rlim_t value) {
    return value == RLIM_INFINITY ? kernel_ceiling() : static_cast<uint64_t>(value);
}

}  // namespace

uint64_t open_file_limit() {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
    return finite(limit.rlim_cur);
}

FdLimit raise_open_file_limit() {
    FdLimit result;
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) {
        result.error = std::strerror(errno);
        result.before = result.soft = result.hard = 1024;
        return result;
    }
    result.before = result.soft = finite(limit.rlim_cur);
    result.hard = finite(limit.rlim_max);
    if (result.soft >= result.hard) return result;
    rlimit raised = limit;
    raised.rlim_cur = static_cast<rlim_t>(result.hard);
    if (::setrlimit(RLIMIT_NOFILE, &raised) != 0) {
        result.error = std::strerror(errno);
        return result;
    }
    result.soft = result.hard;
    return result;
}

}  // namespace cohort::detail
