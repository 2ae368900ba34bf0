// CoordinatorClient's store and shard calls, and the Store over one job's
// generation that open_store("coordinator://...") returns.
#include "comm/store/backends.hpp"
#include "coordinator/client/client_call.hpp"
#include "coordinator/client/coordinator_store.hpp"
#include "coordinator/protocol/replies.hpp"
#include "coordinator/protocol/requests.hpp"
#include "coordinator/protocol/store.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <charconv>
#include <functional>
#include <utility>

#include <fmt/format.h>

namespace cohort {

namespace json = boost::json;
using namespace coord::client;

namespace {

// The server parks a request for at most an hour; longer waits are asked
// again.
constexpr std::chrono::milliseconds kMaxParked{std::chrono::hours(1)};

std::string store_path(std::string_view job, uint64_t generation) {
    return fmt::format("{}/store/{}", job_path(job), generation);
}

std::string key_path(std::string_view job, uint64_t generation, std::string_view key) {
    return store_path(job, generation) + "/" + percent_encode(key);
}

}  // namespace

void CoordinatorClient::store_set(std::string_view job, uint64_t generation, std::string_view key,
                                  std::string_view value) {
    impl_->call("PUT", key_path(job, generation, key), value, "application/octet-stream");
}

std::string CoordinatorClient::store_get(std::string_view job, uint64_t generation, std::string_view key,
                                         std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + std::max(timeout, std::chrono::milliseconds::zero());
    for (;;) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        const auto wait = std::clamp(left, std::chrono::milliseconds(timeout.count() > 0 ? 1 : 0), kMaxParked);
        // Parked on a replica that goes away, it is asked of the next for what
        // is left of the wait.
        const std::string path = key_path(job, generation, key);
        const auto rewait = [&](std::chrono::milliseconds rest, std::string& target, std::string&) {
            target = fmt::format("{}?timeout_ms={}", path, rest.count());
        };
        try {
            return impl_->call("GET", fmt::format("{}?timeout_ms={}", path, wait.count()), {}, "", wait, true, rewait)
                .body;
        } catch (const Error& e) {
            // Past the server's longest park, but not past ours: ask again.
            if (e.code() != Errc::timeout || wait < kMaxParked || left <= kMaxParked) throw;
        }
    }
}

std::optional<std::string> CoordinatorClient::store_try_get(std::string_view job, uint64_t generation,
                                                            std::string_view key) {
    const std::string target = key_path(job, generation, key);
    try {
        return impl_->call("GET", target, {}, "").body;
    } catch (const Error& e) {
        // An absent key; not an unknown job, whose detail names the job.
        if (e.code() == Errc::not_found && std::string_view(e.what()).find(": no key '") != std::string_view::npos) {
            return std::nullopt;
        }
        throw;
    }
}

int64_t CoordinatorClient::store_add(std::string_view job, uint64_t generation, std::string_view key, int64_t delta) {
    const json::value b = coord::protocol::add_request(delta);
    return coord::protocol::add_reply_from_json(impl_->call_json("POST", key_path(job, generation, key) + "/add", &b),
                                                "coordinator reply to store add", coord::protocol::kReply);
}

StoreCasResult CoordinatorClient::store_compare_and_set(std::string_view job, uint64_t generation, std::string_view key,
                                                        const std::optional<std::string>& expected,
                                                        std::string_view desired) {
    const json::value b = coord::protocol::write(coord::protocol::StoreCasRequest{expected, std::string(desired)});
    return coord::protocol::read<StoreCasResult>(impl_->call_json("POST", key_path(job, generation, key) + "/cas", &b),
                                                 "coordinator reply to store cas", coord::protocol::kReply);
}

