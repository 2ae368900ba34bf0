// Reading an etcd:// URL into the client's config and the store's prefix,
// and registering the scheme with open_store.
#include "etcd/etcd_url.hpp"
#include "etcd/store.hpp"

#include "core/text.hpp"

#include <cohort/error.hpp>

#include <fmt/format.h>

namespace cohort::etcd {

namespace {

constexpr std::string_view kGrammar = "etcd://HOST:PORT[,HOST:PORT...]/PREFIX[?OPTION=VALUE&...]";

}  // namespace

StoreUrl parse_store_url(std::string_view url) {
    static constexpr std::string_view kExtra[] = {"ttl"};
    EtcdUrl parsed = parse_etcd_url(url, "store URL", kGrammar, kExtra);
    auto bad = [&](std::string_view what) {
        throw Error(Errc::invalid_argument, fmt::format("store URL '{}': {} (expected {})", url, what, kGrammar));
    };
    if (parsed.path.empty()) {
        bad("no key prefix after the endpoints (name the job and generation: /cohort/JOB/GEN)");
    }
    StoreUrl out;
    out.config = std::move(parsed.config);
    out.prefix = "/" + parsed.path;
    for (const auto& [name, value] : parsed.options) {
        if (name == "ttl") {
            const auto seconds = detail::parse_duration(value);
            if (!seconds || *seconds < 2 || *seconds > 86400) {
                bad(fmt::format("ttl={} is not a duration from 2 s to 1 day (write ttl=30 or ttl=2m)", value));
            }
            out.ttl = std::chrono::seconds(static_cast<int64_t>(*seconds));
        }
    }
    out.address = fmt::format("etcd://{}{}", parsed.hosts, out.prefix);
    return out;
}

}  // namespace cohort::etcd

namespace cohort {

namespace {

// etcd:// joins open_store's schemes when the library loads: comm, which
// opens stores, sits below etcd and cannot name it.
[[maybe_unused]] const bool kEtcdSchemeRegistered = [] {
    register_store_scheme("etcd", [](std::string_view url, std::string_view, const StoreOptions& options) {
        return etcd::open_store(etcd::parse_store_url(url), options);
    });
    return true;
}();

}  // namespace

}  // namespace cohort

// Named by cohort::cohort_static's link options so a static link keeps this
// object and its registration (as libcohort_link_coordinator_store does).
extern "C" {
extern const int libcohort_link_etcd_store;
const int libcohort_link_etcd_store = 1;
}
