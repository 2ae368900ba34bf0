// The coordinator's HTTP API as a client sees it: a server hosted in the
// test (cohort::Coordinator) and a small Beast client written here.
#include "support.hpp"

#include <cohort/coordinator.hpp>

#include <gtest/gtest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <sys/resource.h>
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using namespace std::chrono_literals;

struct Reply {
    unsigned status = 0;
    std::string body;
    std::string content_type;
};

// One keep-alive connection; every call is bounded by a timeout.
class Client {
public:
    explicit Client(uint16_t port, std::string token = {}) : stream_(io_), token_(std::move(token)) {
        stream_.expires_after(5s);
        stream_.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
    }

    Reply call(http::verb method, const std::string& target, const std::string& body = {},
               std::chrono::seconds timeout = 5s) {
        http::request<http::string_body> request(method, target, 11);
        request.set(http::field::host, "127.0.0.1");
        if (!token_.empty()) request.set(http::field::authorization, "Bearer " + token_);
        if (!body.empty() || method == http::verb::post || method == http::verb::put) {
            request.set(http::field::content_type, "application/json");
            request.body() = body;
        }
        request.prepare_payload();
        stream_.expires_after(timeout);
        http::write(stream_, request);
        return read();
    }
    Reply get(const std::string& target) { return call(http::verb::get, target); }
    Reply post(const std::string& target, const std::string& body) { return call(http::verb::post, target, body); }

    // Raw bytes, for requests the client above would not send.
    void send_raw(const std::string& bytes) {
        stream_.expires_after(5s);
        asio::write(stream_.socket(), asio::buffer(bytes));
    }
    Reply read() {
        http::response<http::string_body> response;
        stream_.expires_after(10s);
        http::read(stream_, buffer_, response);
        return {response.result_int(), response.body(), std::string(response[http::field::content_type])};
    }

private:
    asio::io_context io_;
    beast::tcp_stream stream_;
    beast::flat_buffer buffer_;
    std::string token_;
};

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

// The number after "name": in a JSON text (the first one).
long long number_field(const std::string& body, const std::string& name) {
    const auto at = body.find("\"" + name + "\":");
    if (at == std::string::npos) return -1;
    return std::stoll(body.substr(at + name.size() + 3));
}

cohort::CoordinatorOptions test_options() {
    cohort::CoordinatorOptions options;
    options.token.clear();  // whatever the environment says
    options.tick = 10ms;
    return options;
}

std::string join_body(int i) {
    return "{\"id\":\"n" + std::to_string(i) + "\",\"host\":\"h" + std::to_string(i) + "\",\"address\":\"10.0.0." +
           std::to_string(i + 1) + ":29500\"}";
}

// A job of one node, joined: its store is open at generation 1.
void one_node_job(Client& c, const std::string& job) {
    ASSERT_EQ(c.post("/v1/jobs", "{\"name\":\"" + job + "\"}").status, 201u);
    const Reply joined = c.post("/v1/jobs/" + job + "/join", join_body(0));
    ASSERT_EQ(joined.status, 200u) << joined.body;
    ASSERT_TRUE(contains(joined.body, "\"state\":\"active\"")) << joined.body;
}

