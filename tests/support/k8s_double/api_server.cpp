// The double's HTTP side: one coroutine per connection, requests answered
// in order, and a watch holding its connection as a chunked stream of
// newline-separated {"type","object"} events until its timeout, a fault, or
// the client leaves. The same loop serves plain and TLS streams (tls.cpp).
#include "api_server.hpp"

#include "discovery.hpp"
#include "request_target.hpp"
#include "table.hpp"
#include "tls.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <atomic>
#include <future>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

namespace cohort::k8s_double {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using asio::awaitable;
using asio::use_awaitable;
using tcp = asio::ip::tcp;
using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;
using Clock = std::chrono::steady_clock;

namespace {

Response reply(const Request& req, int status, const json::value& body) {
    Response res{static_cast<http::status>(status), req.version()};
    res.set(http::field::content_type, "application/json");
    res.set("Audit-Id", "00000000-0000-4000-8000-000000000000");
    res.keep_alive(req.keep_alive());
    res.body() = json::serialize(body) + "\n";
    res.prepare_payload();
    return res;
}

Response reply(const Request& req, const Answer& a) {
    return reply(req, a.status, a.body);
}

std::string event_line(const std::string& type, const json::value& object) {
    json::object e;
    e["type"] = type;
    e["object"] = object;
    return json::serialize(e) + "\n";
}

}  // namespace

struct ApiServer::Impl {
    PodStore& store;
    ServerOptions options;
    // Open watches; touched only on the io thread. Declared before the
    // io_context: its destructor ends the watches' coroutines, which leave this set.
    struct Watch {
        asio::steady_timer* timer;
        tcp::socket* socket;  // under TLS too: a drop cuts the connection, not the session
        bool drop = false;
        bool expire = false;
    };
    std::set<Watch*> watches;
    std::atomic<std::size_t> open{0};
    std::unique_ptr<asio::ssl::context> tls;  // null: plain HTTP; outlives the sessions' streams
    asio::io_context ioc;
    tcp::acceptor acceptor{ioc};
    std::thread thread;
    std::atomic<int> delay_ms{0};
    std::atomic<int> drops{0};
    std::atomic<bool> gone_as_http{false};
    mutable std::mutex mu;  // counts and control
    ServerCounts counts;
    std::string last_client;
    Control control;
    int callback = -1;  // the store's on_change id

    Impl(PodStore& s, ServerOptions o) : store(s), options(std::move(o)) {}

    void wake_watches() {
        for (Watch* w : watches) w->timer->cancel();
    }

    // Runs f on the io thread and waits for it (at once when called there,
    // as from a control route).
    template <class F>
    void on_io_thread(F f) {
        if (ioc.get_executor().running_in_this_thread()) {
            f();
            return;
        }
        std::promise<void> done;
        asio::post(ioc, [&] {
            f();
            done.set_value();
        });
        done.get_future().wait();
    }

    void count(uint64_t ServerCounts::*field) {
        std::lock_guard lock(mu);
        ++(counts.*field);
    }

