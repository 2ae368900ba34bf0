// Collectives over TCP: all-reduce, broadcast, barrier, allgather and
// reduce-scatter among `size` ranks that met through a Store. Every rank
// ends with identical bytes. A dead, silent or disagreeing peer is an
// Error naming it, within the operation's timeout, never a hang; after such
// an error the communicator is broken and a new one must be created.
// docs/collectives.md describes the algorithms, failures and wire format.
#pragma once

#include <cohort/dtype.hpp>
#include <cohort/export.hpp>
#include <cohort/reduce_op.hpp>
#include <cohort/store.hpp>
#include <cohort/work.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cohort {

enum class Algorithm : int32_t {
    automatic = 0,     // chosen by size and topology ("auto")
    star = 1,          // rank 0 gathers, reduces and sends back
    ring = 2,          // chunked reduce-scatter then allgather
    doubling = 3,      // recursive doubling: log2(n) steps, for small messages
    hierarchical = 4,  // reduce to a leader per host, ring among leaders, broadcast
    shared_memory = 5, // "shm": every rank on one host, through one shared segment
};

COHORT_API const char* algorithm_name(Algorithm algorithm) noexcept;  // "auto", "ring", ...
COHORT_API Algorithm parse_algorithm(std::string_view name);         // Error(invalid_argument)
// The algorithm a number from outside names: Error(invalid_argument)
// "<where>: algorithm 9 is not an algorithm (0 auto .. 5 shm)".
COHORT_API Algorithm algorithm_from(int64_t value, std::string_view where);

// How a rank's data reaches another rank, chosen when the communicator is
// set up, best first: a segment of shared memory the host's ranks all map;
// else a direct copy from the peer's memory (process_vm_readv, where both
// sides proved they may); else TCP. docs/collectives.md explains the choice.
enum class Transport : int32_t {
    self = 0,           // the rank itself
    shared_memory = 1,  // "shm"
    direct_copy = 2,    // "direct"
    tcp = 3,            // "tcp"
};
COHORT_API const char* transport_name(Transport transport) noexcept;  // "self", "shm", "direct", "tcp"

// The values that shape how a communicator cuts and routes its messages,
// which may change between operations (Communicator::set_tuning; the
// Autotuner of <cohort/autotune.hpp> searches them). Every rank must use
// the same values: docs/collectives.md#tuning says what a difference does.
struct CommTuning {
    // Named all-reduce packs tensors into buffers of at most this many bytes.
    std::size_t fusion_threshold = std::size_t(64) << 20;
    // `automatic` below shared memory: messages up to this many bytes use
    // recursive doubling (log2(n) rounds of whole messages), larger ones a ring.
    std::size_t doubling_max = std::size_t(64) << 10;
    // Where ranks share hosts and there are several hosts, messages above
    // doubling_max and of at least this many bytes go hierarchical.
    std::size_t hierarchical_min = 0;
    // The pipelining piece: shared memory's all-reduce moves a large message
    // through the slots in chunks of this many bytes per round, and a TCP
    // receive that reduces reads and reduces in pieces of this size (a
    // multiple of 8 bytes, 4 KiB to 64 MiB).
    std::size_t pipeline_chunk = std::size_t(128) << 10;
    // Shared memory: a message up to this many bytes is reduced in one round,
    // each rank reading every slot whole (0 to 64 MiB).
    std::size_t shm_single_round_max = std::size_t(32) << 10;

    bool operator==(const CommTuning&) const = default;
};

// Error(invalid_argument) "communicator: tuning.FIELD ..." for the first
// value out of range.
COHORT_API void check_tuning(const CommTuning& tuning);

