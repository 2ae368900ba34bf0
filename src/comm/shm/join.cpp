// Creating or mapping the host's segment and agreeing on the outcome.
#include "comm/shm/join.hpp"

#include "comm/shm/handoff.hpp"

#include "core/text.hpp"

#include <cohort/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <sstream>

namespace cohort::comm::shm {
using detail::format_size;

namespace {

std::chrono::milliseconds left(std::chrono::steady_clock::time_point deadline) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    return std::max(ms, std::chrono::milliseconds(1));
}

std::string get(Store& store, const std::string& key, int rank, int from,
                std::chrono::steady_clock::time_point deadline) {
    try {
        return store.get(key, left(deadline));
    } catch (const Error& e) {
        if (e.code() != Errc::timeout) throw;
        throw Error(Errc::timeout, fmt::format("rank {}: rank {} of this host never said whether it mapped the "
                                               "shared-memory segment (store key '{}'); did it die during set-up?",
                                               rank, from, key));
    }
}

// Receives and maps the segment the leader announced ("SOCKET\nBYTES") and
// checks it is the one the leader made for this group.
Segment attach(const std::string& announced, int leader, std::size_t bytes, std::size_t ranks, std::size_t slot,
               Deadline deadline) {
    std::istringstream text(announced);
    std::string name, size_text;
    std::getline(text, name);
    std::getline(text, size_text);
    std::size_t announced_bytes = 0;
    const auto parsed = std::from_chars(size_text.data(), size_text.data() + size_text.size(), announced_bytes);
    if (name.rfind("cohort-", 0) != 0 || parsed.ec != std::errc() || announced_bytes == 0)
        throw Error(Errc::unavailable,
                    fmt::format("rank {} announced a malformed segment '{}'", leader, detail::escape_bytes(announced)));
    if (announced_bytes != bytes)
        throw Error(Errc::unavailable, fmt::format("rank {}'s segment has {} but this rank's shm_size is {}: every "
                                                   "rank of a host must use the same shm_size (COHORT_SHM_SIZE)",
                                                   leader, format_size(announced_bytes), format_size(bytes)));
    Segment s = Segment::map(fetch_descriptor(name, leader, deadline), bytes);
    const auto* header = reinterpret_cast<const Header*>(s.data());
    if (header->magic != kSegmentMagic || header->ranks != ranks || header->slot_bytes != slot)
        throw Error(Errc::unavailable, fmt::format("rank {}'s segment does not hold what this rank expected ({} "
                                                   "ranks, slots of {})",
                                                   leader, ranks, format_size(slot)));
    return s;
}

}  // namespace

Joined join(Store& store, const std::vector<std::string>& hosts, int rank, std::size_t bytes, bool direct,
            std::chrono::microseconds spin, std::chrono::steady_clock::time_point deadline) {
    std::vector<int> local;
    for (int r = 0; r < static_cast<int>(hosts.size()); ++r)
        if (hosts[r] == hosts[rank]) local.push_back(r);
    if (local.size() < 2) return {};
    const int leader = local.front();
    const int me = static_cast<int>(std::find(local.begin(), local.end(), rank) - local.begin());
    const Layout l = layout(bytes, static_cast<int>(local.size()));

    // A rank with shared memory off still answers, so that the host's other
    // ranks learn it instead of waiting for it.
    Segment segment;
    std::string failed;
    if (bytes == 0) failed = "shared memory is off (shm_size 0, or COHORT_SHM_SIZE=0)";
    const std::string announce_key = fmt::format("shm/{}", leader);
    auto ready_key = [](int r) { return fmt::format("shm-ready/{}", r); };
    // A rank that took the segment answers "ok", or "ok direct" when it also
    // copies directly from every other rank of the host.
    const std::string ok = direct ? "ok direct" : "ok";
    if (rank == leader) {
        std::unique_ptr<Handoff> handoff;
        if (failed.empty() && l.slot == 0) {
            failed = fmt::format(
                "a segment of {} leaves less than {} per slot for {} ranks; raise shm_size "
                "(COHORT_SHM_SIZE)",
                format_size(bytes), format_size(kMinSlot), local.size());
        } else if (failed.empty()) {
            try {
                segment = Segment::create(bytes);
                auto* header = reinterpret_cast<Header*>(segment.data());
                header->magic = kSegmentMagic;
                header->ranks = static_cast<uint32_t>(local.size());
                header->slot_bytes = l.slot;
                handoff = std::make_unique<Handoff>();
            } catch (const Error& e) {
                failed = e.what();
            }
        }
        if (!failed.empty()) failed = fmt::format("rank {}: {}", rank, failed);
        store.set(announce_key, failed.empty() ? fmt::format("{}\n{}", handoff->name(), bytes) : "!" + failed);
        store.set(ready_key(rank), failed.empty() ? ok : failed);
        if (handoff) {
            // Until every other rank answered: those that got the segment,
            // and those that could not take it.
            std::vector<int> waiting(local.begin() + 1, local.end());
            handoff->serve(
                segment.fd(),
                [&] {
                    std::erase_if(waiting, [&](int r) { return store.try_get(ready_key(r)).has_value(); });
                    return waiting.empty();
                },
                deadline);
        }
        segment.close_fd();
    } else {
        const std::string announced = get(store, announce_key, rank, leader, deadline);
        if (!failed.empty()) {
            failed = fmt::format("rank {}: {}", rank, failed);
        } else if (!announced.empty() && announced[0] == '!') {
            failed = announced.substr(1);  // the leader's reason, naming the leader
        } else {
            try {
                segment = attach(announced, leader, bytes, local.size(), l.slot, deadline);
            } catch (const Error& e) {
                failed = fmt::format("rank {}: {}", rank, e.what());
            }
        }
        store.set(ready_key(rank), failed.empty() ? ok : failed);
    }

    // Everyone reads every answer, so every rank of the host decides alike.
    std::string why;
    bool everywhere = true;
    for (int r : local) {
        const std::string answer =
            r == rank ? (failed.empty() ? ok : failed) : get(store, ready_key(r), rank, r, deadline);
        if (answer != "ok" && answer != "ok direct" && why.empty()) why = answer;
        everywhere = everywhere && answer == "ok direct";
    }
    if (!why.empty()) return {nullptr, why};
    return {std::make_unique<Group>(std::move(segment), std::move(local), me, spin), "", everywhere};
}

}  // namespace cohort::comm::shm
