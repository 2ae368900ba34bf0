// C ABI: communicators, their collectives and work handles. Arguments are
// checked here, so messages name the C function and parameter; the C++
// Communicator checks them again and does the work.
#include "handles.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <string>

using cohort::Errc;
using cohort::Error;
using cohort::capi::guard;
using cohort::capi::require;

static_assert(COHORT_DTYPE_UINT8 == static_cast<int32_t>(cohort::DataType::uint8));
static_assert(COHORT_DTYPE_BFLOAT16 == static_cast<int32_t>(cohort::DataType::bfloat16));
static_assert(COHORT_OP_AVG == static_cast<int32_t>(cohort::ReduceOp::avg));
static_assert(COHORT_ALGO_HIERARCHICAL == static_cast<int32_t>(cohort::Algorithm::hierarchical));
static_assert(COHORT_ALGO_SHM == static_cast<int32_t>(cohort::Algorithm::shared_memory));
static_assert(COHORT_TRANSPORT_TCP == static_cast<int32_t>(cohort::Transport::tcp));
static_assert(COHORT_TRANSPORT_SHM == static_cast<int32_t>(cohort::Transport::shared_memory));

namespace {

[[noreturn]] void bad(std::string message) {
    throw Error(Errc::invalid_argument, std::move(message));
}

// The operations' arguments are checked by the C++ layer, once
// (cohort::dtype_from and the Communicator's own checks); the C layer only
// converts what C spells differently and names its function in front of
// the C++ layer's words.
template <class Call>
decltype(auto) named(const char* fn, Call&& call) {
    try {
        return call();
    } catch (const Error& e) {
        throw Error(e.code(), fmt::format("{}: {}", fn, e.what()));
    }
}

// Sets one field through `set` on a copy of the options, which the C++
// layer checks (cohort::check_options, the same words as a Communicator
// uses); the options change only when the copy passes.
template <class Set>
void set_checked(cohort_comm_options* options, const char* fn, Set&& set) {
    require(options, fn, "options");
    cohort::CommOptions copy = options->impl;
    set(copy);
    try {
        cohort::check_options(copy, false);
    } catch (const Error& e) {
        throw Error(e.code(), fmt::format("{}: {}", fn, e.what()));
    }
    options->impl = std::move(copy);
}

cohort::CallOptions call_options(double timeout_seconds, const char* fn,
                                 cohort::Algorithm algorithm = cohort::Algorithm::automatic) {
    cohort::CallOptions call;
    call.algorithm = algorithm;
    call.timeout = cohort::capi::milliseconds_arg(timeout_seconds, fn, "timeout_seconds", true);
    return call;
}

std::size_t to_size(uint64_t value, const char* fn, const char* what) {
    if constexpr (sizeof(std::size_t) < sizeof(uint64_t)) {
        if (value > std::numeric_limits<std::size_t>::max())
            bad(fmt::format("{}: {} {} does not fit in this platform's size_t", fn, what, value));
    }
    return static_cast<std::size_t>(value);
}

// count * element bytes, or INVALID_ARGUMENT if that overflows.
std::size_t byte_count(uint64_t count, std::size_t element, const char* fn, const char* what) {
    if (element != 0 && count > std::numeric_limits<std::size_t>::max() / element)
        bad(fmt::format("{}: {} {} times {} bytes overflows", fn, what, count, element));
    return static_cast<std::size_t>(count) * element;
}

void require_comm(const cohort_comm* comm, const char* fn) {
    require(comm, fn, "comm");
}

// The arguments of an all-reduce, checked.
struct Allreduce {
    std::size_t count;
    cohort::DataType dtype;
    cohort::ReduceOp op;
    cohort::CallOptions call;
};

Allreduce check_allreduce(const cohort_comm* comm, uint64_t count, int32_t dtype, int32_t op, int32_t algorithm,
                          double timeout_seconds, const char* fn) {
    require_comm(comm, fn);
    return Allreduce{to_size(count, fn, "count"), cohort::dtype_from(dtype, fn), cohort::reduce_op_from(op, fn),
                     call_options(timeout_seconds, fn, cohort::algorithm_from(algorithm, fn))};
}

struct Broadcast {
    std::size_t bytes;
    cohort::CallOptions call;
};

Broadcast check_broadcast(const cohort_comm* comm, uint64_t bytes, double timeout_seconds, const char* fn) {
    require_comm(comm, fn);
    return Broadcast{to_size(bytes, fn, "bytes"), call_options(timeout_seconds, fn)};
}

struct Allgather {
    std::size_t bytes;
    cohort::CallOptions call;
};

Allgather check_allgather(const cohort_comm* comm, uint64_t bytes, double timeout_seconds, const char* fn) {
    require_comm(comm, fn);
    return Allgather{to_size(bytes, fn, "bytes"), call_options(timeout_seconds, fn)};
}

Allreduce check_reduce_scatter(const cohort_comm* comm, uint64_t count, int32_t dtype, int32_t op,
                               double timeout_seconds, const char* fn) {
    require_comm(comm, fn);
    return Allreduce{to_size(count, fn, "count"), cohort::dtype_from(dtype, fn), cohort::reduce_op_from(op, fn),
                     call_options(timeout_seconds, fn)};
}

void set_text(std::string& field, const char* value, const char* default_value) {
    field = (value == nullptr || value[0] == '\0') ? default_value : value;
}

void give_work(cohort::Work work, cohort_work** out) {
    *out = new cohort_work{std::move(work)};
}

}  // namespace

