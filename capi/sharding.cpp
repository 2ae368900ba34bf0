// C ABI: datasets, shards, plans and epoch order.
#include "handles.hpp"

#include <algorithm>

#include <fmt/format.h>

using cohort::capi::guard;
using cohort::capi::require;
using cohort::Errc;
using cohort::Error;

namespace {

void check_shard(const cohort::ShardSet& shards, uint64_t shard, const char* function) {
    if (shard >= shards.size())
        throw Error(Errc::out_of_range, fmt::format("{}: shard {} is past the end ({} shards)", function, shard, shards.size()));
}

void check_member(const cohort::ShardPlan& plan, uint32_t member, const char* function) {
    if (member >= plan.member_count()) {
        throw Error(Errc::out_of_range,
                    fmt::format("{}: member {} is past the end ({} members)", function, member, plan.member_count()));
    }
}

// Copies `values` into the caller's buffer: the full count always,
// BUFFER_TOO_SMALL if it does not fit; (NULL, 0) just asks for the count.
template <typename T>
void write_out(std::span<const T> values, T* out, size_t capacity, size_t* count, const char* function) {
    require(count, function, "count");
    if (out == nullptr && capacity != 0)
        throw Error(Errc::invalid_argument, fmt::format("{}: the output buffer is NULL but capacity is {}", function, capacity));
    *count = values.size();
    if (capacity < values.size()) {
        throw Error(Errc::buffer_too_small,
                    fmt::format("{}: the buffer holds {} entries but {} are needed", function, capacity, values.size()));
    }
    if (values.empty()) return;
    std::copy(values.begin(), values.end(), out);
}

}  // namespace