    Response route(const Request& req, const Target& t);
    Response pods(const Request& req, const Target& t, const std::string& ns, const std::string& name);
    template <class Stream>
    awaitable<void> watch(Stream& stream, const Request& req, const Target& t);
    template <class Stream>
    awaitable<void> serve(Stream& stream);
    awaitable<void> session(tcp::socket socket);
    awaitable<void> accept();
};

Response ApiServer::Impl::route(const Request& req, const Target& t) {
    const auto& p = t.parts;
    const std::string path = [&] {
        std::string s;
        for (const auto& part : p) s += "/" + part;
        return s;
    }();
    if (!p.empty() && p[0] == "_double") {
        Control c;
        {
            std::lock_guard lock(mu);
            c = control;
        }
        if (!c) return reply(req, 404, status_object(404, "NotFound", "no control handler is installed"));
        auto [status, text] = c(std::string(req.target()));
        Response res{static_cast<http::status>(status), req.version()};
        res.set(http::field::content_type, "text/plain");
        res.keep_alive(req.keep_alive());
        res.body() = text + "\n";
        res.prepare_payload();
        return res;
    }
    if (req.method() == http::verb::get) {
        const std::string address = options.host + ":" + std::to_string(acceptor.local_endpoint().port());
        if (auto doc = discovery(path, address)) return reply(req, 200, *doc);
    }
    // /api/v1/namespaces/NS/pods[/NAME] and /api/v1/pods
    if (p.size() >= 5 && p[0] == "api" && p[1] == "v1" && p[2] == "namespaces" && p[4] == "pods" && p.size() <= 6)
        return pods(req, t, p[3], p.size() == 6 ? p[5] : "");
    if (p.size() == 3 && p[0] == "api" && p[1] == "v1" && p[2] == "pods") return pods(req, t, store.ns(), "");
    // Other resources kubectl may ask about: none exist here.
    const std::size_t ns_at = (p.size() > 0 && p[0] == "api") ? 2 : 3;
    if (p.size() > ns_at + 1 && p[ns_at] == "namespaces" && p.size() <= ns_at + 4) {
        const std::string resource = p.size() > ns_at + 2 ? p[ns_at + 2] : "";
        const std::string kind = kind_of(resource);
        if (!kind.empty() && p.size() == ns_at + 4 && req.method() == http::verb::get)
            return reply(req, 404,
                         status_object(404, "NotFound", resource + " \"" + p[ns_at + 3] + "\" not found", resource,
                                       p[ns_at + 3]));
        if (!kind.empty() && p.size() == ns_at + 3 && req.method() == http::verb::get) {
            json::object list;
            list["kind"] = kind + "List";
            list["apiVersion"] = ns_at == 2 ? "v1" : p[1] + "/" + p[2];
            json::object meta;
            meta["resourceVersion"] = std::to_string(store.resource_version());
            list["metadata"] = std::move(meta);
            list["items"] = json::array();
            return reply(req, 200, list);
        }
        if (!kind.empty())
            return reply(req, 405,
                         status_object(405, "MethodNotAllowed",
                                       "the double stores only pods; " + resource +
                                           " are read-only and "
                                           "empty here"));
    }
    return reply(req, 404, status_object(404, "NotFound", "the server could not find the requested resource", ""));
}

Response ApiServer::Impl::pods(const Request& req, const Target& t, const std::string& ns, const std::string& name) {
    const bool here = ns == store.ns();
    if (req.method() == http::verb::get && name.empty()) {
        count(&ServerCounts::lists);
        Selector labels, fields;
        try {
            labels = Selector::labels(param(t, "labelSelector"));
            fields = Selector::fields(param(t, "fieldSelector"));
        } catch (const std::invalid_argument& e) {
            return reply(req, 400, status_object(400, "BadRequest", e.what()));
        }
        const std::string rv = param(t, "resourceVersion");
        if (param(t, "resourceVersionMatch") == "Exact" && !rv.empty() &&
            std::strtoull(rv.c_str(), nullptr, 10) < store.oldest_resource_version())
            return reply(req, 410, status_object(410, "Expired", "too old resource version: " + rv));
        Answer a = store.list(labels, fields);
        if (!here) a.body.as_object()["items"] = json::array();
        if (wants_table(std::string(req[http::field::accept]))) {
            std::vector<json::object> items;
            for (const json::value& v : a.body.as_object()["items"].as_array()) items.push_back(v.as_object());
            return reply(
                req, 200,
                pod_table(items, std::string(a.body.as_object()["metadata"].as_object()["resourceVersion"].as_string()),
                          row_object(param(t, "includeObject"))));
        }
        return reply(req, a);
    }
    if (!here)
        return reply(req, 404, status_object(404, "NotFound", "namespaces \"" + ns + "\" not found", "namespaces", ns));
    switch (req.method()) {
        case http::verb::post: {
            if (!name.empty())
                return reply(req, 405, status_object(405, "MethodNotAllowed", "POST names a collection"));
            count(&ServerCounts::creates);
            json::error_code ec;
            json::value body = json::parse(req.body(), ec);
            if (ec)
                return reply(
                    req, 400,
                    status_object(400, "BadRequest", "error decoding the request body as JSON: " + ec.message()));
            Answer a = store.create(std::move(body));
            if (a.status == 409) count(&ServerCounts::conflicts);
            return reply(req, a);
        }
        case http::verb::get: {
            count(&ServerCounts::gets);
            Answer a = store.get(name);
            if (a.status == 200 && wants_table(std::string(req[http::field::accept])))
                return reply(req, 200,
                             pod_table({a.body.as_object()}, std::to_string(store.resource_version()),
                                       row_object(param(t, "includeObject"))));
            return reply(req, a);
        }
        case http::verb::delete_:
            count(&ServerCounts::deletes);
            return reply(req, store.remove(name));
        case http::verb::patch: {
            count(&ServerCounts::patches);
            const std::string type(req[http::field::content_type]);
            if (type.rfind("application/merge-patch+json", 0) != 0 &&
                type.rfind("application/strategic-merge-patch+json", 0) != 0)
                return reply(req, 415,
                             status_object(415, "UnsupportedMediaType",
                                           "the double takes application/merge-patch+json and "
                                           "application/strategic-merge-patch+json patches, not '" +
                                               type + "'"));
            json::error_code ec;
            json::value patch = json::parse(req.body(), ec);
            if (ec) return reply(req, 400, status_object(400, "BadRequest", "the patch is not JSON: " + ec.message()));
            return reply(req, store.patch(name, patch));
        }
        default:
            return reply(req, 405,
                         status_object(405, "MethodNotAllowed",
                                       "the double serves GET, POST, PATCH and "
                                       "DELETE on pods"));
    }
}

template <class Stream>
awaitable<void> ApiServer::Impl::watch(Stream& stream, const Request& req, const Target& t) {
    count(&ServerCounts::watches);
    Selector labels, fields;
    std::string bad_selector;
    try {
        labels = Selector::labels(param(t, "labelSelector"));
        fields = Selector::fields(param(t, "fieldSelector"));
    } catch (const std::invalid_argument& e) {
        bad_selector = e.what();
    }
    if (!bad_selector.empty()) {
        Response res = reply(req, 400, status_object(400, "BadRequest", bad_selector));
        co_await http::async_write(stream, res, use_awaitable);
        co_return;
    }
    const bool table = wants_table(std::string(req[http::field::accept]));
    const RowObject include = row_object(param(t, "includeObject"));
    const bool bookmarks = flag(t, "allowWatchBookmarks");
    const std::string rv_text = param(t, "resourceVersion");
    uint64_t last = rv_text.empty() || rv_text == "0" ? 0 : std::strtoull(rv_text.c_str(), nullptr, 10);
    const bool replay = last == 0;  // "0" or none: the current state first, as ADDED events
    if (!replay && last < store.oldest_resource_version() && gone_as_http) {
        Response res = reply(req, 410, status_object(410, "Expired", "too old resource version: " + rv_text));
        co_await http::async_write(stream, res, use_awaitable);
        co_return;
    }
    http::response<http::empty_body> head{http::status::ok, req.version()};
    head.set(http::field::content_type, "application/json");
    head.chunked(true);
    head.keep_alive(false);
    http::response_serializer<http::empty_body> serializer{head};
    co_await http::async_write_header(stream, serializer, use_awaitable);

    asio::steady_timer timer(ioc);
    tcp::socket& socket = beast::get_lowest_layer(stream).socket();
    Watch w{&timer, &socket};
    watches.insert(&w);
    ++open;
    struct Leave {
        Impl& impl;
        Watch* w;
        ~Leave() {
            impl.watches.erase(w);
            --impl.open;
        }
    } leave{*this, &w};

    const auto send = [&](const std::string& type, const json::object& object) -> awaitable<void> {
        std::string line;
        if (table && type != "ERROR" && type != "BOOKMARK") {
            line = event_line(type, pod_table({object}, std::to_string(store.resource_version()), include));
        } else {
            line = event_line(type, object);
        }
        co_await asio::async_write(stream, http::make_chunk(asio::buffer(line)), use_awaitable);
    };
    const auto gone = [&](uint64_t from) -> awaitable<void> {
        co_await send("ERROR", status_object(410, "Expired",
                                             "too old resource version: " + std::to_string(from) + " (" +
                                                 std::to_string(store.oldest_resource_version()) + ")"));
        co_await asio::async_write(stream, http::make_chunk_last(), use_awaitable);
    };

    if (replay) {
        Answer list = store.list(labels, fields);
        for (const json::value& item : list.body.as_object()["items"].as_array())
            co_await send("ADDED", item.as_object());
        last = std::strtoull(list.body.as_object()["metadata"].as_object()["resourceVersion"].as_string().c_str(),
                             nullptr, 10);
    }
    const std::string timeout = param(t, "timeoutSeconds");
    const auto deadline = Clock::now() + std::chrono::seconds(timeout.empty() ? 1800 : std::stoll(timeout));
    auto next_bookmark = Clock::now() + options.bookmark_interval;
    for (;;) {
        if (w.drop) {
            beast::error_code ignored;
            socket.shutdown(tcp::socket::shutdown_both, ignored);
            socket.close(ignored);
            co_return;
        }
        if (w.expire) {
            co_await gone(last);
            co_return;
        }
        const uint64_t now_rv = store.resource_version();
        const auto events = store.events_since(last, labels, fields);
        if (!events) {
            co_await gone(last);
            co_return;
        }
        for (const WatchEvent& e : *events) {
            co_await send(e.type, e.object);
            last = e.resource_version;
        }
        last = std::max(last, now_rv);
        if (bookmarks && Clock::now() >= next_bookmark) {
            json::object meta;
            meta["resourceVersion"] = std::to_string(last);
            json::object pod;
            pod["kind"] = "Pod";
            pod["apiVersion"] = "v1";
            pod["metadata"] = std::move(meta);
            co_await send("BOOKMARK", pod);
            next_bookmark = Clock::now() + options.bookmark_interval;
        }
        if (Clock::now() >= deadline) {
            co_await asio::async_write(stream, http::make_chunk_last(), use_awaitable);
            co_return;
        }
        // Woken early by a change or a fault; at least once a second to
        // notice a client that has gone.
        timer.expires_at(
            std::min({deadline, bookmarks ? next_bookmark : deadline, Clock::now() + std::chrono::seconds(1)}));
        try {
            co_await timer.async_wait(use_awaitable);
        } catch (const boost::system::system_error&) {
            // Cancelled: something changed.
        }
    }
}

template <class Stream>
awaitable<void> ApiServer::Impl::serve(Stream& stream) {
    beast::flat_buffer buffer;
    try {
        for (;;) {
            Request req;
            beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(120));
            co_await http::async_read(stream, buffer, req, use_awaitable);
            beast::get_lowest_layer(stream).expires_never();
            const Target t = parse_target(req.target());
            const bool is_control = !t.parts.empty() && t.parts[0] == "_double";
            if (options.log_requests)
                std::cerr << "k8s-double: " << req.method_string() << " " << req.target()
                          << " (Accept: " << req[http::field::accept] << ")\n";
            if (!is_control) {
                if (const int ms = delay_ms.load(); ms > 0) {
                    asio::steady_timer pause(ioc, std::chrono::milliseconds(ms));
                    co_await pause.async_wait(use_awaitable);
                }
                int left = drops.load();
                while (left > 0 && !drops.compare_exchange_weak(left, left - 1)) {
                }
                if (left > 0) break;
            }
            if (!is_control && !options.token.empty() && req[http::field::authorization] != "Bearer " + options.token &&
                !(tls && !options.tls->client_ca.empty())) {
                Response res = reply(req, 401, status_object(401, "Unauthorized", "Unauthorized"));
                co_await http::async_write(stream, res, use_awaitable);
                if (!res.keep_alive()) break;
                continue;
            }
            const bool is_watch = flag(t, "watch") && req.method() == http::verb::get;
            if (is_watch) {
                co_await watch(stream, req, t);
                break;
            }
            Response res = route(req, t);
            co_await http::async_write(stream, res, use_awaitable);
            if (!res.keep_alive()) break;
        }
    } catch (const std::exception&) {
        // The client went away or sent something unreadable: the connection ends.
    }
}