TEST(CoordinatorHttp, FourNodesFormAWorldAndSurvivorsLearnOfAFailure) {
    std::atomic<double> now{1000.0};
    cohort::CoordinatorOptions options = test_options();
    options.clock = [&now] { return now.load(); };
    cohort::Coordinator coordinator(options);
    Client c(coordinator.port());

    const Reply created = c.post("/v1/jobs", R"({"name":"train","settings":{"min_nodes":4,"max_nodes":4,)"
                                             R"("heartbeat_interval":1,"failure_timeout":5}})");
    ASSERT_EQ(created.status, 201u) << created.body;
    EXPECT_EQ(c.post("/v1/jobs", R"({"name":"train","settings":{"min_nodes":4,"max_nodes":4,)"
                                 R"("heartbeat_interval":1,"failure_timeout":5}})")
                  .status,
              200u);
    for (int i = 0; i < 4; ++i) {
        const Reply joined = c.post("/v1/jobs/train/join", join_body(i));
        ASSERT_EQ(joined.status, 200u) << joined.body;
        EXPECT_TRUE(contains(joined.body, i < 3 ? "\"state\":\"waiting\"" : "\"state\":\"active\"")) << joined.body;
    }
    std::set<long long> ranks;
    for (int i = 0; i < 4; ++i) {
        const Reply world = c.get("/v1/jobs/train/world?member=n" + std::to_string(i));
        ASSERT_EQ(world.status, 200u) << world.body;
        EXPECT_EQ(number_field(world.body, "world_size"), 4) << world.body;
        EXPECT_EQ(number_field(world.body, "generation"), 1) << world.body;
        EXPECT_TRUE(contains(world.body, "\"address\":\"10.0.0.4:29500\"")) << world.body;
        ranks.insert(number_field(world.body, "rank"));
    }
    EXPECT_EQ(ranks, (std::set<long long>{0, 1, 2, 3}));

    for (int i = 0; i < 4; ++i) {
        const Reply beat = c.post("/v1/jobs/train/heartbeat", "{\"member\":\"n" + std::to_string(i) +
                                                                  "\",\"generation\":1,\"metrics\":{\"step\":7}}");
        ASSERT_EQ(beat.status, 200u) << beat.body;
        EXPECT_TRUE(contains(beat.body, "\"rendezvous\":false")) << beat.body;
    }
    const Reply view = c.get("/v1/jobs/train");
    ASSERT_EQ(view.status, 200u);
    EXPECT_TRUE(contains(view.body, "\"step\":7")) << view.body;

    // n3 goes silent; the others keep heartbeating past its failure timeout.
    now = 1003.0;
    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(
            c.post("/v1/jobs/train/heartbeat", "{\"member\":\"n" + std::to_string(i) + "\",\"generation\":1}").status,
            200u);
    }
    now = 1006.0;
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    bool rendezvous = false;
    while (!rendezvous && std::chrono::steady_clock::now() < deadline) {
        for (int i = 0; i < 3; ++i) {
            const Reply beat =
                c.post("/v1/jobs/train/heartbeat", "{\"member\":\"n" + std::to_string(i) + "\",\"generation\":1}");
            ASSERT_EQ(beat.status, 200u) << beat.body;
            rendezvous = contains(beat.body, "\"rendezvous\":true");
        }
        if (!rendezvous) std::this_thread::sleep_for(10ms);
    }
    EXPECT_TRUE(rendezvous);
    const Reply after = c.get("/v1/jobs/train");
    EXPECT_TRUE(contains(after.body, "\"state\":\"failed\"")) << after.body;
    // The failed member is told so, with a 409 naming it.
    const Reply late = c.post("/v1/jobs/train/heartbeat", R"({"member":"n3","generation":1})");
    EXPECT_EQ(late.status, 409u) << late.body;
    EXPECT_TRUE(contains(late.body, "n3")) << late.body;
}