extern "C" {

// ------------------------------------------------------------------ names

const char* cohort_dtype_name(int32_t dtype) {
    return cohort::dtype_name(static_cast<cohort::DataType>(dtype));
}

const char* cohort_reduce_op_name(int32_t op) {
    return cohort::reduce_op_name(static_cast<cohort::ReduceOp>(op));
}

const char* cohort_algorithm_name(int32_t algorithm) {
    return cohort::algorithm_name(static_cast<cohort::Algorithm>(algorithm));
}

const char* cohort_transport_name(int32_t transport) {
    return cohort::transport_name(static_cast<cohort::Transport>(transport));
}

size_t cohort_dtype_size(int32_t dtype) {
    return cohort::dtype_size(static_cast<cohort::DataType>(dtype));
}

int cohort_dtype_parse(const char* name, int32_t* dtype) {
    return guard(__func__, [&](const char* fn) {
        require(name, fn, "name");
        require(dtype, fn, "dtype");
        try {
            *dtype = static_cast<int32_t>(cohort::parse_dtype(name));
        } catch (const Error& e) {
            throw Error(e.code(), fmt::format("{}: {}", fn, e.what()));
        }
    });
}

int cohort_reduce_op_parse(const char* name, int32_t* op) {
    return guard(__func__, [&](const char* fn) {
        require(name, fn, "name");
        require(op, fn, "op");
        try {
            *op = static_cast<int32_t>(cohort::parse_reduce_op(name));
        } catch (const Error& e) {
            throw Error(e.code(), fmt::format("{}: {}", fn, e.what()));
        }
    });
}

int cohort_algorithm_parse(const char* name, int32_t* algorithm) {
    return guard(__func__, [&](const char* fn) {
        require(name, fn, "name");
        require(algorithm, fn, "algorithm");
        try {
            *algorithm = static_cast<int32_t>(cohort::parse_algorithm(name));
        } catch (const Error& e) {
            throw Error(e.code(), fmt::format("{}: {}", fn, e.what()));
        }
    });
}

// ---------------------------------------------------------------- options

int cohort_comm_options_create(cohort_comm_options** out) {
    return guard(__func__, [&](const char* fn) {
        require(out, fn, "out");
        *out = new cohort_comm_options{};
    });
}

void cohort_comm_options_destroy(cohort_comm_options* options) {
    delete options;
}

int cohort_comm_options_set_store(cohort_comm_options* options, const char* url) {
    return guard(__func__, [&](const char* fn) {
        require(options, fn, "options");
        set_text(options->impl.store_url, url, "");
    });
}

int cohort_comm_options_set_job_id(cohort_comm_options* options, const char* job_id) {
    return guard(__func__, [&](const char* fn) {
        set_checked(options, fn, [&](cohort::CommOptions& o) { set_text(o.job_id, job_id, "cohort"); });
    });
}

int cohort_comm_options_set_generation(cohort_comm_options* options, uint64_t generation) {
    return guard(__func__, [&](const char* fn) {
        require(options, fn, "options");
        options->impl.generation = generation;
    });
}

int cohort_comm_options_set_timeout(cohort_comm_options* options, double timeout_seconds) {
    return guard(__func__, [&](const char* fn) {
        require(options, fn, "options");
        options->impl.timeout = cohort::capi::milliseconds_arg(timeout_seconds, fn, "timeout_seconds", false);
    });
}

int cohort_comm_options_set_connect_timeout(cohort_comm_options* options, double timeout_seconds) {
    return guard(__func__, [&](const char* fn) {
        require(options, fn, "options");
        options->impl.connect_timeout = cohort::capi::milliseconds_arg(timeout_seconds, fn, "timeout_seconds", false);
    });
}

int cohort_comm_options_set_secret(cohort_comm_options* options, const char* secret, size_t length) {
    return guard(__func__, [&](const char* fn) {
        require(options, fn, "options");
        if (secret == nullptr && length > 0) bad(fmt::format("{}: secret must not be NULL (length is {})", fn, length));
        options->impl.secret = length == 0 ? std::string() : std::string(secret, length);
    });
}

int cohort_comm_options_set_tls(cohort_comm_options* options, const char* ca_file, const char* cert_file,
                                const char* key_file) {
    return guard(__func__, [&](const char* fn) {
        require(options, fn, "options");
        auto given = [](const char* p) { return p != nullptr && p[0] != '\0'; };
        const int n = given(ca_file) + given(cert_file) + given(key_file);
        if (n != 0 && n != 3)
            bad(fmt::format("{}: give ca_file, cert_file and key_file together, or none ({} is missing)", fn,
                            !given(ca_file) ? "ca_file" : !given(cert_file) ? "cert_file" : "key_file"));
        set_text(options->impl.tls_ca, ca_file, "");
        set_text(options->impl.tls_cert, cert_file, "");
        set_text(options->impl.tls_key, key_file, "");
    });
}

int cohort_comm_options_set_address(cohort_comm_options* options, const char* address) {
    return guard(__func__, [&](const char* fn) {
        require(options, fn, "options");
        set_text(options->impl.address, address, "");
    });
}

int cohort_comm_options_set_ifname(cohort_comm_options* options, const char* ifname) {
    return guard(__func__, [&](const char* fn) {
        require(options, fn, "options");
        set_text(options->impl.ifname, ifname, "");
    });
}

int cohort_comm_options_set_host_label(cohort_comm_options* options, const char* label) {
    return guard(__func__, [&](const char* fn) {
        require(options, fn, "options");
        set_text(options->impl.host_label, label, "");
    });
}

int cohort_comm_options_set_fusion_threshold(cohort_comm_options* options, uint64_t bytes) {
    return guard(__func__, [&](const char* fn) {
        set_checked(options, fn, [&](cohort::CommOptions& o) { o.tuning.fusion_threshold = to_size(bytes, fn, "bytes"); });
    });
}

int cohort_comm_options_set_socket_buffer(cohort_comm_options* options, uint64_t bytes) {
    return guard(__func__, [&](const char* fn) {
        set_checked(options, fn, [&](cohort::CommOptions& o) { o.socket_buffer = to_size(bytes, fn, "bytes"); });
    });
}

int cohort_comm_options_set_max_frame(cohort_comm_options* options, uint64_t bytes) {
    return guard(__func__, [&](const char* fn) {
        set_checked(options, fn, [&](cohort::CommOptions& o) { o.max_frame = to_size(bytes, fn, "bytes"); });
    });
}

int cohort_comm_options_set_shm_size(cohort_comm_options* options, uint64_t bytes) {
    return guard(__func__, [&](const char* fn) {
        set_checked(options, fn, [&](cohort::CommOptions& o) { o.shm_size = to_size(bytes, fn, "bytes"); });
    });
}

// ----------------------------------------------------------- communicator

int cohort_comm_create(int32_t rank, int32_t size, const cohort_comm_options* options, cohort_comm** out) {
    return guard(__func__, [&](const char* fn) {
        require(out, fn, "out");
        // The Communicator checks rank, size and the rest.
        cohort::CommOptions o = options ? options->impl : cohort::CommOptions{};
        o.rank = rank;
        o.size = size;
        *out = new cohort_comm{cohort::Communicator(o)};
    });
}

void cohort_comm_destroy(cohort_comm* comm) {
    delete comm;
}

int cohort_comm_close(cohort_comm* comm) {
    return guard(__func__, [&](const char* fn) {
        require_comm(comm, fn);
        comm->impl.close();
    });
}

int cohort_comm_abort(cohort_comm* comm, const char* reason) {
    return guard(__func__, [&](const char* fn) {
        require_comm(comm, fn);
        comm->impl.abort(reason != nullptr ? reason : "cohort_comm_abort was called");
    });
}

int cohort_comm_rank(const cohort_comm* comm, int32_t* rank) {
    return guard(__func__, [&](const char* fn) {
        require_comm(comm, fn);
        require(rank, fn, "rank");
        *rank = comm->impl.rank();
    });
}

int cohort_comm_size(const cohort_comm* comm, int32_t* size) {
    return guard(__func__, [&](const char* fn) {
        require_comm(comm, fn);
        require(size, fn, "size");
        *size = comm->impl.size();
    });
}

int cohort_comm_is_broken(const cohort_comm* comm, int32_t* broken) {
    return guard(__func__, [&](const char* fn) {
        require_comm(comm, fn);
        require(broken, fn, "broken");
        *broken = comm->impl.broken() ? 1 : 0;
    });
}

int cohort_comm_broken_reason(const cohort_comm* comm, char** reason, size_t* length) {
    return guard(__func__, [&](const char* fn) {
        require_comm(comm, fn);
        require(reason, fn, "reason");
        cohort::capi::give_text(comm->impl.broken_reason(), reason, length);
    });
}

int cohort_comm_dead_ranks(const cohort_comm* comm, int32_t* ranks, size_t capacity, size_t* count) {
    return guard(__func__, [&](const char* fn) {
        require_comm(comm, fn);
        require(count, fn, "count");
        if (ranks == nullptr && capacity != 0)
            throw Error(Errc::invalid_argument,
                        fmt::format("{}: the output buffer is NULL but capacity is {}", fn, capacity));
        const std::vector<int> dead = comm->impl.dead_ranks();
        *count = dead.size();
        if (capacity < dead.size())
            throw Error(Errc::buffer_too_small,
                        fmt::format("{}: the buffer holds {} ranks but {} are needed", fn, capacity, dead.size()));
        std::copy(dead.begin(), dead.end(), ranks);
    });
}

int cohort_comm_host(const cohort_comm* comm, int32_t rank, const char** host) {
    return guard(__func__, [&](const char* fn) {
        require_comm(comm, fn);
        require(host, fn, "host");
        const auto& hosts = comm->impl.hosts();
        if (rank < 0 || static_cast<std::size_t>(rank) >= hosts.size())
            throw Error(Errc::out_of_range,
                        fmt::format("{}: rank {} is outside 0..{}", fn, rank, static_cast<int64_t>(hosts.size()) - 1));
        *host = hosts[static_cast<std::size_t>(rank)].c_str();
    });
}

int cohort_comm_choose(const cohort_comm* comm, uint64_t bytes, int32_t* algorithm) {
    return guard(__func__, [&](const char* fn) {
        require_comm(comm, fn);
        require(algorithm, fn, "algorithm");
        *algorithm = static_cast<int32_t>(comm->impl.choose(to_size(bytes, fn, "bytes")));
    });
}

int cohort_comm_transport(const cohort_comm* comm, int32_t rank, int32_t* transport) {
    return guard(__func__, [&](const char* fn) {
        require_comm(comm, fn);
        require(transport, fn, "transport");
        const auto& all = comm->impl.transports();
        if (rank < 0 || static_cast<std::size_t>(rank) >= all.size())
            throw Error(Errc::out_of_range,
                        fmt::format("{}: rank {} is outside 0..{}", fn, rank, static_cast<int64_t>(all.size()) - 1));
        *transport = static_cast<int32_t>(all[static_cast<std::size_t>(rank)]);
    });
}

int cohort_comm_describe(const cohort_comm* comm, char** json, size_t* length) {
    return guard(__func__, [&](const char* fn) {
        require_comm(comm, fn);
        require(json, fn, "json");
        cohort::capi::give_text(comm->impl.describe(), json, length);
    });
}

// ------------------------------------------------------------- blocking

int cohort_comm_allreduce(cohort_comm* comm, const void* in, void* out, uint64_t count, int32_t dtype, int32_t op,
                          int32_t algorithm, double timeout_seconds) {
    return guard(__func__, [&](const char* fn) {
        const auto a = check_allreduce(comm, count, dtype, op, algorithm, timeout_seconds, fn);
        named(fn, [&] { comm->impl.allreduce(in, out, a.count, a.dtype, a.op, a.call); });
    });
}

int cohort_comm_broadcast(cohort_comm* comm, void* data, uint64_t bytes, int32_t root, double timeout_seconds) {
    return guard(__func__, [&](const char* fn) {
        const auto b = check_broadcast(comm, bytes, timeout_seconds, fn);
        named(fn, [&] { comm->impl.broadcast(data, b.bytes, root, b.call); });
    });
}

int cohort_comm_barrier(cohort_comm* comm, double timeout_seconds) {
    return guard(__func__, [&](const char* fn) {
        require_comm(comm, fn);
        named(fn, [&] { comm->impl.barrier(call_options(timeout_seconds, fn)); });
    });
}

int cohort_comm_allgather(cohort_comm* comm, const void* in, void* out, uint64_t bytes, double timeout_seconds) {
    return guard(__func__, [&](const char* fn) {
        const auto g = check_allgather(comm, bytes, timeout_seconds, fn);
        named(fn, [&] { comm->impl.allgather(in, out, g.bytes, g.call); });
    });
}

int cohort_comm_reduce_scatter(cohort_comm* comm, const void* in, void* out, uint64_t count, int32_t dtype, int32_t op,
                               double timeout_seconds) {
    return guard(__func__, [&](const char* fn) {
        const auto a = check_reduce_scatter(comm, count, dtype, op, timeout_seconds, fn);
        named(fn, [&] { comm->impl.reduce_scatter(in, out, a.count, a.dtype, a.op, a.call); });
    });
}

int cohort_comm_allreduce_named(cohort_comm* comm, size_t n, const char* const* names, void* const* buffers,
                                const uint64_t* counts, const int32_t* dtypes, int32_t op, double timeout_seconds) {
    return guard(__func__, [&](const char* fn) {
        require_comm(comm, fn);
        const auto reduce = cohort::reduce_op_from(op, fn);
        const auto call = call_options(timeout_seconds, fn);
        if (n > 0) {
            require(names, fn, "names");
            require(buffers, fn, "buffers");
            require(counts, fn, "counts");
            require(dtypes, fn, "dtypes");
        }
        std::map<std::string, cohort::Tensor> tensors;
        std::map<std::string, std::size_t> index_of;
        for (std::size_t i = 0; i < n; ++i) {
            if (names[i] == nullptr) bad(fmt::format("{}: names[{}] must not be NULL", fn, i));
            const std::string what = fmt::format("dtypes[{}]", i);
            const auto dtype = cohort::dtype_from(dtypes[i], fmt::format("{}: {}", fn, what));
            const std::string count_name = fmt::format("counts[{}]", i);
            const std::size_t bytes = byte_count(counts[i], cohort::dtype_size(dtype), fn, count_name.c_str());
            if (buffers[i] == nullptr && bytes > 0)
                bad(fmt::format("{}: buffers[{}] ('{}') must not be NULL ({} bytes)", fn, i, names[i], bytes));
            const auto [at, fresh] = index_of.emplace(names[i], i);
            if (!fresh)
                bad(fmt::format("{}: names[{}] and names[{}] are both '{}'; names must be distinct", fn, at->second, i,
                                names[i]));
            tensors.emplace(names[i], cohort::Tensor{{static_cast<std::byte*>(buffers[i]), bytes}, dtype});
        }
        named(fn, [&] { comm->impl.allreduce_named(tensors, reduce, call); });
    });
}

// ----------------------------------------------------------- asynchronous

int cohort_comm_allreduce_async(cohort_comm* comm, const void* in, void* out, uint64_t count, int32_t dtype, int32_t op,
                                int32_t algorithm, double timeout_seconds, cohort_work** work) {
    return guard(__func__, [&](const char* fn) {
        require(work, fn, "work");
        const auto a = check_allreduce(comm, count, dtype, op, algorithm, timeout_seconds, fn);
        give_work(named(fn, [&] { return comm->impl.allreduce_async(in, out, a.count, a.dtype, a.op, a.call); }), work);
    });
}

int cohort_comm_broadcast_async(cohort_comm* comm, void* data, uint64_t bytes, int32_t root, double timeout_seconds,
                                cohort_work** work) {
    return guard(__func__, [&](const char* fn) {
        require(work, fn, "work");
        const auto b = check_broadcast(comm, bytes, timeout_seconds, fn);
        give_work(named(fn, [&] { return comm->impl.broadcast_async(data, b.bytes, root, b.call); }), work);
    });
}

int cohort_comm_barrier_async(cohort_comm* comm, double timeout_seconds, cohort_work** work) {
    return guard(__func__, [&](const char* fn) {
        require(work, fn, "work");
        require_comm(comm, fn);
        give_work(named(fn, [&] { return comm->impl.barrier_async(call_options(timeout_seconds, fn)); }), work);
    });
}

int cohort_comm_allgather_async(cohort_comm* comm, const void* in, void* out, uint64_t bytes, double timeout_seconds,
                                cohort_work** work) {
    return guard(__func__, [&](const char* fn) {
        require(work, fn, "work");
        const auto g = check_allgather(comm, bytes, timeout_seconds, fn);
        give_work(named(fn, [&] { return comm->impl.allgather_async(in, out, g.bytes, g.call); }), work);
    });
}

int cohort_comm_reduce_scatter_async(cohort_comm* comm, const void* in, void* out, uint64_t count, int32_t dtype,
                                     int32_t op, double timeout_seconds, cohort_work** work) {
    return guard(__func__, [&](const char* fn) {
        require(work, fn, "work");
        const auto a = check_reduce_scatter(comm, count, dtype, op, timeout_seconds, fn);
        give_work(named(fn, [&] { return comm->impl.reduce_scatter_async(in, out, a.count, a.dtype, a.op, a.call); }),
                  work);
    });
}

// ------------------------------------------------------------------- work

int cohort_work_test(const cohort_work* work, int32_t* done) {
    return guard(__func__, [&](const char* fn) {
        require(work, fn, "work");
        require(done, fn, "done");
        *done = work->impl.test() ? 1 : 0;
    });
}

int cohort_work_wait(cohort_work* work, double limit_seconds) {
    return guard(__func__, [&](const char* fn) {
        require(work, fn, "work");
        const auto limit = cohort::capi::milliseconds_arg(limit_seconds, fn, "limit_seconds", true);
        if (limit.count() == 0)
            work->impl.wait();
        else
            work->impl.wait_for(limit);
    });
}

void cohort_work_destroy(cohort_work* work) {
    delete work;
}

}  // extern "C"
