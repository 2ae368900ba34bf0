#include "events.hpp"

#include <cohort/error.hpp>

#include <cerrno>
#include <cstring>

#include <boost/json/serialize.hpp>
#include <fmt/format.h>

namespace cohort_run {

EventLog::EventLog(const std::string& events_file, bool quiet)
    : start_(std::chrono::steady_clock::now()), quiet_(quiet) {
    if (!events_file.empty()) {
        // "e": O_CLOEXEC, so the workers do not inherit the log.
        file_ = std::fopen(events_file.c_str(), "we");
        if (file_ == nullptr) {
            throw cohort::Error(cohort::Errc::io,
                                fmt::format("--events: cannot write '{}': {}", events_file, std::strerror(errno)));
        }
    }
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
        fmt::print("cohort-run [{:7.2f}s] {}\n", t, text);
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
        for (auto& [key, value] : fields) line[key] = std::move(value);
        const std::string out = boost::json::serialize(line);
        std::fprintf(file_, "%s\n", out.c_str());
        std::fflush(file_);  // a test may read it while we run
    }
}

void EventLog::say(std::string_view text) {
    if (quiet_) return;
    fmt::print("cohort-run {}\n", text);
    std::fflush(stdout);
}

}  // namespace cohort_run