void CoordinatorClient::store_wait(std::string_view job, uint64_t generation, std::span<const std::string> keys,
                                   std::chrono::milliseconds timeout) {
    if (keys.empty()) return;
    const auto deadline = std::chrono::steady_clock::now() + std::max(timeout, std::chrono::milliseconds::zero());
    for (;;) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        const auto wait = std::clamp(left, std::chrono::milliseconds(timeout.count() > 0 ? 1 : 0), kMaxParked);
        const auto body_for = [&](std::chrono::milliseconds rest) {
            return json::serialize(coord::protocol::write(coord::protocol::StoreWaitRequest{
                std::vector<std::string>(keys.begin(), keys.end()), static_cast<uint64_t>(rest.count())}));
        };
        const auto rewait = [&](std::chrono::milliseconds rest, std::string&, std::string& body) {
            body = body_for(rest);
        };
        try {
            // Not keyed: a wait changes nothing, and a parked one keeps no answer.
            impl_->call("POST", store_path(job, generation) + "/wait", body_for(wait), "application/json", wait, false,
                        rewait);
            return;
        } catch (const Error& e) {
            if (e.code() != Errc::timeout || wait < kMaxParked || left <= kMaxParked) throw;
        }
    }
}

bool CoordinatorClient::store_remove(std::string_view job, uint64_t generation, std::string_view key) {
    return coord::protocol::remove_reply_from_json(impl_->call_json("DELETE", key_path(job, generation, key)),
                                                   "coordinator reply to store delete", coord::protocol::kReply);
}

std::string CoordinatorClient::register_dataset(std::string_view job, std::string_view plan_json) {
    boost::system::error_code ec;
    const json::value plan = json::parse(plan_json, ec);
    if (ec)
        throw Error(Errc::invalid_argument, fmt::format("register_dataset: the plan is not JSON ({})", ec.message()));
    return json::serialize(impl_->call_json("POST", job_path(job) + "/dataset", &plan));
}

ShardLease CoordinatorClient::next_shard(std::string_view job, std::string_view member) {
    const json::value b = coord::protocol::write(coord::protocol::MemberRequest{std::string(member)});
    return coord::protocol::read<ShardLease>(impl_->call_json("POST", job_path(job) + "/shards/next", &b),
                                             "coordinator reply to shards/next", coord::protocol::kReply);
}

ShardDone CoordinatorClient::shard_done(std::string_view job, std::string_view member, uint64_t lease) {
    const json::value b = coord::protocol::write(coord::protocol::DoneRequest{std::string(member), lease});
    return coord::protocol::read<ShardDone>(impl_->call_json("POST", job_path(job) + "/shards/done", &b),
                                            "coordinator reply to shards/done", coord::protocol::kReply);
}

ShardRelease CoordinatorClient::shard_release(std::string_view job, std::string_view member, uint64_t lease) {
    const json::value b = coord::protocol::write(coord::protocol::DoneRequest{std::string(member), lease});
    return coord::protocol::read<ShardRelease>(impl_->call_json("POST", job_path(job) + "/shards/release", &b),
                                               "coordinator reply to shards/release", coord::protocol::kReply);
}

namespace {

// The Store interface over one generation of one job's store on the
// coordinator. Errors read like the other stores': they name this store's
// address and the key.
class CoordinatorStore final : public Store {
public:
    CoordinatorStore(std::shared_ptr<CoordinatorClient> client, std::string job, uint64_t generation)
        : client_(std::move(client)),
          job_(std::move(job)),
          generation_(generation),
          address_(store_address(client_->url(), job_, generation_)) {}

    void set(std::string_view key, std::string_view value) override {
        detail::check_key(address_, key);
        detail::check_value(address_, key, value);
        client_->store_set(job_, generation_, key, value);
    }

    std::string get(std::string_view key, std::chrono::milliseconds timeout) override {
        detail::check_key(address_, key);
        if (timeout.count() <= 0) {
            if (auto v = client_->store_try_get(job_, generation_, key)) return std::move(*v);
            throw not_set(key, timeout);
        }
        try {
            return client_->store_get(job_, generation_, key, timeout);
        } catch (const Error& e) {
            if (e.code() == Errc::timeout) throw not_set(key, timeout);
            throw;
        }
    }

    std::optional<std::string> try_get(std::string_view key) override {
        detail::check_key(address_, key);
        return client_->store_try_get(job_, generation_, key);
    }

    int64_t add(std::string_view key, int64_t delta) override {
        detail::check_key(address_, key);
        return client_->store_add(job_, generation_, key, delta);
    }

    std::string compare_and_set(std::string_view key, const std::optional<std::string>& expected,
                                std::string_view desired) override {
        detail::check_key(address_, key);
        if (expected) detail::check_value(address_, key, *expected);
        detail::check_value(address_, key, desired);
        return client_->store_compare_and_set(job_, generation_, key, expected, desired).value.value_or("");
    }

