// What cohort-run tells people and programs: one line per event on stdout
// ("cohort-run [  3.21s] round 2 formed: ..."), and with --events the same
// event as a JSON line ({"t": 3.21, "event": "round_formed", ...}).
#pragma once

#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>

#include <boost/json/object.hpp>

namespace cohort_run {

// Who writes the events file: this launcher alone; a group of roles'
// launcher, which empties it for its roles' launchers to append to; or one
// of those. A shared file takes each line in one write at its end.
enum class EventsFile { own, group, role };

class EventLog {
public:
    // Throws cohort::Error(io) when the events file cannot be opened.
    // `role` (a group's role, or a launcher's role other than the
    // default): "cohort-run[ROLE]" on each line, "role" in each event.
    EventLog(const std::string& events_file, bool quiet, std::string role = {},
             EventsFile sharing = EventsFile::own);
    ~EventLog();
    EventLog(const EventLog&) = delete;
    EventLog& operator=(const EventLog&) = delete;

    // Seconds since the launcher started.
    double now() const;
    // `fields` gets "t" and "event"; `text` is the line people read.
    void emit(std::string_view event, boost::json::object fields, std::string_view text);
    // The event for programs only (--events): the status bar shows people.
    void record(std::string_view event, boost::json::object fields);
    // A line for people only (the summary table).
    void say(std::string_view text);

private:
    void append(double t, std::string_view event, boost::json::object fields);

    std::chrono::steady_clock::time_point start_;
    std::FILE* file_ = nullptr;
    bool quiet_;
    std::string role_;
    std::string prefix_;  // "cohort-run" or "cohort-run[ROLE]"
};

}  // namespace cohort_run