extern "C" {

int cohort_dataset_create(cohort_dataset** out) {
    return guard(__func__, [&](const char* fn) {
        require(out, fn, "out");
        *out = new cohort_dataset{};
    });
}

int cohort_dataset_load_file(const char* path, cohort_dataset** out) {
    return guard(__func__, [&](const char* fn) {
        require(path, fn, "path");
        require(out, fn, "out");
        *out = new cohort_dataset{cohort::Dataset::from_file(path)};
    });
}

int cohort_dataset_load_string(const char* text, size_t length, int32_t format, const char* source_name,
                               cohort_dataset** out) {
    return guard(__func__, [&](const char* fn) {
        require(text, fn, "text");
        require(out, fn, "out");
        if (format < COHORT_FORMAT_AUTO || format > COHORT_FORMAT_LISTING)
            throw Error(Errc::invalid_argument, fmt::format("{}: unknown format {}", fn, format));
        *out = new cohort_dataset{cohort::Dataset::from_string({text, length}, static_cast<cohort::Format>(format),
                                                               source_name ? source_name : "<string>")};
    });
}

void cohort_dataset_destroy(cohort_dataset* dataset) { delete dataset; }

int cohort_dataset_add_file(cohort_dataset* dataset, const char* path, uint64_t bytes, uint64_t records) {
    return guard(__func__, [&](const char* fn) {
        require(dataset, fn, "dataset");
        require(path, fn, "path");
        cohort::DataFile file{path, bytes, std::nullopt};
        if (records != COHORT_RECORDS_UNKNOWN) file.records = records;
        dataset->impl.add(std::move(file));
    });
}

int cohort_dataset_file_count(const cohort_dataset* dataset, uint32_t* out) {
    return guard(__func__, [&](const char* fn) {
        require(dataset, fn, "dataset");
        require(out, fn, "out");
        *out = static_cast<uint32_t>(dataset->impl.size());
    });
}

int cohort_dataset_file(const cohort_dataset* dataset, uint32_t index, const char** path, uint64_t* bytes,
                        uint64_t* records) {
    return guard(__func__, [&](const char* fn) {
        require(dataset, fn, "dataset");
        if (index >= dataset->impl.size()) {
            throw Error(Errc::out_of_range,
                        fmt::format("{}: file index {} is past the end ({} files)", fn, index, dataset->impl.size()));
        }
        const cohort::DataFile& file = dataset->impl.files()[index];
        if (path) *path = file.path.c_str();
        if (bytes) *bytes = file.bytes;
        if (records) *records = file.records.value_or(COHORT_RECORDS_UNKNOWN);
    });
}

int cohort_dataset_total_bytes(const cohort_dataset* dataset, uint64_t* out) {
    return guard(__func__, [&](const char* fn) {
        require(dataset, fn, "dataset");
        require(out, fn, "out");
        *out = dataset->impl.total_bytes();
    });
}

int cohort_shards_split(const cohort_dataset* dataset, uint64_t shard_bytes, uint64_t shard_count,
                        cohort_shards** out) {
    return guard(__func__, [&](const char* fn) {
        require(dataset, fn, "dataset");
        require(out, fn, "out");
        *out = new cohort_shards{cohort::ShardSet::split(dataset->impl, {shard_bytes, shard_count})};
    });
}

void cohort_shards_destroy(cohort_shards* shards) { delete shards; }

int cohort_shards_count(const cohort_shards* shards, uint64_t* out) {
    return guard(__func__, [&](const char* fn) {
        require(shards, fn, "shards");
        require(out, fn, "out");
        *out = shards->impl.size();
    });
}

int cohort_shards_info(const cohort_shards* shards, uint64_t shard, uint64_t* bytes, uint64_t* records,
                       uint32_t* segments) {
    return guard(__func__, [&](const char* fn) {
        require(shards, fn, "shards");
        check_shard(shards->impl, shard, fn);
        if (bytes) *bytes = shards->impl.bytes(shard);
        if (records) *records = shards->impl.records(shard).value_or(COHORT_RECORDS_UNKNOWN);
        if (segments) *segments = static_cast<uint32_t>(shards->impl.segments(shard).size());
    });
}

int cohort_shards_segment(const cohort_shards* shards, uint64_t shard, uint32_t segment, uint32_t* file,
                          uint64_t* begin, uint64_t* end) {
    return guard(__func__, [&](const char* fn) {
        require(shards, fn, "shards");
        check_shard(shards->impl, shard, fn);
        const auto segments = shards->impl.segments(shard);
        if (segment >= segments.size()) {
            throw Error(Errc::out_of_range, fmt::format("{}: segment {} is past the end (shard {} has {})", fn,
                                                        segment, shard, segments.size()));
        }
        if (file) *file = segments[segment].file;
        if (begin) *begin = segments[segment].begin;
        if (end) *end = segments[segment].end;
    });
}

int cohort_plan_options_create(cohort_plan_options** out) {
    return guard(__func__, [&](const char* fn) {
        require(out, fn, "out");
        *out = new cohort_plan_options{};
    });
}

void cohort_plan_options_destroy(cohort_plan_options* options) { delete options; }

int cohort_plan_options_set_strategy(cohort_plan_options* options, int32_t strategy) {
    return guard(__func__, [&](const char* fn) {
        require(options, fn, "options");
        if (strategy < COHORT_STRATEGY_ROUND_ROBIN || strategy > COHORT_STRATEGY_CUSTOM)
            throw Error(Errc::invalid_argument, fmt::format("{}: unknown strategy {}", fn, strategy));
        options->impl.strategy = static_cast<cohort::Strategy>(strategy);
    });
}

int cohort_plan_options_set_replication(cohort_plan_options* options, uint32_t replication) {
    return guard(__func__, [&](const char* fn) {
        require(options, fn, "options");
        if (replication == 0) throw Error(Errc::invalid_argument, fmt::format("{}: replication must be at least 1", fn));
        options->impl.replication = replication;
    });
}

int cohort_plan_options_set_seed(cohort_plan_options* options, uint64_t seed) {
    return guard(__func__, [&](const char* fn) {
        require(options, fn, "options");
        options->impl.seed = seed;
    });
}

int cohort_plan_options_set_roles(cohort_plan_options* options, uint32_t role_mask) {
    return guard(__func__, [&](const char* fn) {
        require(options, fn, "options");
        if ((role_mask & ~COHORT_ROLES_ALL) != 0)
            throw Error(Errc::invalid_argument, fmt::format("{}: role mask {:#x} has unknown role bits", fn, role_mask));
        options->impl.roles = role_mask == 0 ? cohort::kTrainingRoles : role_mask;
    });
}

int cohort_plan_options_set_load_slack(cohort_plan_options* options, double slack) {
    return guard(__func__, [&](const char* fn) {
        require(options, fn, "options");
        if (!(slack >= 0.0 && slack <= 100.0))
            throw Error(Errc::invalid_argument, fmt::format("{}: slack must be in [0, 100], got {}", fn, slack));
        options->impl.load_slack = slack;
    });
}

int cohort_plan_options_set_weights(cohort_plan_options* options, double locality, double load, double hardware) {
    return guard(__func__, [&](const char* fn) {
        require(options, fn, "options");
        for (double w : {locality, load, hardware}) {
            if (!(w >= 0.0 && w <= 1e12))
                throw Error(Errc::invalid_argument, fmt::format("{}: weights must be finite and non-negative, got {}", fn, w));
        }
        options->impl.locality_weight = locality;
        options->impl.load_weight = load;
        options->impl.hardware_weight = hardware;
    });
}

int cohort_plan_options_add_locality(cohort_plan_options* options, const char* node_id, const char* file_path,
                                     double score) {
    return guard(__func__, [&](const char* fn) {
        require(options, fn, "options");
        require(node_id, fn, "node_id");
        require(file_path, fn, "file_path");
        if (!(score >= 0.0 && score <= 1.0))
            throw Error(Errc::invalid_argument, fmt::format("{}: score must be in [0, 1], got {}", fn, score));
        options->impl.locality.push_back({node_id, file_path, score});
    });
}

int cohort_plan_options_add_locality_file(cohort_plan_options* options, const char* path) {
    return guard(__func__, [&](const char* fn) {
        require(options, fn, "options");
        require(path, fn, "path");
        auto entries = cohort::load_locality(path);
        options->impl.locality.insert(options->impl.locality.end(), entries.begin(), entries.end());
    });
}

int cohort_plan_options_set_custom(cohort_plan_options* options, cohort_assign_fn assign, void* user_data) {
    return guard(__func__, [&](const char* fn) {
        require(options, fn, "options");
        if (assign == nullptr) {
            options->impl.custom = nullptr;
            return;
        }
        options->impl.custom = [assign, user_data](uint64_t shard, uint32_t replica, std::span<const uint32_t> taken,
                                                   uint32_t member_count) -> uint32_t {
            const int64_t member = assign(user_data, shard, replica, taken.data(),
                                          static_cast<uint32_t>(taken.size()), member_count);
            if (member < 0) {
                throw Error(Errc::callback, fmt::format("the custom assignment callback returned {} for shard {} "
                                                        "replica {}",
                                                        member, shard, replica));
            }
            return member > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(member);
        };
    });
}

int cohort_shard_plan_create(const cohort_shards* shards, const cohort_topology* members,
                             const cohort_plan_options* options, cohort_shard_plan** out) {
    return guard(__func__, [&](const char* fn) {
        require(shards, fn, "shards");
        require(members, fn, "members");
        require(out, fn, "out");
        static const cohort::PlanOptions defaults;
        *out = new cohort_shard_plan{
            cohort::ShardPlan::create(shards->impl, members->impl, options ? options->impl : defaults)};
    });
}

int cohort_shard_plan_replan(const cohort_shard_plan* plan, const cohort_topology* new_members,
                             const cohort_plan_options* options, cohort_shard_plan** out) {
    return guard(__func__, [&](const char* fn) {
        require(plan, fn, "plan");
        require(new_members, fn, "new_members");
        require(out, fn, "out");
        *out = new cohort_shard_plan{options ? plan->impl.replan(new_members->impl, options->impl)
                                             : plan->impl.replan(new_members->impl)};
    });
}

void cohort_shard_plan_destroy(cohort_shard_plan* plan) { delete plan; }

int cohort_shard_plan_shard_count(const cohort_shard_plan* plan, uint64_t* out) {
    return guard(__func__, [&](const char* fn) {
        require(plan, fn, "plan");
        require(out, fn, "out");
        *out = plan->impl.shard_count();
    });
}

int cohort_shard_plan_replication(const cohort_shard_plan* plan, uint32_t* out) {
    return guard(__func__, [&](const char* fn) {
        require(plan, fn, "plan");
        require(out, fn, "out");
        *out = plan->impl.replication();
    });
}

int cohort_shard_plan_member_count(const cohort_shard_plan* plan, uint32_t* out) {
    return guard(__func__, [&](const char* fn) {
        require(plan, fn, "plan");
        require(out, fn, "out");
        *out = plan->impl.member_count();
    });
}

int cohort_shard_plan_member_id(const cohort_shard_plan* plan, uint32_t member, const char** id) {
    return guard(__func__, [&](const char* fn) {
        require(plan, fn, "plan");
        require(id, fn, "id");
        check_member(plan->impl, member, fn);
        *id = plan->impl.members()[member].id.c_str();
    });
}

int cohort_shard_plan_owner(const cohort_shard_plan* plan, uint64_t shard, uint32_t replica, uint32_t* member) {
    return guard(__func__, [&](const char* fn) {
        require(plan, fn, "plan");
        require(member, fn, "member");
        check_shard(plan->impl.shards(), shard, fn);
        if (replica >= plan->impl.replication()) {
            throw Error(Errc::out_of_range, fmt::format("{}: replica {} is past the end (replication {})", fn,
                                                        replica, plan->impl.replication()));
        }
        *member = plan->impl.owner(shard, replica);
    });
}

int cohort_shard_plan_member_load(const cohort_shard_plan* plan, uint32_t member, uint64_t* load) {
    return guard(__func__, [&](const char* fn) {
        require(plan, fn, "plan");
        require(load, fn, "load");
        check_member(plan->impl, member, fn);
        *load = plan->impl.load(member);
    });
}

int cohort_shard_plan_member_shards(const cohort_shard_plan* plan, uint32_t member, uint64_t* shards,
                                    size_t capacity, size_t* count) {
    return guard(__func__, [&](const char* fn) {
        require(plan, fn, "plan");
        check_member(plan->impl, member, fn);
        write_out(plan->impl.member_shards(member), shards, capacity, count, fn);
    });
}

int cohort_shard_plan_moved(const cohort_shard_plan* plan, uint64_t* moved) {
    return guard(__func__, [&](const char* fn) {
        require(plan, fn, "plan");
        require(moved, fn, "moved");
        *moved = plan->impl.moved();
    });
}

int cohort_shard_plan_to_json(const cohort_shard_plan* plan, char** json, size_t* length) {
    return guard(__func__, [&](const char* fn) {
        require(plan, fn, "plan");
        require(json, fn, "json");
        const std::string text = plan->impl.to_json();
        *json = cohort::capi::copy_out(text);
        if (length) *length = text.size();
    });
}

int cohort_epoch_order(uint64_t n, uint64_t seed, uint64_t epoch, int32_t rank, int32_t world_size, uint32_t flags,
                       uint64_t* indices, size_t capacity, size_t* count) {
    return guard(__func__, [&](const char* fn) {
        if ((flags & ~(COHORT_EPOCH_SHUFFLE | COHORT_EPOCH_DROP_LAST)) != 0)
            throw Error(Errc::invalid_argument, fmt::format("{}: unknown flags {:#x}", fn, flags));
        if (world_size < 1) throw Error(Errc::invalid_argument, "world_size must be at least 1");
        if (rank < 0 || rank >= world_size)
            throw Error(Errc::invalid_argument,
                        fmt::format("rank {} is out of range for world_size {}", rank, world_size));
        const auto order =
            cohort::epoch_order(n, seed, epoch, static_cast<uint32_t>(rank), static_cast<uint32_t>(world_size),
                                {(flags & COHORT_EPOCH_SHUFFLE) != 0, (flags & COHORT_EPOCH_DROP_LAST) != 0});
        write_out(std::span<const uint64_t>(order), indices, capacity, count, fn);
    });
}

}  // extern "C"