TEST(CoordinatorHttp, StoreSetGetAddCasWaitAndDelete) {
    cohort::Coordinator coordinator(test_options());
    Client c(coordinator.port());
    one_node_job(c, "s");

    EXPECT_EQ(c.call(http::verb::put, "/v1/jobs/s/store/1/addr%2F0", "10.0.0.1:1234").status, 200u);
    const Reply got = c.get("/v1/jobs/s/store/1/addr%2F0");
    EXPECT_EQ(got.status, 200u);
    EXPECT_EQ(got.body, "10.0.0.1:1234");
    EXPECT_EQ(c.get("/v1/jobs/s/store/1/nothing").status, 404u);

    EXPECT_EQ(number_field(c.post("/v1/jobs/s/store/1/count/add", R"({"delta":2})").body, "value"), 2);
    EXPECT_EQ(number_field(c.post("/v1/jobs/s/store/1/count/add", R"({"delta":3})").body, "value"), 5);
    const Reply won = c.post("/v1/jobs/s/store/1/leader/cas", R"({"desired":"n0"})");
    EXPECT_TRUE(contains(won.body, "\"stored\":true")) << won.body;
    const Reply lost = c.post("/v1/jobs/s/store/1/leader/cas", R"({"expected":"x","desired":"n1"})");
    EXPECT_TRUE(contains(lost.body, "\"stored\":false")) << lost.body;
    EXPECT_TRUE(contains(lost.body, "\"value\":\"n0\"")) << lost.body;

    // A parked get is answered by a set from another connection.
    std::future<Reply> parked = std::async(std::launch::async, [&] {
        Client waiter(coordinator.port());
        return waiter.get("/v1/jobs/s/store/1/late?timeout_ms=5000");
    });
    std::this_thread::sleep_for(100ms);
    EXPECT_EQ(c.call(http::verb::put, "/v1/jobs/s/store/1/late", "here").status, 200u);
    const Reply released = parked.get();
    EXPECT_EQ(released.status, 200u) << released.body;
    EXPECT_EQ(released.body, "here");

    // ... and one that nobody answers times out, naming the key.
    const Reply timed_out = c.get("/v1/jobs/s/store/1/never?timeout_ms=100");
    EXPECT_EQ(timed_out.status, 408u);
    EXPECT_TRUE(contains(timed_out.body, "\"error\":\"timeout\"")) << timed_out.body;
    EXPECT_TRUE(contains(timed_out.body, "'never'")) << timed_out.body;

    EXPECT_EQ(c.post("/v1/jobs/s/store/1/wait", R"({"keys":["late","count"],"timeout_ms":100})").status, 200u);
    const Reply waited = c.post("/v1/jobs/s/store/1/wait", R"({"keys":["late","absent"],"timeout_ms":50})");
    EXPECT_EQ(waited.status, 408u);
    EXPECT_TRUE(contains(waited.body, "'absent'")) << waited.body;
    EXPECT_FALSE(contains(waited.body, "'late'")) << waited.body;

    EXPECT_TRUE(contains(c.call(http::verb::delete_, "/v1/jobs/s/store/1/late").body, "\"removed\":true"));
    EXPECT_EQ(c.get("/v1/jobs/s/store/1/late").status, 404u);

    const Reply wrong_generation = c.call(http::verb::put, "/v1/jobs/s/store/2/x", "v");
    EXPECT_EQ(wrong_generation.status, 409u);
    EXPECT_TRUE(contains(wrong_generation.body, "generation 2")) << wrong_generation.body;
}

TEST(CoordinatorHttp, ShardsAreLeasedAndCountedOnce) {
    cohort::Coordinator coordinator(test_options());
    Client c(coordinator.port());
    one_node_job(c, "d");
    ASSERT_EQ(c.post("/v1/jobs/d/dataset", R"({"shards":[{"id":"a","bytes":10},{"id":"b","bytes":20}]})").status, 201u);
    const Reply first = c.post("/v1/jobs/d/shards/next", R"({"member":"n0"})");
    ASSERT_EQ(first.status, 200u) << first.body;
    const long long lease = number_field(first.body, "lease");
    ASSERT_GT(lease, 0) << first.body;
    const Reply done = c.post("/v1/jobs/d/shards/done", "{\"member\":\"n0\",\"lease\":" + std::to_string(lease) + "}");
    EXPECT_TRUE(contains(done.body, "\"counted\":true")) << done.body;
    const Reply again = c.post("/v1/jobs/d/shards/done", "{\"member\":\"n0\",\"lease\":" + std::to_string(lease) + "}");
    EXPECT_TRUE(contains(again.body, "\"counted\":false")) << again.body;
    EXPECT_EQ(c.post("/v1/jobs/d/shards/done", R"({"member":"n0","lease":99})").status, 404u);

    const Reply metrics = c.get("/metrics");
    EXPECT_TRUE(contains(metrics.body, "cohort_coordinator_shards{job=\"d\",status=\"done\"} 1")) << metrics.body;
    EXPECT_TRUE(contains(metrics.body, "cohort_coordinator_shards{job=\"d\",status=\"todo\"} 1")) << metrics.body;
}

