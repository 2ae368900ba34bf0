// CoordinatorState's key-value store commands: cohort::Store's semantics
// (store.hpp) over the store of a job's current generation. Reads are not
// events; every write is a store_set or store_removed event.
#include "comm/store/backends.hpp"
#include "coordinator/state/state.hpp"

#include <fmt/format.h>

namespace cohort::coord {

namespace {

void count(const Job& job, StoreOp op) {
    ++job.store_ops[static_cast<std::size_t>(op)];
}

}  // namespace

std::string CoordinatorState::store_address(const Job& j) const {
    return fmt::format("coordinator job '{}' generation {}", j.name(), j.generation());
}

const Job& CoordinatorState::store_job(std::string_view name, uint64_t generation) const {
    const Job& j = job(name);
    if (j.generation() == 0) {
        throw Error(Errc::mismatch, fmt::format("store of job '{}': no world has formed yet; the store opens with "
                                                "generation 1",
                                                name));
    }
    if (generation < j.generation()) {
        throw Error(Errc::mismatch, fmt::format("store of job '{}': generation {} is over; the job is at generation {}",
                                                name, generation, j.generation()));
    }
    if (generation > j.generation()) {
        throw Error(Errc::mismatch, fmt::format("store of job '{}': generation {} has not formed; the job is at "
                                                "generation {}",
                                                name, generation, j.generation()));
    }
    return j;
}

const Job& CoordinatorState::store_call(std::string_view name, uint64_t generation, std::string_view key, StoreOp op,
                                        std::optional<std::string_view> value) const {
    const Job& j = store_job(name, generation);
    const std::string address = store_address(j);
    detail::check_key(address, key);
    if (value) detail::check_value(address, key, *value);
    count(j, op);
    return j;
}

void CoordinatorState::store_set(std::string_view job_name, uint64_t generation, std::string_view key,
                                 std::string_view value, double now) {
    const double t = time_of(now);
    const Job& j = store_call(job_name, generation, key, StoreOp::set, value);
    emit(event::StoreSet{j.name(), t, generation, std::string(key), std::string(value)});
}

std::optional<std::string> CoordinatorState::store_get(std::string_view job_name, uint64_t generation,
                                                       std::string_view key) const {
    const Job& j = store_call(job_name, generation, key, StoreOp::get);
    const KeyValueStore::Entry* entry = j.store().find(key);
    if (entry == nullptr) return std::nullopt;
    return entry->value;
}

int64_t CoordinatorState::store_add(std::string_view job_name, uint64_t generation, std::string_view key, int64_t delta,
                                    double now) {
    const double t = time_of(now);
    const Job& j = store_job(job_name, generation);
    const std::string address = store_address(j);
    detail::check_key(address, key);
    const int64_t sum = j.store().sum_after_add(address, key, delta);
    count(j, StoreOp::add);
    emit(event::StoreSet{j.name(), t, generation, std::string(key), std::to_string(sum)});
    return sum;
}

std::optional<std::string> CoordinatorState::store_compare_and_set(std::string_view job_name, uint64_t generation,
                                                                   std::string_view key,
                                                                   const std::optional<std::string>& expected,
                                                                   std::string_view desired, double now) {
    const double t = time_of(now);
    const Job& j = store_call(job_name, generation, key, StoreOp::compare_and_set, desired);
    const KeyValueStore::Entry* entry = j.store().find(key);
    const bool matches = expected ? entry != nullptr && entry->value == *expected : entry == nullptr;
    if (!matches) {
        if (entry == nullptr) return std::nullopt;
        return entry->value;
    }
    emit(event::StoreSet{j.name(), t, generation, std::string(key), std::string(desired)});
    return std::string(desired);
}

bool CoordinatorState::store_remove(std::string_view job_name, uint64_t generation, std::string_view key, double now) {
    const double t = time_of(now);
    const Job& j = store_call(job_name, generation, key, StoreOp::remove);
    if (j.store().find(key) == nullptr) return false;
    emit(event::StoreRemoved{j.name(), t, generation, std::string(key)});
    return true;
}

std::vector<std::string> CoordinatorState::store_missing(std::string_view job_name, uint64_t generation,
                                                         std::span<const std::string> keys) const {
    const Job& j = store_job(job_name, generation);
    const std::string address = store_address(j);
    for (const auto& key : keys) detail::check_key(address, key);
    count(j, StoreOp::wait);
    return j.store().missing(keys);
}

uint64_t CoordinatorState::store_version(std::string_view job_name, uint64_t generation) const {
    return store_job(job_name, generation).store().version();
}

}  // namespace cohort::coord
