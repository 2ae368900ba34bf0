#include "events.hpp"

#include <cohort/error.hpp>

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

#include <boost/json/serialize.hpp>
#include <fmt/format.h>

namespace cohort_run {

EventLog::EventLog(const std::string& events_file, bool quiet, std::string role, EventsFile sharing)
    : start_(std::chrono::steady_clock::now()),
      quiet_(quiet),
      role_(std::move(role)),
      prefix_(role_.empty() ? std::string("cohort-run") : fmt::format("cohort-run[{}]", role_)) {
    if (events_file.empty()) return;
    // O_CLOEXEC, so the workers do not inherit the log; O_APPEND when the
    // file is shared, so that each line lands at its end whoever wrote last.
    int flags = O_WRONLY | O_CREAT | O_CLOEXEC;
    if (sharing != EventsFile::role) flags |= O_TRUNC;
    if (sharing != EventsFile::own) flags |= O_APPEND;
    const int fd = ::open(events_file.c_str(), flags, 0666);
    file_ = fd < 0 ? nullptr : ::fdopen(fd, sharing == EventsFile::own ? "w" : "a");
    if (file_ == nullptr) {
        if (fd >= 0) ::close(fd);
        throw cohort::Error(cohort::Errc::io,
                            fmt::format("--events: cannot write '{}': {}", events_file, std::strerror(errno)));
    }
    if (sharing != EventsFile::own) std::setvbuf(file_, nullptr, _IONBF, 0);
}

EventLog::~EventLog() {
    if (file_ != nullptr) std::fclose(file_);
}

double EventLog::now() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void EventLog::emit(std::string_view event, boost::json::object fields, std::string_view text) {
    const double t = now();
    if (!quiet_) {
        fmt::print("{} [{:7.2f}s] {}\n", prefix_, t, text);
        std::fflush(stdout);
    }
    append(t, event, std::move(fields));
}

void EventLog::record(std::string_view event, boost::json::object fields) {
    append(now(), event, std::move(fields));
}

void EventLog::append(double t, std::string_view event, boost::json::object fields) {
    if (file_ != nullptr) {
        boost::json::object line;
        line["t"] = t;
        line["event"] = event;
        if (!role_.empty()) line["role"] = role_;
        for (auto& [key, value] : fields) line[key] = std::move(value);
        const std::string out = boost::json::serialize(line) + "\n";
        // One write per line, so that lines of launchers sharing the file never interleave.
        std::fwrite(out.data(), 1, out.size(), file_);
        std::fflush(file_);  // a test may read it while we run
    }
}

void EventLog::say(std::string_view text) {
    if (quiet_) return;
    fmt::print("{} {}\n", prefix_, text);
    std::fflush(stdout);
}

}  // namespace cohort_run