TEST(CoordinatorHttp, MetricsAndStatusPage) {
    cohort::Coordinator coordinator(test_options());
    Client c(coordinator.port());
    one_node_job(c, "m");
    ASSERT_EQ(c.post("/v1/jobs/m/heartbeat", R"({"member":"n0","generation":1})").status, 200u);
    const Reply metrics = c.get("/metrics");
    ASSERT_EQ(metrics.status, 200u);
    EXPECT_TRUE(contains(metrics.content_type, "text/plain"));
    for (const char* series :
         {"cohort_coordinator_members{job=\"m\",state=\"active\"} 1", "cohort_coordinator_generation{job=\"m\"} 1",
          "cohort_coordinator_rounds_total{job=\"m\"} 1", "cohort_coordinator_store_ops_total{job=\"m\",op=\"set\"}",
          "# TYPE cohort_coordinator_heartbeat_seconds histogram", "cohort_coordinator_heartbeat_seconds_count 1",
          "cohort_coordinator_heartbeat_seconds_bucket{le=\"+Inf\"} 1"}) {
        EXPECT_TRUE(contains(metrics.body, series)) << series << "\n" << metrics.body;
    }
    const Reply page = c.get("/");
    EXPECT_EQ(page.status, 200u);
    EXPECT_TRUE(contains(page.content_type, "text/html"));
    EXPECT_TRUE(contains(page.body, "<html")) << page.body;
    EXPECT_TRUE(contains(page.body, "/v1/jobs"));
}

