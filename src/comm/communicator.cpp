// The Communicator's operations: check the arguments on the caller's
// thread, then run the algorithm in issue order.
#include "comm/algorithms/algorithms.hpp"
#include "comm/communicator_impl.hpp"
#include "comm/reduce.hpp"
#include "comm/shm/collectives.hpp"

#include "core/deadline.hpp"
#include "core/text.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <cstring>
#include <limits>

namespace cohort {
namespace {

using comm::OpKind;
using comm::OpSignature;

constexpr std::string_view kAlgorithmNames[] = {"auto", "star", "ring", "doubling", "hierarchical", "shm"};
constexpr std::string_view kTransportNames[] = {"self", "shm", "direct", "tcp"};

std::size_t checked_bytes(const char* fn, std::size_t count, std::size_t element) {
    if (element != 0 && count > std::numeric_limits<std::size_t>::max() / element)
        throw Error(Errc::invalid_argument, fmt::format("{}: {} elements of {} bytes overflow", fn, count, element));
    return count * element;
}

// The argument checks of every operation, here once: the C layer passes
// its arguments through and names its function in front of these messages.
void check_pointer(const char* fn, const void* p, std::size_t bytes, const char* name) {
    if (p == nullptr && bytes > 0)
        throw Error(Errc::invalid_argument,
                    fmt::format("{}: {} must not be null when the call covers {} bytes", fn, name, bytes));
}

void check_types(const char* fn, DataType dtype, ReduceOp op) {
    dtype_from(static_cast<int32_t>(dtype), fn);
    reduce_op_from(static_cast<int32_t>(op), fn);
}

void check_algorithm(const char* fn, Algorithm a) {
    algorithm_from(static_cast<int32_t>(a), fn);
}

comm::Reduction reduction(const void* in, void* out, std::size_t count, DataType dtype, ReduceOp op, int ranks) {
    return {static_cast<const std::byte*>(in), static_cast<std::byte*>(out), count, dtype, op, dtype_size(dtype), ranks};
}

uint64_t fnv1a(uint64_t h, const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

// From this size a hierarchical all-reduce takes its host's steps through
// direct copies where every rank of the host has them, and through the
// shared-memory slots below it. The slots cost a rank a copy of its whole
// message in and of the others' parts out; a direct copy reads a peer's part
// once, straight from its buffer, but each one is a request and an answer
// over the socket. On 2 emulated hosts of 2 ranks (docs/benchmarks.md) the
// slots were 1.2-1.8x faster up to 256 KiB, the two even at 512 KiB, and
// direct copies 1.2-1.4x faster at 1 MiB and at 64 MiB.
constexpr std::size_t kHierarchicalDirectMin = std::size_t(1) << 20;

// OpSignature::cuts of a shared-memory all-reduce: 0 for the default cuts,
// else 24 bits of a hash of them, never 0.
uint32_t cuts_of(const CommTuning& t) {
    const CommTuning defaults;
    if (t.pipeline_chunk == defaults.pipeline_chunk && t.shm_single_round_max == defaults.shm_single_round_max)
        return 0;
    const uint64_t values[2] = {t.pipeline_chunk, t.shm_single_round_max};
    return static_cast<uint32_t>(fnv1a(1469598103934665603ull, values, sizeof values) % 0xFFFFFFu) + 1;
}

}  // namespace

const char* algorithm_name(Algorithm a) noexcept {
    const auto i = static_cast<std::size_t>(a);
    return i < std::size(kAlgorithmNames) ? kAlgorithmNames[i].data() : "unknown";
}

Algorithm algorithm_from(int64_t value, std::string_view where) {
    constexpr auto n = static_cast<int64_t>(std::size(kAlgorithmNames));
    if (value < 0 || value >= n) {
        throw Error(Errc::invalid_argument, fmt::format("{}: algorithm {} is not an algorithm (0 {} .. {} {})", where,
                                                        value, kAlgorithmNames[0], n - 1, kAlgorithmNames[n - 1]));
    }
    return static_cast<Algorithm>(value);
}

Algorithm parse_algorithm(std::string_view name) {
    for (std::size_t i = 0; i < std::size(kAlgorithmNames); ++i)
        if (name == kAlgorithmNames[i]) return static_cast<Algorithm>(i);
    if (name == "automatic") return Algorithm::automatic;
    std::string message = fmt::format("unknown algorithm '{}'", name);
    if (auto near = detail::closest_word(name, std::span<const std::string_view>(kAlgorithmNames)))
        message += fmt::format(" (did you mean '{}'?)", *near);
    throw Error(Errc::invalid_argument, message + "; expected auto, star, ring, doubling, hierarchical or shm");
}

const char* transport_name(Transport t) noexcept {
    const auto i = static_cast<std::size_t>(t);
    return i < std::size(kTransportNames) ? kTransportNames[i].data() : "unknown";
}

Algorithm Communicator::Impl::resolve(Algorithm requested, std::size_t bytes, const CommTuning& t) const {
    if (requested != Algorithm::automatic) return requested;
    if (shm_everyone) return Algorithm::shared_memory;
    if (bytes <= t.doubling_max) return Algorithm::doubling;
    if (multi_rank_host && host_count > 1 && bytes >= t.hierarchical_min) return Algorithm::hierarchical;
    return Algorithm::ring;
}

void Communicator::Impl::begin(OpSignature op, const CallOptions& call) {
    op.seq = ++seq;
    const auto timeout = timeout_of(call);
    engine->begin(op, detail::deadline_after(timeout), timeout);
    engine->set_reduce_piece(current_tuning().pipeline_chunk);
}

Communicator::Communicator(const CommOptions& options) : impl_(std::make_unique<Impl>(options)) {}
Communicator::Communicator(Communicator&&) noexcept = default;
Communicator& Communicator::operator=(Communicator&&) noexcept = default;
Communicator::~Communicator() = default;

int Communicator::rank() const { return impl_->options.rank; }
int Communicator::size() const { return impl_->options.size; }
const std::vector<std::string>& Communicator::hosts() const { return impl_->hosts; }
bool Communicator::broken() const { return impl_->engine->broken(); }
std::string Communicator::broken_reason() const { return impl_->engine->broken_reason(); }
std::vector<int> Communicator::dead_ranks() const { return impl_->engine->dead_ranks(); }
Algorithm Communicator::choose(std::size_t bytes) const {
    return impl_->resolve(Algorithm::automatic, bytes, impl_->current_tuning());
}
CommTuning Communicator::tuning() const { return impl_->current_tuning(); }
void Communicator::set_tuning(const CommTuning& tuning) {
    check_tuning(tuning);
    std::lock_guard lock(impl_->tuning_mutex);
    impl_->tuning = tuning;
}
std::shared_ptr<Store> Communicator::store() const { return impl_->scoped; }
const std::vector<Transport>& Communicator::transports() const { return impl_->transports; }

std::string Communicator::describe() const {
    const Impl& impl = *impl_;
    boost::json::object o;
    o["rank"] = impl.options.rank;
    o["size"] = impl.options.size;
    boost::json::array hosts, transports;
    for (const auto& h : impl.hosts) hosts.emplace_back(h);
    for (const auto t : impl.transports) transports.emplace_back(transport_name(t));
    o["hosts"] = std::move(hosts);
    o["transports"] = std::move(transports);
    if (impl.shm) {
        boost::json::array ranks;
        for (int r : impl.shm->ranks()) ranks.emplace_back(r);
        o["shm"] = boost::json::object{{"bytes", impl.shm->segment_bytes()},
                                       {"slot_bytes", impl.shm->slot_bytes()},
                                       {"ranks", std::move(ranks)},
                                       {"direct_everywhere", impl.shm_direct_everywhere}};
    } else {
        o["shm"] = nullptr;
    }
    if (impl.listening.port != 0)
        o["listen"] = boost::json::object{{"address", impl.listening.ip.to_string()},
                                          {"port", impl.listening.port},
                                          {"chosen_by", impl.listening.source}};
    else
        o["listen"] = nullptr;
    if (impl.tls_negotiated.empty())
        o["tls"] = nullptr;
    else
        o["tls"] = impl.tls_negotiated;
    if (impl.shm_unavailable.empty())
        o["shm_unavailable"] = nullptr;
    else
        o["shm_unavailable"] = impl.shm_unavailable;
    // Why each peer reached over TCP is not copied from directly, by rank.
    boost::json::object no_direct;
    for (std::size_t r = 0; r < impl.direct_unavailable.size(); ++r)
        if (impl.transports[r] == Transport::tcp && !impl.direct_unavailable[r].empty())
            no_direct[std::to_string(r)] = impl.direct_unavailable[r];
    if (no_direct.empty())
        o["direct_unavailable"] = nullptr;
    else
        o["direct_unavailable"] = std::move(no_direct);
    return boost::json::serialize(o);
}

// ---------------------------------------------------------------- allreduce

namespace {

std::function<void()> allreduce_op(Communicator::Impl& impl, const void* in, void* out, std::size_t count,
                                   DataType dtype, ReduceOp op, const CallOptions& call, uint64_t aux = 0) {
    const char* fn = "allreduce";
    check_types(fn, dtype, op);
    check_algorithm(fn, call.algorithm);
    const std::size_t bytes = checked_bytes(fn, count, dtype_size(dtype));
    check_pointer(fn, in, bytes, "in");
    check_pointer(fn, out, bytes, "out");
    const auto* a = static_cast<const std::byte*>(in);
    auto* b = static_cast<std::byte*>(out);
    if (bytes > 0 && a != b && a < b + bytes && b < a + bytes)
        throw Error(Errc::invalid_argument,
                    "allreduce: in and out overlap without being the same buffer (pass the "
                    "same pointer twice to reduce in place)");
    const CommTuning tuning = impl.current_tuning();
    const Algorithm algorithm = impl.resolve(call.algorithm, bytes, tuning);
    if (algorithm == Algorithm::shared_memory && !impl.shm_everyone && impl.options.size > 1)
        throw Error(Errc::invalid_argument,
                    fmt::format("allreduce: algorithm shm needs every rank in one host's shared memory, and {}; use "
                                "auto",
                                !impl.shm_unavailable.empty()
                                    ? "this host's ranks share none: " + impl.shm_unavailable
                                    : fmt::format("the ranks are on {} hosts", impl.host_count)));
    const bool through_shm =
        impl.shm && (algorithm == Algorithm::shared_memory ||
                     (algorithm == Algorithm::hierarchical &&
                      !(impl.shm_direct_everywhere && bytes >= kHierarchicalDirectMin)));
    const uint32_t cuts = through_shm ? cuts_of(tuning) : 0;
    return [&impl, in, out, count, dtype, op, call, algorithm, aux, tuning, cuts, through_shm] {
        OpSignature sig{OpKind::allreduce, static_cast<uint8_t>(dtype), static_cast<uint8_t>(op),
                        static_cast<uint8_t>(algorithm), 0, 0, count, aux, cuts};
        impl.begin(sig, call);
        auto& engine = *impl.engine;
        engine.set_reduce_piece(tuning.pipeline_chunk);
        auto r = reduction(in, out, count, dtype, op, impl.options.size);
        r.single_round = tuning.shm_single_round_max;
        r.chunk = tuning.pipeline_chunk;
        switch (algorithm) {
            case Algorithm::star: comm::allreduce_star(engine, r); break;
            case Algorithm::doubling: comm::allreduce_doubling(engine, r); break;
            case Algorithm::hierarchical:
                if (through_shm)
                    comm::shm::allreduce_hierarchical(*impl.shm, engine, impl.hosts, r);
                else
                    comm::allreduce_hierarchical(engine, impl.hosts, r);
                break;
            case Algorithm::shared_memory:
                if (impl.shm) {
                    comm::shm::allreduce(*impl.shm, engine, r);
                    break;
                }
                [[fallthrough]];  // one rank: nothing to share
            case Algorithm::ring:
            case Algorithm::automatic: {
                std::vector<int> members(impl.options.size);
                for (int i = 0; i < impl.options.size; ++i) members[i] = i;
                comm::allreduce_ring(engine, members, r);
                break;
            }
        }
    };
}

}  // namespace

void Communicator::allreduce(const void* in, void* out, std::size_t count, DataType dtype, ReduceOp op,
                             const CallOptions& call) {
    impl_->execute("allreduce", allreduce_op(*impl_, in, out, count, dtype, op, call));
}

void Communicator::allreduce(void* data, std::size_t count, DataType dtype, ReduceOp op, const CallOptions& call) {
    allreduce(data, data, count, dtype, op, call);
}

Work Communicator::allreduce_async(const void* in, void* out, std::size_t count, DataType dtype, ReduceOp op,
                                   const CallOptions& call) {
    return impl_->submit("allreduce", allreduce_op(*impl_, in, out, count, dtype, op, call));
}

void Communicator::allreduce_named(std::map<std::string, Tensor>& tensors, ReduceOp op, const CallOptions& call) {
    // The names, sizes and types hash into every fused operation's
    // signature, so ranks with different maps fail with a mismatch instead
    // of reducing unrelated bytes.
    uint64_t aux = 1469598103934665603ull;
    for (const auto& [name, t] : tensors) {
        dtype_from(static_cast<int32_t>(t.dtype), fmt::format("allreduce_named: tensor '{}'", name));
        if (t.data.size() % dtype_size(t.dtype) != 0)
            throw Error(Errc::invalid_argument,
                        fmt::format("allreduce_named: tensor '{}' has {} bytes, not a whole number of {} elements",
                                    name, t.data.size(), dtype_name(t.dtype)));
        const uint64_t meta[2] = {t.data.size(), static_cast<uint64_t>(t.dtype)};
        aux = fnv1a(fnv1a(aux, name.data(), name.size() + 1), meta, sizeof meta);
    }
    const std::size_t threshold = std::max<std::size_t>(impl_->current_tuning().fusion_threshold, 1);
    std::vector<std::byte> fusion;
    auto it = tensors.begin();
    while (it != tensors.end()) {
        const DataType dtype = it->second.dtype;
        if (it->second.data.size() >= threshold) {  // too big to be worth copying
            auto& t = it->second;
            impl_->execute("allreduce", allreduce_op(*impl_, t.data.data(), t.data.data(),
                                                     t.data.size() / dtype_size(dtype), dtype, op, call, aux));
            ++it;
            continue;
        }
        auto end = it;
        std::size_t bytes = 0;
        while (end != tensors.end() && end->second.dtype == dtype && end->second.data.size() < threshold &&
               bytes + end->second.data.size() <= threshold) {
            bytes += end->second.data.size();
            ++end;
        }
        fusion.resize(bytes);
        std::size_t at = 0;
        for (auto t = it; t != end; ++t) {
            if (!t->second.data.empty()) std::memcpy(fusion.data() + at, t->second.data.data(), t->second.data.size());
            at += t->second.data.size();
        }
        impl_->execute("allreduce", allreduce_op(*impl_, fusion.data(), fusion.data(), bytes / dtype_size(dtype), dtype,
                                                 op, call, aux));
        at = 0;
        for (auto t = it; t != end; ++t) {
            if (!t->second.data.empty()) std::memcpy(t->second.data.data(), fusion.data() + at, t->second.data.size());
            at += t->second.data.size();
        }
        it = end;
    }
}

// ------------------------------------------------------------ data movement

namespace {

std::function<void()> broadcast_op(Communicator::Impl& impl, void* data, std::size_t bytes, int root,
                                   const CallOptions& call) {
    check_pointer("broadcast", data, bytes, "data");
    if (root < 0 || root >= impl.options.size)
        throw Error(Errc::invalid_argument,
                    fmt::format("broadcast: root {} is outside 0..{} (the communicator has {} ranks)", root,
                                impl.options.size - 1, impl.options.size));
    return [&impl, data, bytes, root, call] {
        impl.begin(OpSignature{OpKind::broadcast, 0, 0, 0, static_cast<uint32_t>(root), 0, bytes, 0}, call);
        if (impl.shm_everyone)  // local ranks are the global ranks then
            comm::shm::broadcast(*impl.shm, *impl.engine, static_cast<std::byte*>(data), bytes, root);
        else
            comm::broadcast(*impl.engine, static_cast<std::byte*>(data), bytes, root,
                            std::min<std::size_t>(impl.options.max_frame, std::size_t(1) << 20));
    };
}

std::function<void()> barrier_op(Communicator::Impl& impl, const CallOptions& call) {
    return [&impl, call] {
        impl.begin(OpSignature{OpKind::barrier, 0, 0, 0, 0, 0, 0, 0}, call);
        if (impl.shm_everyone)
            comm::shm::barrier(*impl.shm, *impl.engine);
        else
            comm::barrier(*impl.engine);
    };
}

std::function<void()> allgather_op(Communicator::Impl& impl, const void* in, void* out, std::size_t bytes,
                                   const CallOptions& call) {
    const std::size_t total = checked_bytes("allgather", bytes, impl.options.size);
    check_pointer("allgather", in, bytes, "in");
    check_pointer("allgather", out, total, "out");
    return [&impl, in, out, bytes, call] {
        impl.begin(OpSignature{OpKind::allgather, 0, 0, 0, 0, 0, bytes, 0}, call);
        const auto* from = static_cast<const std::byte*>(in);
        auto* to = static_cast<std::byte*>(out);
        if (impl.shm_everyone)
            comm::shm::allgather(*impl.shm, *impl.engine, from, to, bytes);
        else
            comm::allgather_ring(*impl.engine, from, to, bytes);
    };
}

std::function<void()> reduce_scatter_op(Communicator::Impl& impl, const void* in, void* out, std::size_t count,
                                        DataType dtype, ReduceOp op, const CallOptions& call) {
    const char* fn = "reduce_scatter";
    check_types(fn, dtype, op);
    const std::size_t block = checked_bytes(fn, count, dtype_size(dtype));
    check_pointer(fn, in, checked_bytes(fn, block, impl.options.size), "in");
    check_pointer(fn, out, block, "out");
    return [&impl, in, out, count, dtype, op, call] {
        impl.begin(OpSignature{OpKind::reduce_scatter, static_cast<uint8_t>(dtype), static_cast<uint8_t>(op),
                               static_cast<uint8_t>(Algorithm::ring), 0, 0, count, 0},
                   call);
        const auto r = reduction(in, out, count, dtype, op, impl.options.size);
        if (impl.shm_everyone)
            comm::shm::reduce_scatter(*impl.shm, *impl.engine, r);
        else
            comm::reduce_scatter_ring(*impl.engine, r);
    };
}

}  // namespace

void Communicator::broadcast(void* data, std::size_t bytes, int root, const CallOptions& call) {
    impl_->execute("broadcast", broadcast_op(*impl_, data, bytes, root, call));
}
void Communicator::barrier(const CallOptions& call) { impl_->execute("barrier", barrier_op(*impl_, call)); }
void Communicator::allgather(const void* in, void* out, std::size_t bytes, const CallOptions& call) {
    impl_->execute("allgather", allgather_op(*impl_, in, out, bytes, call));
}
void Communicator::reduce_scatter(const void* in, void* out, std::size_t count, DataType dtype, ReduceOp op,
                                  const CallOptions& call) {
    impl_->execute("reduce_scatter", reduce_scatter_op(*impl_, in, out, count, dtype, op, call));
}
Work Communicator::broadcast_async(void* data, std::size_t bytes, int root, const CallOptions& call) {
    return impl_->submit("broadcast", broadcast_op(*impl_, data, bytes, root, call));
}
Work Communicator::barrier_async(const CallOptions& call) { return impl_->submit("barrier", barrier_op(*impl_, call)); }
Work Communicator::allgather_async(const void* in, void* out, std::size_t bytes, const CallOptions& call) {
    return impl_->submit("allgather", allgather_op(*impl_, in, out, bytes, call));
}
Work Communicator::reduce_scatter_async(const void* in, void* out, std::size_t count, DataType dtype, ReduceOp op,
                                        const CallOptions& call) {
    return impl_->submit("reduce_scatter", reduce_scatter_op(*impl_, in, out, count, dtype, op, call));
}

void Communicator::close() { impl_->close(); }

void Communicator::abort(std::string reason) { abort_handle().abort(std::move(reason)); }

Communicator::AbortHandle Communicator::abort_handle() const {
    AbortHandle handle;
    handle.signal_ = impl_->abort_signal;
    return handle;
}

void Communicator::AbortHandle::abort(std::string reason) const {
    if (!signal_) return;
    std::lock_guard lock(signal_->mutex);
    if (signal_->engine != nullptr) signal_->engine->abort(std::move(reason));
}

}  // namespace cohort
