// CommOptions: its environment defaults (the one place cohort reads them)
// and the checks of its ranges.
#include <cohort/communicator.hpp>
#include <cohort/error.hpp>

#include "core/deadline.hpp"
#include "core/text.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <string>

namespace cohort {

namespace {

constexpr int64_t kMaxSpinUs = 1000000;
constexpr std::size_t kDefaultShmSize = std::size_t(8) << 20;
constexpr std::size_t kMaxShmSize = std::size_t(64) << 30;

const char* env(const char* name) {
    const char* value = std::getenv(name);
    return value != nullptr && *value != '\0' ? value : nullptr;
}

std::chrono::microseconds spin_from_env(const char* text) {
    const std::string_view value(text);
    int64_t us = -1;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), us);
    if (ec != std::errc() || end != value.data() + value.size() || us < 0 || us > kMaxSpinUs) {
        throw Error(Errc::invalid_argument,
                    fmt::format("COHORT_SPIN_US='{}': expected a whole number of microseconds from 0 to {} (the "
                                "default is 50); unset it or fix it",
                                value, kMaxSpinUs));
    }
    return std::chrono::microseconds(us);
}

}  // namespace

CommOptions with_env_defaults(CommOptions options) {
    if (options.secret.empty())
        if (const char* s = env("COHORT_SECRET")) options.secret = s;
    if (options.tls_ca.empty())
        if (const char* f = env("COHORT_TLS_CA")) options.tls_ca = f;
    if (options.tls_cert.empty())
        if (const char* f = env("COHORT_TLS_CERT")) options.tls_cert = f;
    if (options.tls_key.empty())
        if (const char* f = env("COHORT_TLS_KEY")) options.tls_key = f;
    if (options.address.empty())
        if (const char* a = env("COHORT_SOCKET_ADDR")) options.address = a;
    if (options.ifname.empty())
        if (const char* i = env("COHORT_SOCKET_IFNAME")) options.ifname = i;
    if (const char* d = env("COHORT_DIRECT_COPY")) {
        const std::string_view value(d);
        if (value == "0")
            options.direct_copy = false;
        else if (value != "1")
            throw Error(Errc::invalid_argument,
                        fmt::format("COHORT_DIRECT_COPY='{}': expected 0 (copies between processes of one machine "
                                    "go over TCP) or 1 (the default: direct copies where both sides may)",
                                    value));
    }
    if (!options.shm_size) {
        options.shm_size = kDefaultShmSize;
        if (const char* text = env("COHORT_SHM_SIZE")) {
            const auto bytes = detail::parse_size(text);
            if (!bytes || *bytes > kMaxShmSize)
                throw Error(Errc::invalid_argument,
                            fmt::format("COHORT_SHM_SIZE='{}': expected the bytes of a host's shared-memory segment, "
                                        "a number with an optional K, M or G suffix up to 64G (0 turns shared "
                                        "memory off; the default is 8M)",
                                        text));
            options.shm_size = static_cast<std::size_t>(*bytes);
        }
    }
    if (!options.spin) options.spin = spin_from_env(env("COHORT_SPIN_US") ? env("COHORT_SPIN_US") : "50");
    return options;
}

void check_tuning(const CommTuning& t) {
    auto bad = [](std::string what) { throw Error(Errc::invalid_argument, "communicator: tuning." + what); };
    constexpr std::size_t kMax = std::size_t(64) << 20;
    // The fusion threshold keeps its old words: programs match on them.
    if (t.fusion_threshold == 0) throw Error(Errc::invalid_argument, "communicator: fusion_threshold must be at least 1 byte");
    if (t.pipeline_chunk < 4096 || t.pipeline_chunk > kMax || t.pipeline_chunk % 8 != 0)
        bad(fmt::format("pipeline_chunk {} must be a multiple of 8 from 4096 to {} bytes (4 KiB..64 MiB)",
                        t.pipeline_chunk, kMax));
    if (t.shm_single_round_max > kMax)
        bad(fmt::format("shm_single_round_max {} is above 64 MiB ({} bytes)", t.shm_single_round_max, kMax));
}

void check_options(const CommOptions& o, bool world) {
    auto bad = [](std::string what) { throw Error(Errc::invalid_argument, "communicator: " + what); };
    if (world) {
        if (o.size < 1) bad(fmt::format("size must be at least 1, not {}", o.size));
        if (o.rank < 0 || o.rank >= o.size) bad(fmt::format("rank {} is outside 0..{}", o.rank, o.size - 1));
        if (!o.store && o.store_url.empty() && o.size > 1)
            bad("no store: give a store URL (tcp://HOST:PORT or file:///DIR) or a Store");
    }
    if (o.job_id.empty() || o.job_id.size() > 256)
        bad(fmt::format("the job id must have 1 to 256 bytes, not {}", o.job_id.size()));
    const auto longest = kLongestTimeout.count();
    if (o.timeout.count() <= 0 || o.timeout > kLongestTimeout)
        bad(fmt::format("the operation timeout must be positive and at most a year ({} ms), not {} ms", longest,
                        o.timeout.count()));
    if (o.connect_timeout.count() <= 0 || o.connect_timeout > kLongestTimeout)
        bad(fmt::format("the connect timeout must be positive and at most a year ({} ms), not {} ms", longest,
                        o.connect_timeout.count()));
    check_tuning(o.tuning);
    const int tls_files = !o.tls_ca.empty() + !o.tls_cert.empty() + !o.tls_key.empty();
    if (tls_files != 0 && tls_files != 3)
        bad(fmt::format("TLS needs tls_ca, tls_cert and tls_key together ($COHORT_TLS_CA, $COHORT_TLS_CERT, "
                        "$COHORT_TLS_KEY); {} is not set",
                        o.tls_ca.empty() ? "tls_ca" : o.tls_cert.empty() ? "tls_cert" : "tls_key"));
    if (o.max_frame < 4096 || o.max_frame > (std::size_t(256) << 20))
        bad(fmt::format("max_frame {} is outside 4 KiB..256 MiB (4096..268435456)", o.max_frame));
    if (o.socket_buffer > (std::size_t(1) << 30)) bad(fmt::format("socket_buffer {} is above 1 GiB", o.socket_buffer));
    if (o.shm_size && *o.shm_size > kMaxShmSize)
        bad(fmt::format("shm_size {} is above 64 GiB (0 turns shared memory off)", *o.shm_size));
    if (o.spin && (o.spin->count() < 0 || o.spin->count() > kMaxSpinUs))
        bad(fmt::format("spin {} us is outside 0..{} us", o.spin->count(), kMaxSpinUs));
}

}  // namespace cohort