TEST(CoordinatorHttp, BadRequestsGetClearErrorsAndTheServerCarriesOn) {
    cohort::CoordinatorOptions options = test_options();
    options.token = "s3cret";
    options.body_limit = 4096;
    cohort::Coordinator coordinator(options);
    Client c(coordinator.port(), "s3cret");
    ASSERT_EQ(c.post("/v1/jobs", R"({"name":"j"})").status, 201u);

    const Reply malformed = c.post("/v1/jobs", R"({"name": "x",)");
    EXPECT_EQ(malformed.status, 400u);
    EXPECT_TRUE(contains(malformed.body, "\"error\":\"malformed_json\"")) << malformed.body;
    EXPECT_TRUE(contains(malformed.body, "byte")) << malformed.body;

    const Reply unknown_field = c.post("/v1/jobs", R"({"name":"x","settings":{"min_nodez":2}})");
    EXPECT_EQ(unknown_field.status, 400u);
    EXPECT_TRUE(contains(unknown_field.body, "min_nodez")) << unknown_field.body;

    const Reply bad_value = c.post("/v1/jobs", R"({"name":"x","settings":{"min_nodes":0}})");
    EXPECT_EQ(bad_value.status, 400u);
    EXPECT_TRUE(contains(bad_value.body, "min_nodes")) << bad_value.body;

    const Reply unknown_job = c.get("/v1/jobs/nope");
    EXPECT_EQ(unknown_job.status, 404u);
    EXPECT_TRUE(contains(unknown_job.body, "'nope'")) << unknown_job.body;

    const Reply unknown_member = c.post("/v1/jobs/j/heartbeat", R"({"member":"ghost","generation":0})");
    EXPECT_EQ(unknown_member.status, 404u);
    EXPECT_TRUE(contains(unknown_member.body, "'ghost'")) << unknown_member.body;

    const Reply no_route = c.get("/v2/things");
    EXPECT_EQ(no_route.status, 404u);
    EXPECT_TRUE(contains(no_route.body, "\"error\":\"no_route\"")) << no_route.body;

    const Reply wrong_method = c.call(http::verb::patch, "/v1/jobs/j");
    EXPECT_EQ(wrong_method.status, 405u);
    EXPECT_TRUE(contains(wrong_method.body, "GET, DELETE")) << wrong_method.body;

    // The settings alone: GET only, every field filled in.
    const Reply settings = c.get("/v1/jobs/j/settings");
    EXPECT_EQ(settings.status, 200u);
    EXPECT_TRUE(contains(settings.body, "\"heartbeat_interval\"")) << settings.body;
    EXPECT_FALSE(contains(settings.body, "\"members\"")) << settings.body;
    const Reply settings_post = c.post("/v1/jobs/j/settings", "{}");
    EXPECT_EQ(settings_post.status, 405u);
    EXPECT_TRUE(contains(settings_post.body, "this path takes GET")) << settings_post.body;
    EXPECT_EQ(c.get("/v1/jobs/nope/settings").status, 404u);

    const Reply no_world_yet = c.call(http::verb::put, "/v1/jobs/j/store/1/k", "v");
    EXPECT_EQ(no_world_yet.status, 409u);
    EXPECT_TRUE(contains(no_world_yet.body, "\"error\":\"conflict\"")) << no_world_yet.body;

    {
        Client wrong(coordinator.port(), "guess");
        const Reply denied = wrong.get("/v1/jobs");
        EXPECT_EQ(denied.status, 401u);
        EXPECT_TRUE(contains(denied.body, "\"error\":\"unauthorized\"")) << denied.body;
        Client none(coordinator.port());
        EXPECT_EQ(none.get("/metrics").status, 401u);
        EXPECT_EQ(none.get("/").status, 200u);  // the page holds no data
    }
    {
        // Announced as too large: answered before the body is sent at all.
        Client big(coordinator.port(), "s3cret");
        big.send_raw(
            "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret\r\n"
            "Content-Type: application/json\r\nContent-Length: 2000000\r\n\r\n{\"name\":");
        const Reply too_large = big.read();
        EXPECT_EQ(too_large.status, 413u);
        EXPECT_TRUE(contains(too_large.body, "4096")) << too_large.body;
    }
    {
        Client garbage(coordinator.port());
        garbage.send_raw("NOT HTTP AT ALL\r\n\r\n");
        EXPECT_EQ(garbage.read().status, 400u);
    }
    // Still serving, on the old connection and on new ones.
    EXPECT_EQ(c.get("/v1/jobs").status, 200u);
    Client fresh(coordinator.port(), "s3cret");
    EXPECT_TRUE(contains(fresh.get("/v1/jobs").body, "\"name\":\"j\""));
}

// Well-formed UTF-8 (no overlong forms, surrogates or code points past
// U+10FFFF), as a JSON reader insists on.
bool valid_utf8(const std::string& text) {
    for (std::size_t i = 0; i < text.size();) {
        const auto b = static_cast<unsigned char>(text[i]);
        std::size_t len = 0;
        unsigned lo = 0x80, hi = 0xbf;
        if (b < 0x80)
            len = 1;
        else if (b >= 0xc2 && b <= 0xdf)
            len = 2;
        else if (b == 0xe0)
            len = 3, lo = 0xa0;
        else if (b == 0xed)
            len = 3, hi = 0x9f;
        else if (b >= 0xe1 && b <= 0xef)
            len = 3;
        else if (b == 0xf0)
            len = 4, lo = 0x90;
        else if (b == 0xf4)
            len = 4, hi = 0x8f;
        else if (b >= 0xf1 && b <= 0xf3)
            len = 4;
        else
            return false;
        if (i + len > text.size()) return false;
        for (std::size_t k = 1; k < len; ++k) {
            const auto c = static_cast<unsigned char>(text[i + k]);
            if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xbf)) return false;
        }
        i += len;
    }
    return true;
}