    void wait(std::span<const std::string> keys, std::chrono::milliseconds timeout) override {
        for (const auto& k : keys) detail::check_key(address_, k);
        try {
            client_->store_wait(job_, generation_, keys, timeout);
        } catch (const Error& e) {
            if (e.code() != Errc::timeout) throw;
            throw Error(Errc::timeout, fmt::format("store {}: keys not set after {}: {}", address_,
                                                   detail::format_duration(timeout), detail::quote_keys(keys)));
        }
    }

    bool remove(std::string_view key) override {
        detail::check_key(address_, key);
        return client_->store_remove(job_, generation_, key);
    }

    std::string address() const override { return address_; }

    // The leader's host: the address a rank listens on is the one on the
    // route to it (CommOptions). Before the first call found it (etcd), the
    // first replica listed, else none.
    std::string host() const override {
        std::string leader = client_->leader_url();
        if (leader.empty() && !client_->url().starts_with("etcd://")) leader = client_->url();
        return host_of(leader.substr(0, leader.find(',')));
    }

private:
    Error not_set(std::string_view key, std::chrono::milliseconds timeout) const {
        return Error(Errc::timeout, fmt::format("store {}: key {} not set after {}", address_, detail::quote(key),
                                                detail::format_duration(timeout)));
    }

    std::shared_ptr<CoordinatorClient> client_;
    std::string job_;
    uint64_t generation_;
    std::string address_;
};

std::string percent_decode(std::string_view url, std::string_view text) {
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] != '%') {
            out += text[i];
            continue;
        }
        unsigned byte = 0;
        const char* first = text.data() + i + 1;
        if (i + 2 >= text.size() || std::from_chars(first, first + 2, byte, 16).ptr != first + 2) {
            throw Error(Errc::invalid_argument,
                        fmt::format("store URL '{}': '%' is not followed by two hex digits", url));
        }
        out += static_cast<char>(byte);
        i += 2;
    }
    return out;
}

}  // namespace

std::shared_ptr<Store> coordinator_store(std::shared_ptr<CoordinatorClient> client, std::string job,
                                         uint64_t generation) {
    if (!client) throw Error(Errc::invalid_argument, "coordinator_store: no client");
    if (job.empty()) throw Error(Errc::invalid_argument, "coordinator_store: empty job name");
    return std::make_shared<CoordinatorStore>(std::move(client), std::move(job), generation);
}

namespace {

// "JOB/GENERATION" at the end of a store URL's path.
std::pair<std::string, uint64_t> job_and_generation(std::string_view url, std::string_view path,
                                                    const std::function<Error(std::string_view)>& bad) {
    const auto gen_slash = path.rfind('/');
    if (gen_slash == std::string_view::npos || gen_slash == 0) throw bad("no generation");
    std::string job = percent_decode(url, path.substr(0, gen_slash));
    if (job.empty()) throw bad("no job");
    if (job.find('/') != std::string::npos) throw bad(fmt::format("job '{}' holds a '/'", job));
    const std::string_view gen_text = path.substr(gen_slash + 1);
    uint64_t generation = 0;
    const auto [gend, gec] = std::from_chars(gen_text.data(), gen_text.data() + gen_text.size(), generation);
    if (gen_text.empty() || gec != std::errc() || gend != gen_text.data() + gen_text.size()) {
        throw bad(fmt::format("generation '{}' is not a whole number", gen_text));
    }
    return {std::move(job), generation};
}

std::shared_ptr<Store> open_on(std::string coordinator, std::string job, uint64_t generation,
                               const StoreOptions& options) {
    CoordinatorClientOptions client_options;
    client_options.request_timeout = options.timeout;
    client_options.retry_deadline = options.timeout;
    auto client = std::make_shared<CoordinatorClient>(std::move(coordinator), std::move(client_options));
    return coordinator_store(std::move(client), std::move(job), generation);
}

}  // namespace

