// GET /v1/jobs/{job}/history and the dashboard's files, over HTTP, against
// a coordinator hosted in the test on a clock the test moves.
#include "http_client.hpp"

#include <cohort/coordinator.hpp>

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace json = boost::json;
using cohort::test::HttpClient;
using cohort::test::HttpReply;
using namespace std::chrono_literals;

constexpr const char* kToken = "dash-token";

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

json::value parsed(const HttpReply& r) {
    return json::parse(r.body);
}

// Polls `done` every 10 ms for up to 5 s.
bool eventually(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (std::chrono::steady_clock::now() < deadline) {
        if (done()) return true;
        std::this_thread::sleep_for(10ms);
    }
    return done();
}

std::vector<std::string> strings(const json::value& array) {
    std::vector<std::string> out;
    for (const auto& v : array.as_array()) out.emplace_back(v.as_string());
    return out;
}

class CoordinatorHistoryHttp : public ::testing::Test {
protected:
    CoordinatorHistoryHttp() : coordinator_(options()), c_(coordinator_.port(), kToken) {}

    cohort::CoordinatorOptions options() {
        cohort::CoordinatorOptions o;
        o.token = kToken;
        o.tick = 10ms;
        o.clock = [this] { return now_.load(); };
        return o;
    }

    void advance(double seconds) { now_.store(now_.load() + seconds); }

    json::value history(const std::string& query = "") {
        const HttpReply r = c_.get("/v1/jobs/h/history" + query);
        EXPECT_EQ(r.status, 200u) << r.body;
        EXPECT_TRUE(contains(r.content_type, "application/json")) << r.content_type;
        return parsed(r);
    }

    std::size_t series_length() { return history("?members=none").at("series").at("time").as_array().size(); }

    void heartbeat(const std::string& member, int step, double step_time, double rate, const std::string& gpu = "") {
        const std::string body =
            "{\"member\":\"" + member + "\",\"generation\":1,\"metrics\":{\"step\":" + std::to_string(step) +
            ",\"step_time\":" + std::to_string(step_time) + ",\"samples_per_sec\":" + std::to_string(rate) +
            (gpu.empty() ? "" : ",\"gpu\":" + gpu) + "}}";
        const HttpReply r = c_.post("/v1/jobs/h/heartbeat", body);
        ASSERT_EQ(r.status, 200u) << r.body;
    }

    // A 2-member job at generation 1 with `seconds` points of heartbeats.
    void running_job(int seconds) {
        ASSERT_EQ(c_.post("/v1/jobs", R"({"name":"h","settings":{"min_nodes":2,"max_nodes":2,"last_call":0,)"
                                      R"("heartbeat_interval":1,"failure_timeout":5}})")
                      .status,
                  201u);
        for (const char* m : {"n0", "n1"}) {
            const HttpReply r = c_.post("/v1/jobs/h/join", std::string("{\"id\":\"") + m + "\",\"host\":\"host-" + m +
                                                               "\",\"address\":\"127.0.0.1:29500\"}");
            ASSERT_EQ(r.status, 200u) << r.body;
        }
        ASSERT_TRUE(
            eventually([&] { return parsed(c_.get("/v1/jobs/h")).at("generation").to_number<std::uint64_t>() == 1; }));
        // The job's first point, before any step: the clock stands still
        // until the test moves it, so there is exactly one.
        ASSERT_TRUE(eventually([&] { return series_length() == 1; }));
        const std::string gpu = R"({"gpus":[{"memory_used_bytes":3221225472,"memory_total_bytes":8589934592,)"
                                R"("gpu_utilization_percent":90,"temperature_celsius":65}]})";
        for (int i = 1; i <= seconds; ++i) {
            // Beats half a second before the point, so each point has its step.
            advance(0.5);
            heartbeat("n0", i, 0.5, 64, gpu);
            heartbeat("n1", i, 1.5, 16);
            advance(0.5);
            ASSERT_TRUE(eventually([&] { return series_length() == static_cast<std::size_t>(i) + 1; }))
                << "point " << i << ": " << json::serialize(history());
        }
    }

    std::atomic<double> now_{1000.0};
    cohort::Coordinator coordinator_;
    HttpClient c_;
};