TEST(CoordinatorHttp, ErrorsShowUntrustedBytesEscapedAndWhole) {
    cohort::Coordinator coordinator(test_options());
    Client c(coordinator.port());
    one_node_job(c, "j");
    // Each reply: the status, a UTF-8 body, and the detail naming the bytes as
    // \xNN (a backslash escaped once more inside JSON).
    const auto expect_error = [](const Reply& reply, unsigned status, const std::string& part) {
        EXPECT_EQ(reply.status, status) << reply.body;
        EXPECT_TRUE(valid_utf8(reply.body)) << reply.body;
        EXPECT_TRUE(contains(reply.body, part)) << reply.body;
    };

    // A NUL no longer cuts the message short, nor does 0xff reach the body raw.
    expect_error(c.get("/v1/jobs/a%00b"), 400u,
                 R"(job name 'a\\x00b' holds byte 0x00; use printable ASCII without spaces or '/')");
    expect_error(c.get("/v1/jobs/a%ffb/settings"), 400u, R"(job name 'a\\xffb' holds byte 0xff)");
    expect_error(c.post("/v1/jobs/a%0ab/join", join_body(0)), 400u, R"(job name 'a\\x0ab')");
    expect_error(c.post("/v1/jobs", R"({"name":"x\u0000y"})"), 400u, R"(job name 'x\\x00y' holds byte 0x00)");
    // A long name is cut, and says so.
    expect_error(c.get("/v1/jobs/" + std::string(300, 'n') + "%ff"), 400u, "...' is 301 bytes");

    // Store keys are bytes: any key is allowed, and messages escape it.
    expect_error(c.get("/v1/jobs/j/store/1/k%ff%00"), 404u, R"(no key 'k\\xff\\x00')");
    expect_error(c.get("/v1/jobs/j/store/1%ff/k"), 400u, R"(generation '1\\xff' is not a whole number)");
    expect_error(c.get("/v1/jobs/j/world?member=m%ff"), 400u, R"(member 'm\\xff' holds byte 0xff)");
    expect_error(c.get("/v1/jobs/j/world?member=n0&peers=%ff"), 400u, R"(not '\\xff')");
    expect_error(c.post("/v1/jobs/j/heartbeat", R"({"member":"gh\u0000ost","generation":0})"), 404u,
                 R"(no member 'gh\\x00ost')");
    expect_error(c.post("/v1/jobs/j/join", R"({"id":"n9","address":"h\u0000"})"), 400u,
                 R"(address 'h\\x00' is not HOST:PORT)");
    // The raw target as a route error shows it.
    expect_error(c.get("/v2/%ff"), 404u, "GET /v2/%ff: no such route");
}

TEST(CoordinatorHttp, StopsWithAParkedRequestAndIdleConnections) {
    auto coordinator = std::make_unique<cohort::Coordinator>(test_options());
    Client c(coordinator->port());
    one_node_job(c, "x");
    Client idle(coordinator->port());
    std::future<unsigned> parked = std::async(std::launch::async, [port = coordinator->port()] {
        Client waiter(port);
        try {
            return waiter.get("/v1/jobs/x/store/1/k?timeout_ms=60000").status;
        } catch (const std::exception&) {
            return 0u;  // the connection closed
        }
    });
    std::this_thread::sleep_for(100ms);
    coordinator->stop();
    EXPECT_EQ(parked.get(), 0u);
    coordinator.reset();
}

