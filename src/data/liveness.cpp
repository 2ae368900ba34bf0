// Process liveness from kill(2) and /proc/PID/stat.
#include "data/liveness.hpp"

#include <cerrno>
#include <fstream>
#include <sstream>
#include <string>

#include <signal.h>
#include <sys/types.h>

namespace cohort::data {

namespace {

struct Stat {
    char state = '?';
    uint64_t start_time = 0;
};

// The fields after "(comm)": the name may hold spaces and parentheses, so
// the text is read from the last ')'.
std::optional<Stat> read_stat(int64_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string text;
    if (!in || !std::getline(in, text)) return std::nullopt;
    const std::size_t close = text.rfind(')');
    if (close == std::string::npos) return std::nullopt;
    std::istringstream fields(text.substr(close + 1));
    Stat stat;
    fields >> stat.state;
    std::string skip;
    for (int field = 4; field < 22 && fields >> skip; ++field) {
    }
    if (!(fields >> stat.start_time)) return std::nullopt;
    return stat;
}

}  // namespace

std::optional<uint64_t> process_start_time(int64_t pid) {
    if (auto stat = read_stat(pid)) return stat->start_time;
    return std::nullopt;
}

bool process_alive(int64_t pid, std::optional<uint64_t> start_time) {
    if (pid <= 0 || pid > INT32_MAX) return false;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return false;
    const auto stat = read_stat(pid);
    if (!stat) return true;  // no /proc: kill(2) is all there is
    if (stat->state == 'Z' || stat->state == 'X') return false;
    return !start_time || *start_time == stat->start_time;
}

}  // namespace cohort::data
