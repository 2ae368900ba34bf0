// C ABI: the data path's shard reader (cohort/shard_reader.hpp).
#include "coordinator_json.hpp"
#include "handles.hpp"
#include "json_fields.hpp"
#include "membership_handle.hpp"

#include <cohort/shard_reader.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>

#include <fmt/format.h>

struct cohort_shard_reader {
    cohort::ShardReader impl;
    // The ids of the shards handed out and not yet done, for borrowed reads.
    std::map<uint64_t, std::string> ids;
};

using cohort::Errc;
using cohort::Error;
using namespace cohort::capi;

namespace {

// The options_json of the constructors; scheduler options only without a scheduler.
cohort::ShardReaderOptions reader_options(const char* text, cohort_transfer_scheduler* scheduler, const char* fn) {
    JsonFields f(text, fn, "options_json", true);
    cohort::ShardReaderOptions o;
    if (auto v = f.text("data_dir")) o.root = *v;
    if (auto v = f.text("workload")) o.workload = *v;
    if (auto v = f.integer("priority", INT32_MIN, INT32_MAX)) o.priority = static_cast<int>(*v);
    if (auto v = f.count("max_ahead", UINT32_MAX)) o.max_ahead = *v;
    if (auto v = f.flag("release_on_close")) o.release_on_close = *v;
    if (auto v = f.number("poll_interval_seconds"))
        o.poll_interval = milliseconds_arg(*v, fn, "options_json field \"poll_interval_seconds\"", false);
    if (scheduler != nullptr && (f.has("workers") || f.has("prefetch_depth"))) {
        throw Error(Errc::invalid_argument,
                    fmt::format("{}: options_json: \"workers\" and \"prefetch_depth\" are the options of a reader "
                                "without a scheduler; the scheduler given has its own",
                                fn));
    }
    if (auto v = f.count("workers", UINT32_MAX)) o.transfers.workers = *v;
    if (auto v = f.count("prefetch_depth", UINT32_MAX)) o.transfers.prefetch_depth = *v;
    f.finish();
    if (scheduler != nullptr) o.scheduler = &scheduler->impl;
    return o;
}

}  // namespace

extern "C" {

int cohort_shard_reader_from_membership(cohort_membership* membership, const cohort_shards* shards,
                                        cohort_transfer_scheduler* scheduler, const char* options_json,
                                        cohort_shard_reader** out) {
    return guard(__func__, [&](const char* fn) {
        require(membership, fn, "membership");
        require(shards, fn, "shards");
        require(out, fn, "out");
        *out = new cohort_shard_reader{
            cohort::ShardReader(membership->impl, shards->impl, reader_options(options_json, scheduler, fn)), {}};
    });
}

int cohort_shard_reader_create(cohort_coordinator_client* client, const char* job, const char* member,
                               const cohort_shards* shards, cohort_transfer_scheduler* scheduler,
                               const char* options_json, cohort_shard_reader** out) {
    return guard(__func__, [&](const char* fn) {
        require(client, fn, "client");
        require(job, fn, "job");
        require(member, fn, "member");
        require(shards, fn, "shards");
        require(out, fn, "out");
        *out = new cohort_shard_reader{cohort::ShardReader(cohort::lease_source(client->impl, job, member),
                                                           shards->impl, reader_options(options_json, scheduler, fn)),
                                       {}};
    });
}

void cohort_shard_reader_destroy(cohort_shard_reader* reader) {
    delete reader;
}

int cohort_shard_reader_next(cohort_shard_reader* reader, double timeout_seconds, int32_t* finished, uint64_t* lease,
                             uint64_t* shard, uint32_t* epoch, const char** shard_id, const uint8_t** data,
                             uint64_t* length) {
    return guard(__func__, [&](const char* fn) {
        require(reader, fn, "reader");
        require(finished, fn, "finished");
        const auto timeout = milliseconds_arg(timeout_seconds, fn, "timeout_seconds", true);
        std::optional<cohort::ShardData> got = reader->impl.next(timeout);
        if (!got) {
            *finished = 1;
            return;
        }
        const std::string& id = reader->ids[got->lease.lease] = got->lease.shard_id;
        *finished = 0;
        if (lease != nullptr) *lease = got->lease.lease;
        if (shard != nullptr) *shard = got->lease.shard;
        if (epoch != nullptr) *epoch = got->lease.epoch;
        if (shard_id != nullptr) *shard_id = id.c_str();
        if (data != nullptr) *data = reinterpret_cast<const uint8_t*>(got->bytes.data());
        if (length != nullptr) *length = got->bytes.size();
    });
}

int cohort_shard_reader_done(cohort_shard_reader* reader, uint64_t lease, int32_t* outcome) {
    return guard(__func__, [&](const char* fn) {
        require(reader, fn, "reader");
        const int32_t done = shard_outcome(reader->impl.done(lease));
        reader->ids.erase(lease);
        if (outcome != nullptr) *outcome = done;
    });
}

int cohort_shard_reader_stats(const cohort_shard_reader* reader, cohort_reader_stats* out) {
    return guard(__func__, [&](const char* fn) {
        require(reader, fn, "reader");
        require(out, fn, "out");
        const cohort::ShardReaderStats s = reader->impl.stats();
        const auto u32 = [](std::size_t v) {
            return static_cast<uint32_t>(std::min<std::size_t>(v, std::numeric_limits<uint32_t>::max()));
        };
        *out = cohort_reader_stats{s.data_wait_seconds, s.shards,        s.bytes,         s.prefetch_hits,
                                   s.prefetch_misses,   s.failed,        s.reported,      u32(s.ahead),
                                   u32(s.max_ahead),    u32(s.depth),    s.finished ? 1 : 0};
    });
}

int cohort_shards_plan_json(const cohort_shards* shards, uint32_t epochs, char** json, size_t* length) {
    return guard(__func__, [&](const char* fn) {
        require(shards, fn, "shards");
        require(json, fn, "json");
        give_text(cohort::dataset_plan_json(shards->impl, epochs), json, length);
    });
}

int cohort_membership_add_data_wait(cohort_membership* membership, double seconds) {
    return guard(__func__, [&](const char* fn) {
        require(membership, fn, "membership");
        membership->impl.add_data_wait(seconds);
    });
}

}  // extern "C"
