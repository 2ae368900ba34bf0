#include "coordinator/replication/etcd_log.hpp"

#include "coordinator/journal/record.hpp"
#include "coordinator/state/json_parse.hpp"
#include "core/text.hpp"
#include "etcd/txn.hpp"
#include "etcd/wire.hpp"

#include <cohort/error.hpp>

#include <boost/json.hpp>

#include <charconv>
#include <map>

#include <fmt/format.h>

namespace cohort::coord::replication {

namespace json = boost::json;

namespace {

// Key order is number order: etcd sorts keys as bytes.
std::string padded(uint64_t n, int width) {
    return fmt::format("{:0{}}", n, width);
}

std::optional<uint64_t> number_of(std::string_view text) {
    uint64_t n = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
    return n;
}

struct SnapshotHead {
    uint64_t seq = 0;
    uint32_t chunks = 0;
};

SnapshotHead read_head(const etcd::KeyValue& kv) {
    const std::string where = fmt::format("etcd key {}", detail::quote(kv.key));
    try {
        const json::value v = parse_json(kv.value);
        const json::object& o = v.as_object();
        SnapshotHead head;
        head.seq = o.at("seq").to_number<uint64_t>();
        head.chunks = o.at("chunks").to_number<uint32_t>();
        if (head.chunks == 0) throw Error(Errc::parse, "chunks is 0");
        return head;
    } catch (const std::exception& e) {
        throw Error(Errc::parse, fmt::format("{}: not a snapshot head ({}); it should be "
                                             "{{\"seq\":S,\"chunks\":N}}, written by the leader",
                                             where, e.what()));
    }
}

}  // namespace

std::string EtcdLayout::log_key(uint64_t seq) const {
    return log_prefix() + padded(seq, 20);
}

std::string EtcdLayout::snapshot_chunk(uint64_t seq, uint32_t chunk) const {
    return snapshot_prefix() + padded(seq, 20) + "/" + padded(chunk, 6);
}

EtcdLayout layout_for(std::string_view prefix) {
    while (prefix.size() > 1 && prefix.back() == '/') prefix.remove_suffix(1);
    if (prefix.empty() || prefix.front() != '/' || prefix == "/") {
        throw Error(Errc::invalid_argument,
                    fmt::format("etcd prefix {}: give a key prefix that starts with '/', such as "
                                "/cohort/coordinator",
                                detail::quote(prefix)));
    }
    return EtcdLayout{std::string(prefix)};
}

uint64_t log_seq(const EtcdLayout& layout, std::string_view key) {
    const std::string p = layout.log_prefix();
    if (key.size() != p.size() + 20 || key.substr(0, p.size()) != p) return 0;
    return number_of(key.substr(p.size())).value_or(0);
}

std::string log_value(uint64_t first, const std::vector<Event>& events) {
    std::string out;
    for (std::size_t i = 0; i < events.size(); ++i) out += journal::journal_line(first + i, events[i]);
    return out;
}

bool apply_entry(const EtcdLayout& layout, const etcd::KeyValue& kv, CoordinatorState& state, uint64_t& seq) {
    const uint64_t first = log_seq(layout, kv.key);
    if (first == 0) return true;  // not a log entry
    if (first > seq + 1) return false;
    const std::string where = fmt::format("etcd key {}", detail::quote(kv.key));
    std::string_view rest = kv.value;
    uint64_t expected = first;
    while (!rest.empty()) {
        const auto nl = rest.find('\n');
        if (nl == std::string_view::npos) {
            throw Error(Errc::parse, fmt::format("{}: the last record has no newline; the entry is damaged "
                                                 "(only the leader writes these keys)",
                                                 where));
        }
        const std::string_view line = rest.substr(0, nl);
        rest.remove_prefix(nl + 1);
        journal::JournalEntry entry;
        try {
            entry = journal::read_journal_line(line);
        } catch (const Error& e) {
            throw Error(Errc::parse, fmt::format("{}: {}", where, e.what()));
        }
        if (entry.seq != expected) {
            throw Error(Errc::parse, fmt::format("{}: event {} where {} was due; the entry is damaged", where,
                                                 entry.seq, expected));
        }
        ++expected;
        if (entry.seq <= seq) continue;  // a retried write, seen already
        try {
            state.apply(entry.event);
        } catch (const Error& e) {
            throw Error(Errc::parse, fmt::format("{}: event {} does not fit the state: {}", where, entry.seq, e.what()));
        }
        seq = entry.seq;
    }
    return true;
}

LoadedState load_state(etcd::EtcdClient& client, const EtcdLayout& layout, etcd::Clock::time_point deadline) {
    const etcd::RangeResult all = client.get_prefix(layout.prefix + "/", deadline);
    LoadedState out;
    out.revision = all.revision;
    const etcd::KeyValue* head_kv = nullptr;
    for (const etcd::KeyValue& kv : all.kvs) {
        if (kv.key == layout.snapshot_head()) head_kv = &kv;
    }
    if (head_kv != nullptr) {
        const SnapshotHead head = read_head(*head_kv);
        const std::string chunk_prefix = layout.snapshot_prefix() + padded(head.seq, 20) + "/";
        std::map<uint32_t, const std::string*> chunks;
        for (const etcd::KeyValue& kv : all.kvs) {
            if (kv.key.size() != chunk_prefix.size() + 6 || kv.key.compare(0, chunk_prefix.size(), chunk_prefix) != 0) {
                continue;
            }
            if (const auto i = number_of(std::string_view(kv.key).substr(chunk_prefix.size()))) {
                chunks[static_cast<uint32_t>(*i)] = &kv.value;
            }
        }
        std::string text;
        for (uint32_t i = 0; i < head.chunks; ++i) {
            const auto it = chunks.find(i);
            if (it == chunks.end()) {
                throw Error(Errc::parse, fmt::format("etcd key {} is missing: snapshot {} has {} chunks; the "
                                                     "snapshot is damaged (only the leader writes these keys)",
                                                     detail::quote(layout.snapshot_chunk(head.seq, i)), head.seq,
                                                     head.chunks));
            }
            text += *it->second;
        }
        if (!text.empty() && text.back() == '\n') text.pop_back();
        try {
            journal::SnapshotRecord record = journal::read_snapshot(text);
            if (record.seq != head.seq) {
                throw Error(Errc::parse, fmt::format("it holds event {}, the head says {}", record.seq, head.seq));
            }
            out.state = CoordinatorState::from_snapshot(record.state);
        } catch (const Error& e) {
            throw Error(Errc::parse, fmt::format("etcd snapshot under {}: {}", detail::quote(chunk_prefix), e.what()));
        }
        out.seq = head.seq;
    }
    for (const etcd::KeyValue& kv : all.kvs) {
        if (log_seq(layout, kv.key) == 0) continue;
        if (!apply_entry(layout, kv, out.state, out.seq)) {
            throw Error(Errc::parse, fmt::format("etcd key {}: the log jumps from event {} to {}; events are "
                                                 "missing (were keys under {} deleted by hand?)",
                                                 detail::quote(kv.key), out.seq, log_seq(layout, kv.key),
                                                 detail::quote(layout.prefix)));
        }
    }
    return out;
}

bool catch_up(etcd::EtcdClient& client, const EtcdLayout& layout, CoordinatorState& state, uint64_t& seq,
              etcd::Clock::time_point deadline) {
    // One transaction reads both, so a snapshot that replaced the entries
    // after `seq` cannot slip between the two reads.
    etcd::Txn read;
    read.then_get(layout.snapshot_head()).then_get_range(layout.log_key(seq + 1), etcd::prefix_end(layout.log_prefix()));
    const etcd::TxnResult result = client.txn(read, deadline, etcd::Replay::safe);
    if (result.responses.size() != 2) {
        throw Error(Errc::parse, "etcd answered a read of the coordinator's log without its two results");
    }
    if (!result.responses[0].kvs.empty() && read_head(result.responses[0].kvs.front()).seq > seq) return false;
    for (const etcd::KeyValue& kv : result.responses[1].kvs) {
        if (!apply_entry(layout, kv, state, seq)) return false;
    }
    return true;
}

}  // namespace cohort::coord::replication