TEST_F(CoordinatorHistoryHttp, ServesMembersSeriesRoundsAndEvents) {
    running_job(4);
    const json::value h = history();
    EXPECT_EQ(h.at("job").as_string(), "h");
    EXPECT_EQ(h.at("limits").at("member_points").to_number<std::uint64_t>(), 120u);
    EXPECT_EQ(h.at("limits").at("rounds").to_number<std::uint64_t>(), 64u);
    const json::array& members = h.at("members").as_array();
    ASSERT_EQ(members.size(), 2u);
    EXPECT_EQ(members[0].at("id").as_string(), "n0");
    EXPECT_EQ(members[0].at("step").as_array().back().to_number<std::uint64_t>(), 4u);
    EXPECT_EQ(members[0].at("step_time").as_array().back().to_number<double>(), 0.5);
    EXPECT_EQ(members[0].at("samples_per_sec").as_array().size(), 4u);
    EXPECT_EQ(members[0].at("gpu_memory_used").as_array().back().to_number<double>(), 3.221e9);  // 4 digits
    EXPECT_EQ(members[0].at("gpu_utilization").as_array().back().to_number<double>(), 90.0);
    EXPECT_EQ(members[0].at("gpu_temperature").as_array().back().to_number<double>(), 65.0);
    EXPECT_FALSE(members[1].as_object().contains("gpu_memory_used"));
    EXPECT_EQ(members[1].at("step_time").as_array().back().to_number<double>(), 1.5);

    const json::value& series = h.at("series");
    EXPECT_EQ(series.at("time").as_array().size(), 5u);
    EXPECT_TRUE(series.at("step_time_max").as_array()[0].is_null());  // before the first step
    EXPECT_EQ(series.at("step_time_max").as_array().back().to_number<double>(), 1.5);
    EXPECT_EQ(series.at("samples_per_sec").as_array().back().to_number<double>(), 80.0);
    EXPECT_EQ(series.at("active").as_array().back().to_number<std::uint64_t>(), 2u);

    const json::array& rounds = h.at("rounds").as_array();
    ASSERT_EQ(rounds.size(), 1u);
    EXPECT_EQ(rounds[0].at("generation").to_number<std::uint64_t>(), 1u);
    EXPECT_EQ(rounds[0].at("reason").as_string(), "job created");
    EXPECT_EQ(strings(rounds[0].at("joined").at("ids")), (std::vector<std::string>{"n0", "n1"}));
    ASSERT_EQ(h.at("events").as_array().size(), 2u);
    EXPECT_EQ(h.at("events").as_array()[0].at("kind").as_string(), "joined");

    // since: the points after the third.
    const double third = series.at("time").as_array()[2].to_number<double>();
    const json::value later = history("?since=" + std::to_string(third + 0.0005));
    EXPECT_EQ(later.at("series").at("time").as_array().size(), 2u);
    EXPECT_EQ(later.at("members").as_array()[0].at("time").as_array().size(), 2u);
    EXPECT_TRUE(later.at("events").as_array().empty());
    EXPECT_EQ(later.at("rounds").as_array().size(), 1u);  // rounds: always all

    const json::value slowest = history("?members=slowest&limit=1");
    ASSERT_EQ(slowest.at("members").as_array().size(), 1u);
    EXPECT_EQ(slowest.at("members").as_array()[0].at("id").as_string(), "n1");
    EXPECT_EQ(slowest.at("members_total").to_number<std::uint64_t>(), 2u);
}

TEST_F(CoordinatorHistoryHttp, AFailureShowsInTheTimeline) {
    running_job(1);
    // n1 falls silent; n0 goes on beating until n1 is failed.
    for (int i = 2; i < 12; ++i) {
        advance(1);
        heartbeat("n0", i, 0.5, 64);
        const json::value job = parsed(c_.get("/v1/jobs/h"));
        if (job.at("phase").as_string() == "rendezvous") break;
    }
    ASSERT_TRUE(eventually([&] { return history().at("rounds").as_array().size() == 2; }));
    const json::value h = history();
    const json::object& open = h.at("rounds").as_array().back().as_object();
    EXPECT_TRUE(open.at("open").as_bool());
    EXPECT_FALSE(open.contains("closed_at"));
    EXPECT_EQ(open.at("reason").as_string(), "node 'n1' failed");
    EXPECT_EQ(strings(open.at("failed").at("ids")), (std::vector<std::string>{"n1"}));
    const json::object& failed = h.at("events").as_array().back().as_object();
    EXPECT_EQ(failed.at("kind").as_string(), "failed");
    EXPECT_EQ(failed.at("member").as_string(), "n1");
    EXPECT_TRUE(contains(std::string(failed.at("reason").as_string()), "no heartbeat")) << json::serialize(failed);
}