// Every tunable of a communicator. An environment variable is only the
// documented default of its field, read in one place: with_env_defaults()
// (which every Communicator applies to the options it is given).
struct CommOptions {
    int rank = -1;
    int size = 0;
    // Where ranks exchange addresses: "tcp://HOST:PORT" (rank 0 hosts it) or
    // "file:///DIR". Ignored when `store` is set.
    std::string store_url;
    std::shared_ptr<Store> store;
    // Connections refuse peers of another job or generation.
    std::string job_id = "cohort";
    uint64_t generation = 0;
    // Default timeout of each operation.
    std::chrono::milliseconds timeout{std::chrono::seconds(60)};
    // Bounds the whole set-up: store, addresses, connections, handshakes.
    std::chrono::milliseconds connect_timeout{std::chrono::seconds(60)};
    // When not empty, every connection proves both sides know it (HMAC-SHA256
    // over both sides' nonces). Defaults to $COHORT_SECRET.
    std::string secret;
    // TLS on every connection between ranks, when all three are set (paths
    // of PEM files; some but not all is an error): TLS 1.2 or 1.3, and
    // each end checks the other's certificate against the CA (mutual
    // authentication). Every rank must agree: a rank without TLS is refused
    // by a TLS world and the reverse. Direct copies (process_vm_readv) are
    // off under TLS; shared memory within a host stays on.
    // docs/collectives.md has the threat model and the cost. Defaults to
    // $COHORT_TLS_CA, $COHORT_TLS_CERT and $COHORT_TLS_KEY.
    std::string tls_ca;    // the CA certificate(s) a peer's certificate must chain to
    std::string tls_cert;  // this rank's certificate (may hold its chain)
    std::string tls_key;   // its private key, unencrypted PEM
    // The address to listen on and advertise ("HOST" or "HOST:PORT"); empty:
    // $COHORT_SOCKET_ADDR, else the address of interface `ifname` (empty:
    // $COHORT_SOCKET_IFNAME), else that of the interface routing to the store.
    std::string address;
    std::string ifname;
    // The host each rank is on, for hierarchical all-reduce; defaults to the
    // machine's host name. Ranks with equal labels share a host.
    std::string host_label;
    // The starting tuning (fusion threshold, algorithm thresholds, pipeline
    // chunk); Communicator::set_tuning changes it later.
    CommTuning tuning;
    // Kernel socket buffer sizes (SO_SNDBUF / SO_RCVBUF); 0 keeps the default.
    std::size_t socket_buffer = std::size_t(4) << 20;
    // The largest frame payload sent or accepted; messages are cut into
    // frames of this size at most.
    std::size_t max_frame = std::size_t(4) << 20;
    // Between processes of one machine, let a receiver copy a large message
    // straight from the sender's memory (process_vm_readv, one copy instead
    // of TCP's two), when both sides prove they may. The connection still
    // carries the frames that describe, check and acknowledge each copy.
    // Where Yama's ptrace_scope is 1 (a process may read only its
    // descendants, and ranks are siblings), each rank lets processes of its
    // user read it (prctl PR_SET_PTRACER) so the direct path stays open.
    // $COHORT_DIRECT_COPY=0 turns it off (1 leaves the option as it is).
    bool direct_copy = true;
    // The ranks of one host exchange data through one shared-memory
    // segment of this many bytes: a memfd the host's first rank creates and
    // hands to the others over a local socket, so it has no name and
    // nothing is left behind however the ranks end. It counts against
    // /dev/shm's free space, the host's budget for shared memory. 0 turns
    // shared memory off. A segment that cannot be made or shared (no room
    // in /dev/shm, ranks in different network namespaces) is no error: the
    // host falls back to direct copies or TCP, and describe() says why.
    // Every rank of a host must use the same size. Unset: $COHORT_SHM_SIZE
    // (bytes, or with a K, M or G suffix), else 8 MiB. At most 64 GiB.
    std::optional<std::size_t> shm_size;
    // How long an operation polls its sockets before it sleeps in the
    // kernel (0..1 s); polling saves a wake-up per message for small
    // operations. Unset: $COHORT_SPIN_US microseconds, else 50 us.
    std::optional<std::chrono::microseconds> spin;
};

// `options` with what it leaves unset taken from the environment:
// secret ($COHORT_SECRET), the TLS files ($COHORT_TLS_CA, $COHORT_TLS_CERT,
// $COHORT_TLS_KEY, each when its field is empty), address ($COHORT_SOCKET_ADDR), ifname
// ($COHORT_SOCKET_IFNAME), spin ($COHORT_SPIN_US, else 50 us), shm_size
// ($COHORT_SHM_SIZE, else 8 MiB), and
// direct_copy off when $COHORT_DIRECT_COPY is 0. The only place cohort reads
// these variables. Error(invalid_argument) naming the variable, its value
// and what it accepts, for a value it cannot use
// ("COHORT_SPIN_US='abc': expected a whole number of microseconds from 0 to
// 1000000").
COHORT_API CommOptions with_env_defaults(CommOptions options);

// Error(invalid_argument) "communicator: ..." naming the first setting out
// of range, in the words of the fields above. The rank and size are checked
// only when `world` is set (a Communicator checks them; a caller filling
// options in before it knows its rank need not).
COHORT_API void check_options(const CommOptions& options, bool world = true);

// Per-call options. A zero timeout means the communicator's default.
struct CallOptions {
    Algorithm algorithm = Algorithm::automatic;
    std::chrono::milliseconds timeout{0};
};

// One buffer of a named all-reduce.
struct Tensor {
    std::span<std::byte> data;
    DataType dtype = DataType::float32;
};

class COHORT_API Communicator {
public:
    // Meets the other ranks through the store and connects to them; throws
    // Error(invalid_argument) for bad options, Error(timeout) naming the
    // ranks that never showed up, Error(unavailable) when a peer refuses
    // the handshake (saying what differed).
    explicit Communicator(const CommOptions& options);
    Communicator(Communicator&&) noexcept;
    Communicator& operator=(Communicator&&) noexcept;
    ~Communicator();  // closes; never blocks longer than a short grace period