awaitable<void> ApiServer::Impl::session(tcp::socket socket) {
    if (!tls) {
        beast::tcp_stream stream(std::move(socket));
        co_await serve(stream);
        beast::error_code ignored;
        stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
        co_return;
    }
    TlsStream stream(std::move(socket), *tls);
    bool shook = false;
    try {
        std::string client = co_await tls_handshake(stream);
        shook = true;
        std::lock_guard lock(mu);
        ++counts.tls_handshakes;
        if (!client.empty()) last_client = std::move(client);
    } catch (const std::exception& e) {
        if (options.log_requests) std::cerr << "k8s-double: TLS handshake refused: " << e.what() << "\n";
        std::lock_guard lock(mu);
        ++counts.tls_failures;
    }
    if (shook) co_await serve(stream);
    // No close_notify: every answer is delimited (Content-Length, or a
    // chunked stream's last chunk), and waiting for the client's would let
    // a silent client hold the coroutine.
    beast::error_code ignored;
    beast::get_lowest_layer(stream).socket().shutdown(tcp::socket::shutdown_both, ignored);
}

awaitable<void> ApiServer::Impl::accept() {
    for (;;) {
        tcp::socket socket = co_await acceptor.async_accept(use_awaitable);
        asio::co_spawn(ioc, session(std::move(socket)), asio::detached);
    }
}