// A data directory of its own, removed afterwards.
class DataDir {
public:
    DataDir() {
        path_ = std::filesystem::temp_directory_path() /
                ("cohort-coordinator-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
        std::filesystem::remove_all(path_);
    }
    DataDir(const DataDir&) = delete;
    DataDir& operator=(const DataDir&) = delete;
    ~DataDir() {
        std::error_code ignored;
        std::filesystem::remove_all(path_, ignored);
    }
    const std::filesystem::path& path() const { return path_; }

private:
    static inline int counter_ = 0;
    std::filesystem::path path_;
};

TEST(CoordinatorHttp, DataDirectoryKeepsTheStateAcrossARestart) {
    DataDir dir;
    cohort::CoordinatorOptions options = test_options();
    options.data_dir = dir.path();
    long long lease = 0;
    {
        cohort::Coordinator coordinator(options);
        Client c(coordinator.port());
        one_node_job(c, "d");
        ASSERT_EQ(c.call(http::verb::put, "/v1/jobs/d/store/1/addr", "10.0.0.1:29500").status, 200u);
        ASSERT_EQ(c.post("/v1/jobs/d/dataset", R"({"shards":[{"id":"a"},{"id":"b"}]})").status, 201u);
        const Reply first = c.post("/v1/jobs/d/shards/next", R"({"member":"n0"})");
        lease = number_field(first.body, "lease");
        ASSERT_GT(lease, 0) << first.body;
    }
    EXPECT_FALSE(std::filesystem::is_empty(dir.path()));
    cohort::Coordinator coordinator(options);
    Client c(coordinator.port());
    const Reply job = c.get("/v1/jobs/d");
    ASSERT_EQ(job.status, 200u) << job.body;
    EXPECT_TRUE(contains(job.body, "\"generation\":1")) << job.body;
    EXPECT_TRUE(contains(job.body, "\"state\":\"active\"")) << job.body;
    const Reply value = c.get("/v1/jobs/d/store/1/addr");
    EXPECT_EQ(value.status, 200u);
    EXPECT_EQ(value.body, "10.0.0.1:29500");
    const Reply done = c.post("/v1/jobs/d/shards/done", "{\"member\":\"n0\",\"lease\":" + std::to_string(lease) + "}");
    EXPECT_TRUE(contains(done.body, "\"counted\":true")) << done.body;
    const Reply metrics = c.get("/metrics");
    EXPECT_TRUE(contains(metrics.body, "cohort_coordinator_journal_seq ")) << metrics.body;
}

// Group commit: many clients write at once; every write answered 200 is in
// the data directory at that moment. A copy of the directory taken while
// the coordinator runs is what a kill -9 (or a power loss, the answers wait
// for fsync) would leave, and it holds every acknowledged value.
TEST(CoordinatorHttp, EveryAcknowledgedWriteSurvivesWithConcurrentWriters) {
    DataDir dir;
    cohort::CoordinatorOptions options = test_options();
    options.data_dir = dir.path();
    cohort::Coordinator coordinator(options);
    {
        Client c(coordinator.port());
        one_node_job(c, "g");
    }
    constexpr int kWriters = 8, kWrites = 40;
    std::vector<std::thread> writers;
    std::atomic<int> acknowledged{0};
    for (int w = 0; w < kWriters; ++w) {
        writers.emplace_back([&, w] {
            Client c(coordinator.port());
            for (int i = 0; i < kWrites; ++i) {
                const std::string key = "k" + std::to_string(w) + "-" + std::to_string(i);
                if (c.call(http::verb::put, "/v1/jobs/g/store/1/" + key, "v" + std::to_string(i)).status == 200)
                    ++acknowledged;
            }
        });
    }
    for (auto& t : writers) t.join();
    ASSERT_EQ(acknowledged.load(), kWriters * kWrites);
    DataDir copy;
    std::filesystem::copy(dir.path(), copy.path(), std::filesystem::copy_options::recursive);
    std::filesystem::remove(copy.path() / "lock");
    cohort::CoordinatorOptions restarted = test_options();
    restarted.data_dir = copy.path();
    cohort::Coordinator second(restarted);
    Client c(second.port());
    for (int w = 0; w < kWriters; ++w) {
        for (int i = 0; i < kWrites; ++i) {
            const Reply r = c.get("/v1/jobs/g/store/1/k" + std::to_string(w) + "-" + std::to_string(i));
            ASSERT_EQ(r.status, 200u) << "writer " << w << " write " << i << ": " << r.body;
            EXPECT_EQ(r.body, "v" + std::to_string(i));
        }
    }
    // One fsync covers many commits when writes arrive together.
    const Reply metrics = Client(coordinator.port()).get("/metrics");
    EXPECT_TRUE(contains(metrics.body, "cohort_coordinator_journal_syncs_total ")) << metrics.body;
}

// A write the journal cannot make (here the file-size limit, as a full disk
// would) is a 503 for the change that needed it and for every later one;
// nothing answered 200 is missing after a restart.
TEST(CoordinatorHttp, AFullDiskRefusesChangesAndLosesNothingAcknowledged) {
    DataDir dir, copy;
    cohort::CoordinatorOptions options = test_options();
    options.data_dir = dir.path();
    const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
    rlimit saved{};
    ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
    std::vector<int> acknowledged;
    {
        cohort::Coordinator coordinator(options);
        Client c(coordinator.port());
        one_node_job(c, "f");
        rlimit low = saved;
        low.rlim_cur = 64 * 1024;
        ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &low), 0);
        std::string refusal;
        for (int i = 0; i < 100 && refusal.empty(); ++i) {
            const Reply r = c.call(http::verb::put, "/v1/jobs/f/store/1/k" + std::to_string(i), std::string(4000, 'x'));
            if (r.status == 200)
                acknowledged.push_back(i);
            else if (r.status == 503)
                refusal = r.body;
            else
                ADD_FAILURE() << r.status << " " << r.body;
        }
        const Reply after = c.call(http::verb::put, "/v1/jobs/f/store/1/after", "y");
        ::setrlimit(RLIMIT_FSIZE, &saved);
        EXPECT_TRUE(contains(refusal, "cannot save changes")) << refusal;
        EXPECT_EQ(after.status, 503u) << after.body;
        EXPECT_TRUE(contains(after.body, "restart the coordinator")) << after.body;
        EXPECT_FALSE(acknowledged.empty());
        // What a crash now would leave.
        std::filesystem::copy(dir.path(), copy.path(), std::filesystem::copy_options::recursive);
        std::filesystem::remove(copy.path() / "lock");
    }
    std::signal(SIGXFSZ, old_handler);
    cohort::CoordinatorOptions restarted = test_options();
    restarted.data_dir = copy.path();
    cohort::Coordinator second(restarted);
    Client c(second.port());
    for (const int i : acknowledged) {
        const Reply r = c.get("/v1/jobs/f/store/1/k" + std::to_string(i));
        EXPECT_EQ(r.status, 200u) << "key k" << i << ": " << r.body;
    }
}

