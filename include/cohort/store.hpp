// A key-value store ranks use to find each other before they can talk
// directly: the bootstrap of a Communicator. Four implementations share
// this interface: tcp:// (rank 0 hosts a small server, like torch's env://),
// file:// (a folder every rank can reach), coordinator:// (a job's
// generation on a cohort-coordinator) and etcd:// (the keys under a prefix
// of an etcd cluster).
#pragma once

#include <cohort/export.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace cohort {

// Keys are UTF-8 text of 1..1024 bytes; values are bytes (at most 16 MiB).
// Every call is bounded: a store that cannot be reached or answer within the
// store's timeout throws Error(unavailable) or Error(timeout) naming the
// store's address and the key.
class COHORT_API Store {
public:
    virtual ~Store();

    virtual void set(std::string_view key, std::string_view value) = 0;
    // Waits up to `timeout` for the key to exist, then returns its value;
    // Error(timeout) names the key that never appeared.
    virtual std::string get(std::string_view key, std::chrono::milliseconds timeout) = 0;
    // The value now, or nothing.
    virtual std::optional<std::string> try_get(std::string_view key) = 0;
    // Adds `delta` to the integer stored at `key` (absent counts as 0) and
    // returns the new value. Error(invalid_argument) if the value is not an
    // integer.
    virtual int64_t add(std::string_view key, int64_t delta) = 0;
    // Stores `desired` if the current value equals `expected` (nullopt: the
    // key is absent). Returns the value after the call, so the caller knows
    // whether it won.
    virtual std::string compare_and_set(std::string_view key, const std::optional<std::string>& expected,
                                        std::string_view desired) = 0;
    // Waits until every key exists; Error(timeout) lists the missing ones.
    virtual void wait(std::span<const std::string> keys, std::chrono::milliseconds timeout) = 0;
    // True if the key existed.
    virtual bool remove(std::string_view key) = 0;
    // "tcp://10.0.0.1:29500", "file:///shared/rdzv": for messages.
    virtual std::string address() const = 0;
    // The host the store is reached at, without brackets or port
    // ("10.0.0.1", "coord.example", "::1"), or "" for a store with no network
    // address (file://). A communicator listens on the interface that routes
    // there. The default reads the authority of address() as
    // SCHEME://HOST[:PORT][/...]; a store whose address is not a URL of that
    // shape overrides it.
    virtual std::string host() const;
};

struct StoreOptions {
    // Bounds each call that talks to the store (connects included).
    std::chrono::milliseconds timeout{std::chrono::seconds(60)};
    // tcp:// only: host the server at the URL's address in this process
    // (rank 0 does), then connect to it like everyone else.
    bool host = false;
};

// "tcp://HOST:PORT" (IPv6 as [ADDR]:PORT), "file:///DIR",
// "coordinator://HOST:PORT/JOB/GENERATION",
// "etcd://HOST:PORT[,HOST:PORT...]/PREFIX[?OPTIONS]" (docs/launch-env.md)
// or any scheme registered with
// register_store_scheme. Error(invalid_argument) for a malformed URL or an
// unknown scheme; Error(unavailable) when the server cannot be bound or
// reached within the timeout.
COHORT_API std::shared_ptr<Store> open_store(std::string_view url, const StoreOptions& options = {});

// Opens the store a URL names; `rest` is what follows "SCHEME://" and `url`
// the whole URL, for messages.
using StoreOpener =
    std::function<std::shared_ptr<Store>(std::string_view url, std::string_view rest, const StoreOptions& options)>;
// Makes open_store answer "SCHEME://..." URLs with `opener`. The collectives
// know no store beyond tcp:// and file://: the layers above them register
// theirs (the coordinator client registers coordinator:// when the library
// loads). Registering a scheme again replaces its opener; tcp and file
// cannot be replaced (Error(invalid_argument)). Thread-safe.
COHORT_API void register_store_scheme(std::string scheme, StoreOpener opener);

// A view of `base` whose keys all start with `prefix` (for example
// "job/7/gen/3/"), so jobs and generations never see each other's keys.
COHORT_API std::shared_ptr<Store> scoped_store(std::shared_ptr<Store> base, std::string prefix);

// The tcp:// store's server, for programs that host it themselves (a
// launcher, a test). It serves until destroyed.
class COHORT_API StoreServer {
public:
    // host "" binds every interface; port 0 picks a free port.
    StoreServer(const std::string& host, uint16_t port);
    StoreServer(StoreServer&&) noexcept;
    StoreServer& operator=(StoreServer&&) noexcept;
    ~StoreServer();

    uint16_t port() const;
    std::string url() const;  // tcp://HOST:PORT a client can use

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace cohort