ApiServer::ApiServer(PodStore& store, ServerOptions options)
    : impl_(std::make_unique<Impl>(store, std::move(options))) {
    Impl& impl = *impl_;
    if (impl.options.tls) impl.tls = make_server_context(*impl.options.tls);
    const tcp::endpoint endpoint(asio::ip::make_address(impl.options.host), impl.options.port);
    impl.acceptor.open(endpoint.protocol());
    impl.acceptor.set_option(tcp::acceptor::reuse_address(true));
    impl.acceptor.bind(endpoint);
    impl.acceptor.listen();
    asio::co_spawn(impl.ioc, impl.accept(), asio::detached);
    impl.callback = store.on_change([&impl] { asio::post(impl.ioc, [&impl] { impl.wake_watches(); }); });
    impl.thread = std::thread([&impl] {
        for (;;) {
            try {
                impl.ioc.run();
                return;
            } catch (const std::exception& e) {
                std::cerr << "k8s-double: " << e.what() << "\n";
            }
        }
    });
}

ApiServer::~ApiServer() {
    impl_->store.remove_on_change(impl_->callback);
    impl_->ioc.stop();
    impl_->thread.join();
}

uint16_t ApiServer::port() const {
    return impl_->acceptor.local_endpoint().port();
}

std::string ApiServer::url() const {
    return (impl_->tls ? "https://" : "http://") + impl_->options.host + ":" + std::to_string(port());
}