    int rank() const;
    int size() const;
    // The host label of each rank, as the ranks registered them.
    const std::vector<std::string>& hosts() const;
    bool broken() const;
    std::string broken_reason() const;  // empty while healthy
    // The ranks (ascending) whose process exited or died while this rank
    // was connected to it, as far as the operations so far saw: the
    // connection ended (end of stream or reset) between frames with no
    // goodbye and no abort frame. The evidence a survivor may report to the
    // coordinator (Membership::report_dead). A rank that closed its
    // communicator, gave up (its abort names another rank), broke off in
    // the middle of a frame or only went silent (a partition) is not here.
    // Once broken, a peer whose connection holds nothing but its end counts
    // too (looked at without reading), so a death that arrived after the
    // failure is not missed. Never waits: any thread.
    std::vector<int> dead_ranks() const;
    // What `automatic` picks for a message of `bytes` bytes, under the
    // tuning in force now.
    Algorithm choose(std::size_t bytes) const;
    // The tuning in force: what the next operation uses. Any thread.
    CommTuning tuning() const;
    // Changes the tuning from the next operation on; operations already
    // issued (asynchronous ones) keep the values they were issued with.
    // Error(invalid_argument) for a value out of range (check_tuning), and
    // the tuning stays as it was. Not collective: every rank must make the
    // same change before the same operation (the Autotuner agrees on it
    // through the store). Ranks that disagree on a value that changes the
    // algorithm, the fusion packing or the shared-memory chunking fail
    // their next such operation with Error(mismatch) naming the peer and
    // saying what differs; the pipeline piece of a TCP receive is each
    // rank's own and may differ.
    void set_tuning(const CommTuning& tuning);
    // A view of the store the ranks met through, holding only this
    // communicator's keys (job, generation and instance in the prefix): for
    // ranks to agree on values beside the collectives. Null for one rank.
    std::shared_ptr<Store> store() const;
    // transports()[r]: how this rank exchanges data with rank r.
    const std::vector<Transport>& transports() const;
    // What the set-up chose, as a JSON object: {"rank", "size", "hosts",
    // "transports" (names, by rank), "shm" ({"bytes", "slot_bytes",
    // "ranks"} or null), "shm_unavailable" (why this host's ranks do not
    // share memory although it was wanted, or null), "direct_unavailable"
    // ({rank: why} for the peers reached over TCP rather than by direct
    // copies, or null), "tls" (the protocol and cipher of the links, as
    // "TLSv1.3 TLS_AES_256_GCM_SHA384", or null for plain TCP)}.
    std::string describe() const;

    // `in` and `out` hold `count` elements of `dtype`; they may be the same
    // buffer, and `out` must not otherwise overlap `in`.
    void allreduce(const void* in, void* out, std::size_t count, DataType dtype, ReduceOp op,
                   const CallOptions& call = {});
    void allreduce(void* data, std::size_t count, DataType dtype, ReduceOp op, const CallOptions& call = {});
    template <typename T>
    void allreduce(std::span<T> data, ReduceOp op = ReduceOp::sum, const CallOptions& call = {}) {
        allreduce(data.data(), data.size(), dtype_of<std::remove_const_t<T>>::value, op, call);
    }
    // Root's `bytes` bytes end in every rank's `data`.
    void broadcast(void* data, std::size_t bytes, int root, const CallOptions& call = {});
    void barrier(const CallOptions& call = {});
    // Every rank contributes `bytes` bytes; `out` gets size() * bytes, rank order.
    void allgather(const void* in, void* out, std::size_t bytes, const CallOptions& call = {});
    // `in` holds size() * count elements; rank r gets the reduction of block r.
    void reduce_scatter(const void* in, void* out, std::size_t count, DataType dtype, ReduceOp op,
                        const CallOptions& call = {});
    // Reduces every tensor in place, packed through fusion buffers in name
    // order; every rank must pass the same names, sizes and types.
    void allreduce_named(std::map<std::string, Tensor>& tensors, ReduceOp op, const CallOptions& call = {});

    // Asynchronous forms: the buffers must stay valid until the Work is done.
    Work allreduce_async(const void* in, void* out, std::size_t count, DataType dtype, ReduceOp op,
                         const CallOptions& call = {});
    Work broadcast_async(void* data, std::size_t bytes, int root, const CallOptions& call = {});
    Work barrier_async(const CallOptions& call = {});
    Work allgather_async(const void* in, void* out, std::size_t bytes, const CallOptions& call = {});
    Work reduce_scatter_async(const void* in, void* out, std::size_t count, DataType dtype, ReduceOp op,
                              const CallOptions& call = {});

    // Says goodbye to the peers (they see a clean close, not a failure) and
    // releases the sockets. Pending asynchronous operations fail.
    void close();

    // Breaks the communicator from any thread: the operation under way, or
    // else the next one, fails with Error(closed) saying "aborted: REASON",
    // and the peers are told, so their operations fail at once too, naming
    // this rank. For a watchdog, or a membership that learns the world is
    // over while the program waits in a collective for a peer that stopped.
    // Does nothing once the communicator is broken or closed.
    void abort(std::string reason);

    // abort() through a handle another thread can keep: copyable, and
    // harmless after the communicator is destroyed (it then does nothing).
    class COHORT_API AbortHandle {
    public:
        AbortHandle() = default;
        void abort(std::string reason) const;
        explicit operator bool() const { return signal_ != nullptr; }

    private:
        friend class Communicator;
        struct Signal;
        std::shared_ptr<Signal> signal_;
    };
    AbortHandle abort_handle() const;

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace cohort
