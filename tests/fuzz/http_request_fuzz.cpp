// The coordinator's front door: the bytes of one connection, framed by
// Beast's parser with the session's limits and answered by the routes of a
// fresh in-memory coordinator, request after request as a pipelining
// client sends them. Every answer must be a named error or a result, and a
// JSON answer must be valid UTF-8 JSON whatever bytes the request held.
#include "fuzz_input.hpp"

#include "coordinator/protocol/json_bytes.hpp"
#include "coordinator/server/session.hpp"

#include <boost/beast/http/parser.hpp>
#include <boost/json/parse.hpp>

#include <memory>

namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using cohort::Coordinator;
using cohort::coord::server::Response;

constexpr int kMaxRequests = 16;

void check(const Response& response) {
    if (response.status < 100 || response.status > 599) cohort::fuzz::defect("http", "status out of range");
    if (response.status == 500) cohort::fuzz::defect("http: 500 internal", response.body);
    if (response.content_type != "application/json") return;
    if (!cohort::coord::is_utf8(response.body)) cohort::fuzz::defect("http: reply is not UTF-8", response.body);
    boost::system::error_code ec;
    boost::json::parse(response.body, ec);
    if (ec) cohort::fuzz::defect("http: reply is not JSON", response.body);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    cohort::fuzz::Input in(data, size);
    cohort::CoordinatorOptions options;
    options.raise_fd_limit = false;
    options.max_connections = 64;
    options.body_limit = 64 * 1024;
    // A token on odd first bytes, so that both the open and the guarded
    // paths are reached.
    if (in.byte() & 1) options.token = "fuzz-token";
    double clock = 1000;
    options.clock = [&clock] { return clock += 0.25; };
    Coordinator::Impl server(options);
    auto session = std::make_shared<Coordinator::Impl::HttpSession>(server, asio::ip::tcp::socket(server.io), 1,
                                                                    "127.0.0.1", nullptr);
    std::string_view rest = in.rest();
    for (int n = 0; n < kMaxRequests && !rest.empty(); ++n) {
        http::request_parser<http::string_body> parser;
        parser.body_limit(options.body_limit);
        parser.header_limit(Coordinator::Impl::kHeaderLimit);
        parser.eager(true);
        boost::beast::error_code ec;
        while (!parser.is_done() && !rest.empty()) {
            const std::size_t used = parser.put(asio::buffer(rest.data(), rest.size()), ec);
            rest.remove_prefix(used);
            if (ec == http::error::need_more) {
                if (used == 0) break;
                ec = {};
                continue;
            }
            if (ec) break;
        }
        if (!parser.is_done()) {
            if (!ec || ec == http::error::need_more) parser.put_eof(ec);
            if (!parser.is_done()) break;  // the session answers 400 or closes: nothing more to read
        }
        Coordinator::Impl::Request request = parser.release();
        cohort::fuzz::expect_named_errors("http", [&] {
            std::optional<Response> response;
            try {
                response = server.route_once(session, request);
            } catch (const cohort::Error& e) {
                response = cohort::coord::server::error_response(e);
            }
            if (response) check(*response);
        });
        // Time passes between requests: leases expire, rounds close.
        cohort::fuzz::expect_named_errors("http: tick", [&] {
            server.state.tick(clock);
            server.changed("");
        });
    }
    return 0;
}