std::string ApiServer::last_client() const {
    std::lock_guard lock(impl_->mu);
    return impl_->last_client;
}

void ApiServer::set_delay(std::chrono::milliseconds delay) {
    impl_->delay_ms = static_cast<int>(delay.count());
}

void ApiServer::drop_next(int count) {
    impl_->drops = count;
}

void ApiServer::drop_watches() {
    impl_->on_io_thread([this] {
        for (Impl::Watch* w : impl_->watches) {
            w->drop = true;
            beast::error_code ignored;
            w->socket->shutdown(tcp::socket::shutdown_both, ignored);
            w->timer->cancel();
        }
    });
}

void ApiServer::expire_watches() {
    impl_->on_io_thread([this] {
        for (Impl::Watch* w : impl_->watches) {
            w->expire = true;
            w->timer->cancel();
        }
    });
}

void ApiServer::set_gone_as_http(bool on) {
    impl_->gone_as_http = on;
}

std::size_t ApiServer::open_watches() const {
    return impl_->open.load();
}

ServerCounts ApiServer::counts() const {
    std::lock_guard lock(impl_->mu);
    return impl_->counts;
}

void ApiServer::set_control(Control control) {
    std::lock_guard lock(impl_->mu);
    impl_->control = std::move(control);
}

}  // namespace cohort::k8s_double