TEST_F(CoordinatorHistoryHttp, BadQueriesAndRequestsGetClearErrors) {
    running_job(1);
    const auto bad = [&](const std::string& target, unsigned status, const std::string& text) {
        const HttpReply r = c_.get(target);
        EXPECT_EQ(r.status, status) << target << ": " << r.body;
        EXPECT_TRUE(contains(r.body, text)) << target << ": " << r.body;
    };
    bad("/v1/jobs/h/history?since=soon", 400, "history of job 'h': since must be a time in seconds");
    bad("/v1/jobs/h/history?since=-5", 400, "since must be a time");
    bad("/v1/jobs/h/history?members=fast", 400, "members must be all, none or slowest, not 'fast'");
    bad("/v1/jobs/h/history?members=slowest&limit=0", 400, "limit must be a whole number from 1 to 10000");
    bad("/v1/jobs/h/history?limit=5", 400, "limit goes with members=slowest");
    bad("/v1/jobs/h/history?from=1", 400, "unknown parameter 'from'");
    bad("/v1/jobs/nope/history", 404, "no job 'nope'");
    const HttpReply post = c_.post("/v1/jobs/h/history", "{}");
    EXPECT_EQ(post.status, 405u) << post.body;

    HttpClient stranger(coordinator_.port());
    EXPECT_EQ(stranger.get("/v1/jobs/h/history").status, 401u);
    HttpClient wrong(coordinator_.port(), "not-the-token");
    EXPECT_EQ(wrong.get("/v1/jobs/h/history").status, 401u);
    // The server carries on.
    EXPECT_EQ(c_.get("/v1/jobs/h/history").status, 200u);
}

TEST_F(CoordinatorHistoryHttp, TheDashboardsFilesNeedNoToken) {
    HttpClient browser(coordinator_.port());
    const HttpReply page = browser.get("/");
    ASSERT_EQ(page.status, 200u);
    EXPECT_TRUE(contains(page.content_type, "text/html"));
    EXPECT_TRUE(contains(page.body, "/dashboard/chart.min.js")) << page.body;
    EXPECT_TRUE(contains(page.body, "/dashboard/dashboard.js")) << page.body;
    const HttpReply chart = browser.get("/dashboard/chart.min.js");
    ASSERT_EQ(chart.status, 200u);
    EXPECT_TRUE(contains(chart.content_type, "text/javascript"));
    EXPECT_TRUE(contains(chart.body, "Chart.js v")) << chart.body.substr(0, 200);
    EXPECT_GT(chart.body.size(), 100'000u);
    for (const char* file : {"dashboard.js", "format.js", "api.js", "charts.js", "timeline.js", "members.js"}) {
        const HttpReply r = browser.get(std::string("/dashboard/") + file);
        EXPECT_EQ(r.status, 200u) << file;
        EXPECT_TRUE(contains(r.content_type, "text/javascript")) << file;
    }
    const HttpReply css = browser.get("/dashboard/dashboard.css");
    EXPECT_EQ(css.status, 200u);
    EXPECT_TRUE(contains(css.content_type, "text/css"));
    const HttpReply missing = browser.get("/dashboard/nope.js");
    EXPECT_EQ(missing.status, 404u);
    EXPECT_TRUE(contains(missing.body, "no such route")) << missing.body;
    EXPECT_EQ(browser.call(boost::beast::http::verb::delete_, "/dashboard/dashboard.js").status, 405u);
    // The API still wants the token.
    EXPECT_EQ(browser.get("/v1/jobs").status, 401u);
}

}  // namespace
