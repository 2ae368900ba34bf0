// Rounds over the segment: arrive, spin, sleep on a futex, and hand the
// waits to the engine for failures and deadlines.
#include "comm/shm/group.hpp"

#include <fmt/format.h>

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <ctime>

namespace cohort::comm::shm {
namespace {

static_assert(std::atomic<uint32_t>::is_always_lock_free, "futex words must be plain 32-bit words");
static_assert(sizeof(Header) <= 4096);

long futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
    // Not FUTEX_PRIVATE: the word is shared between processes.
    return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

// A sleeper looks at the sockets this often.
constexpr long kSleepSliceNs = 2'000'000;
constexpr auto kCheckEvery = std::chrono::milliseconds(1);
// Inside an operation the peers are known to be busy with it, so a wait is
// usually a chunk's copy away: sleeping then would cost a futex wake-up per
// chunk, and two ranks that take turns sleeping convoy. Spin this long.
constexpr auto kInOperationSpin = std::chrono::microseconds(2000);
constexpr auto kYieldAfter = std::chrono::microseconds(100);

std::size_t round_up(std::size_t n, std::size_t to) {
    return (n + to - 1) / to * to;
}

}  // namespace

Layout layout(std::size_t bytes, int ranks) {
    Layout l;
    l.control = 4096;
    l.data = round_up(l.control + sizeof(Control) * std::size_t(ranks), 4096);
    if (bytes <= l.data || ranks < 1) return l;
    l.slot = (bytes - l.data) / (kSlotsPerRank * std::size_t(ranks)) / 4096 * 4096;
    if (l.slot < kMinSlot) l.slot = 0;
    return l;
}

Group::Group(Segment segment, std::vector<int> ranks, int me, std::chrono::microseconds spin)
    : segment_(std::move(segment)), ranks_(std::move(ranks)), me_(me), spin_(spin) {
    const Layout l = layout(segment_.size(), size());
    control_ = reinterpret_cast<Control*>(segment_.data() + l.control);
    data_ = segment_.data() + l.data;
    slot_ = l.slot;
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    oversubscribed_ = cpus > 0 && size() > cpus;
    step_ = control(me_).step.load();
}

void Group::arrive() {
    Control& c = control(me_);
    // seq_cst on both sides (this store then the waiters load; a sleeper's
    // increment then its step load) means the arriving rank sees the
    // sleeper or the sleeper sees the new step: no lost wake-up.
    c.step.store(++step_, std::memory_order_seq_cst);
    if (c.waiters.load(std::memory_order_seq_cst) != 0) futex(&c.step, FUTEX_WAKE, INT_MAX, nullptr);
}

void Group::check(Engine& engine, int local, uint32_t target, const std::function<std::string()>& waiting) {
    // A rank may arrive and then exit or close at once: its arrival was
    // stored before its connection closed, so looking at the counter after
    // the engine saw the close tells a rank that is through from one that
    // will never come.
    auto arrived = [&] { return int32_t(control(local).step.load(std::memory_order_acquire) - target) >= 0; };
    engine.check(waiting, arrived);
    if (engine.peer_gone(ranks_[local]) && !arrived()) engine.fail_gone(ranks_[local]);
}

void Group::wait_for(Engine& engine, int local, uint32_t target, std::chrono::microseconds spin) {
    Control& c = control(local);
    auto arrived = [&](std::memory_order order) { return int32_t(c.step.load(order) - target) >= 0; };
    if (arrived(std::memory_order_acquire)) return;
    auto waiting = [&] {
        return fmt::format("rank {} to arrive at step {} in shared memory (it is at step {})", ranks_[local], target,
                           c.step.load());
    };
    const auto start = Clock::now();
    auto checked = start;
    for (unsigned i = 1;; ++i) {
        cpu_relax();
        if (arrived(std::memory_order_acquire)) return;
        if (i % 64 != 0) continue;
        const auto now = Clock::now();
        // The rank we wait for may need this processor: with more ranks
        // than processors at once, else once the wait outlasts a chunk.
        if (oversubscribed_ || now - start >= kYieldAfter) sched_yield();
        if (now - checked >= kCheckEvery) {
            check(engine, local, target, waiting);
            checked = now;
        }
        if (now - start >= spin) break;
    }
    struct Sleeping {
        Control& c;
        explicit Sleeping(Control& c_) : c(c_) { c.waiters.fetch_add(1, std::memory_order_seq_cst); }
        ~Sleeping() { c.waiters.fetch_sub(1, std::memory_order_relaxed); }
    } sleeping(c);
    for (;;) {
        const uint32_t seen = c.step.load(std::memory_order_seq_cst);
        if (int32_t(seen - target) >= 0) break;
        const timespec slice{0, kSleepSliceNs};
        futex(&c.step, FUTEX_WAIT, seen, &slice);
        if (arrived(std::memory_order_acquire)) break;
        check(engine, local, target, waiting);
    }
    std::atomic_thread_fence(std::memory_order_acquire);
}

void Group::sync(Engine& engine, bool first) {
    const int parity = static_cast<int>(use_ % kSlotsPerRank);
    const OpSignature& op = engine.op();
    if (first) control(me_).op[parity] = op;  // published by the arrival's release
    arrive();
    const uint32_t target = step_;
    for (int j = 0; j < size(); ++j) {
        if (j == me_) continue;
        wait_for(engine, j, target, first ? spin_ : std::max(spin_, std::chrono::microseconds(kInOperationSpin)));
        if (first) {
            const OpSignature theirs = control(j).op[parity];
            if (const std::string why = mismatch(op, theirs); !why.empty())
                engine.fail_now(Errc::mismatch, fmt::format("{} on rank {} does not match rank {}: {}", describe(op),
                                                            engine.rank(), ranks_[j], why));
        }
    }
}

}  // namespace cohort::comm::shm