TEST(CoordinatorHttp, TwoCoordinatorsCannotShareADataDirectory) {
    DataDir dir;
    cohort::CoordinatorOptions options = test_options();
    options.data_dir = dir.path();
    std::optional<cohort::Coordinator> first(std::in_place, options);
    const std::string message =
        cohort::test::error_message(cohort::Errc::unavailable, [&] { cohort::Coordinator second(options); });
    EXPECT_TRUE(contains(message, dir.path().string())) << message;
    EXPECT_TRUE(contains(message, "another coordinator holds")) << message;
    first.reset();  // the lock goes with it
    cohort::Coordinator third(options);
    Client c(third.port());
    EXPECT_EQ(c.get("/v1/jobs").status, 200u);
}

TEST(CoordinatorHttp, ACorruptJournalStopsTheStart) {
    DataDir dir;
    cohort::CoordinatorOptions options = test_options();
    options.data_dir = dir.path();
    std::filesystem::create_directories(dir.path());
    const auto journal = dir.path() / "journal-00000000000000000000.jsonl";
    std::ofstream(journal) << "not a journal line\n{}\n";
    const std::string message =
        cohort::test::error_message(cohort::Errc::parse, [&] { cohort::Coordinator coordinator(options); });
    EXPECT_TRUE(contains(message, journal.string())) << message;
    EXPECT_TRUE(contains(message, "byte 0")) << message;
}

}  // namespace