namespace {

// coordinator:// (scheme "http") and coordinator+https:// ("https").
std::shared_ptr<Store> open_replicas_url(std::string_view url, std::string_view rest, const StoreOptions& options,
                                         std::string_view scheme) {
    const std::function<Error(std::string_view)> bad = [&](std::string_view what) {
        return Error(Errc::invalid_argument,
                     fmt::format("store URL '{}': {} (expected coordinator{}://HOST:PORT[,HOST:PORT...]/JOB/GENERATION)",
                                 url, what, scheme == "https" ? "+https" : ""));
    };
    const auto slash = rest.find('/');
    if (slash == std::string_view::npos || slash == 0) throw bad("no job");
    // Several replicas: HOST:PORT,HOST:PORT.
    std::string coordinator;
    std::string_view authorities = rest.substr(0, slash);
    for (std::size_t n = 1;; ++n) {
        const auto comma = authorities.find(',');
        const std::string_view authority = authorities.substr(0, comma);
        if (authority.empty()) throw bad(fmt::format("replica {} is empty (a stray ','?)", n));
        const auto colon = authority.rfind(':');
        if (colon == std::string_view::npos || colon + 1 == authority.size()) {
            throw bad(fmt::format("no port in '{}'", authority));
        }
        unsigned port = 0;
        const std::string_view digits = authority.substr(colon + 1);
        const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
        if (ec != std::errc() || end != digits.data() + digits.size() || port == 0 || port > 65535) {
            throw bad(fmt::format("port '{}' is not a number from 1 to 65535", digits));
        }
        if (!coordinator.empty()) coordinator += ',';
        coordinator += fmt::format("{}://{}", scheme, authority);
        if (comma == std::string_view::npos) break;
        authorities = authorities.substr(comma + 1);
    }
    auto [job, generation] = job_and_generation(url, rest.substr(slash + 1), bad);
    return open_on(std::move(coordinator), std::move(job), generation, options);
}

std::shared_ptr<Store> open_coordinator_https_url(std::string_view url, std::string_view rest,
                                                  const StoreOptions& options) {
    return open_replicas_url(url, rest, options, "https");
}

}  // namespace

std::shared_ptr<Store> detail::open_coordinator_url(std::string_view url, std::string_view rest,
                                                    const StoreOptions& options) {
    return open_replicas_url(url, rest, options, "http");
}

std::shared_ptr<Store> detail::open_coordinator_etcd_url(std::string_view url, std::string_view rest,
                                                         const StoreOptions& options) {
    const std::function<Error(std::string_view)> bad = [&](std::string_view what) {
        return Error(Errc::invalid_argument,
                     fmt::format("store URL '{}': {} (expected coordinator+etcd://HOST:PORT[,HOST:PORT...]"
                                 "[/PREFIX]/JOB/GENERATION[?OPTIONS])",
                                 url, what));
    };
    std::string_view query;
    if (const auto q = rest.find('?'); q != std::string_view::npos) {
        query = rest.substr(q);
        rest = rest.substr(0, q);
    }
    const auto slash = rest.find('/');
    if (slash == std::string_view::npos || slash == 0) throw bad("no job");
    // The last two segments are the job and generation; before them, etcd's
    // endpoints and the replicas' prefix.
    const auto gen_slash = rest.rfind('/');
    const auto job_slash = gen_slash == 0 ? std::string_view::npos : rest.rfind('/', gen_slash - 1);
    if (job_slash == std::string_view::npos || job_slash < slash) throw bad("no job and generation after etcd's endpoints");
    auto [job, generation] = job_and_generation(url, rest.substr(job_slash + 1), bad);
    std::string etcd_url = "etcd://" + std::string(rest.substr(0, job_slash)) + std::string(query);
    return open_on(std::move(etcd_url), std::move(job), generation, options);
}

namespace {

// coordinator:// joins open_store's schemes when the library loads: the
// collectives, which open stores, sit below the coordinator and cannot name it.
[[maybe_unused]] const bool kCoordinatorSchemeRegistered = [] {
    register_store_scheme("coordinator", detail::open_coordinator_url);
    register_store_scheme("coordinator+etcd", detail::open_coordinator_etcd_url);
    register_store_scheme("coordinator+https", open_coordinator_https_url);
    return true;
}();

}  // namespace

}  // namespace cohort

// A program linked with the static library gets this object (and with it the
// registration above) only if it names something here: CMake's
// cohort::cohort_static target passes -u with this symbol for that. Not
// named cohort_*, so the shared library does not export it.
extern "C" {
extern const int libcohort_link_coordinator_store;
const int libcohort_link_coordinator_store = 1;
}
