/*
 * c_test_comm.c: communicators and collectives through the C ABI, from
 * plain C11 (with POSIX threads and directories). A communicator of size 1
 * needs no store: it runs every operation on every dtype and op. Two ranks
 * run as two threads meeting in a file:// store in a fresh folder of the
 * scratch directory, and check their results against sums computed here.
 * Includes nothing from cohort but cohort.h; c_test.c's main() runs it.
 */
#define _XOPEN_SOURCE 700 /* mkdtemp, realpath, pthreads, dirent */

#include "cohort.h"

#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------ harness */

/* The two ranks' threads check too, so the counters are locked. */
static int comm_passed;
static int comm_failed;
static pthread_mutex_t comm_count_lock = PTHREAD_MUTEX_INITIALIZER;

static void comm_pass(void) {
    pthread_mutex_lock(&comm_count_lock);
    ++comm_passed;
    pthread_mutex_unlock(&comm_count_lock);
}

static void comm_fail(const char* file, int line, const char* what) {
    pthread_mutex_lock(&comm_count_lock);
    ++comm_failed;
    fprintf(stderr, "%s:%d: FAILED: %s\n", file, line, what);
    pthread_mutex_unlock(&comm_count_lock);
}

/* status must be `code`; unless it is COHORT_OK, the last error must contain `needle`. */
static int check_status(const char* file, int line, const char* call, int status, int code, const char* needle) {
    const char* message = cohort_last_error();
    if (status == code && (code == COHORT_OK || strstr(message, needle) != NULL)) {
        comm_pass();
        return 1;
    }
    comm_fail(file, line, call);
    fprintf(stderr, "    returned %d (%s; expected %d), last error: \"%s\"\n", status, cohort_strerror(status), code,
            message);
    if (code != COHORT_OK) fprintf(stderr, "    expected it to contain \"%s\"\n", needle);
    return 0;
}

static void check_has(const char* file, int line, const char* what, const char* text, const char* needle) {
    if (text != NULL && strstr(text, needle) != NULL) {
        comm_pass();
        return;
    }
    comm_fail(file, line, what);
    fprintf(stderr, "    got \"%s\"\n    lacks \"%s\"\n", text ? text : "(null)", needle);
}

#define CHECK(cond) ((cond) ? comm_pass() : comm_fail(__FILE__, __LINE__, #cond))
#define CHECK_OK(call) check_status(__FILE__, __LINE__, #call, (call), COHORT_OK, "")
#define CHECK_ERR(call, code, needle) check_status(__FILE__, __LINE__, #call, (call), (code), (needle))
#define CHECK_HAS(text, needle) check_has(__FILE__, __LINE__, #text, (text), (needle))
#define BAD COHORT_ERR_INVALID_ARGUMENT

/* ----------------------------------------------------- element values */

#define N_DTYPES 7
#define N_OPS 5
#define N_ALGOS 6

static const int32_t all_dtypes[N_DTYPES] = {COHORT_DTYPE_FLOAT32,  COHORT_DTYPE_FLOAT64, COHORT_DTYPE_FLOAT16,
                                             COHORT_DTYPE_BFLOAT16, COHORT_DTYPE_INT32,   COHORT_DTYPE_INT64,
                                             COHORT_DTYPE_UINT8};
static const int32_t all_ops[N_OPS] = {COHORT_OP_SUM, COHORT_OP_PROD, COHORT_OP_MIN, COHORT_OP_MAX, COHORT_OP_AVG};
static const int32_t all_algos[N_ALGOS] = {COHORT_ALGO_AUTO, COHORT_ALGO_STAR, COHORT_ALGO_RING, COHORT_ALGO_DOUBLING,
                                           COHORT_ALGO_HIERARCHICAL, COHORT_ALGO_SHM};

/* IEEE binary16 of a value whose significand fits 11 bits (small integers
 * and halves here); no libm needed. */
static uint16_t half_bits(double v) {
    uint16_t sign = 0;
    int e = 0;
    if (v == 0) return 0;
    if (v < 0) {
        sign = 0x8000u;
        v = -v;
    }
    while (v >= 2) {
        v /= 2;
        ++e;
    }
    while (v < 1) {
        v *= 2;
        --e;
    }
    return (uint16_t)(sign | (uint16_t)((e + 15) << 10) | (uint16_t)((v - 1) * 1024));
}

static double half_value(uint16_t bits) {
    int e = (bits >> 10) & 0x1F;
    double v = (e == 0 ? 0.0 : 1.0) + (bits & 0x3FF) / 1024.0;
    if (e == 0) e = 1; /* subnormal */
    for (; e > 15; --e) v *= 2;
    for (; e < 15; ++e) v /= 2;
    return (bits & 0x8000u) ? -v : v;
}

static uint16_t bf16_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (uint16_t)(u >> 16);
}

static float bf16_value(uint16_t bits) {
    uint32_t u = (uint32_t)bits << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void put(void* buf, int32_t dtype, size_t i, double v) {
    switch (dtype) {
        case COHORT_DTYPE_FLOAT32:
            ((float*)buf)[i] = (float)v;
            break;
        case COHORT_DTYPE_FLOAT64:
            ((double*)buf)[i] = v;
            break;
        case COHORT_DTYPE_FLOAT16:
            ((uint16_t*)buf)[i] = half_bits(v);
            break;
        case COHORT_DTYPE_BFLOAT16:
            ((uint16_t*)buf)[i] = bf16_bits((float)v);
            break;
        case COHORT_DTYPE_INT32:
            ((int32_t*)buf)[i] = (int32_t)v;
            break;
        case COHORT_DTYPE_INT64:
            ((int64_t*)buf)[i] = (int64_t)v;
            break;
        default:
            ((uint8_t*)buf)[i] = (uint8_t)v;
            break;
    }
}

static double get(const void* buf, int32_t dtype, size_t i) {
    switch (dtype) {
        case COHORT_DTYPE_FLOAT32:
            return ((const float*)buf)[i];
        case COHORT_DTYPE_FLOAT64:
            return ((const double*)buf)[i];
        case COHORT_DTYPE_FLOAT16:
            return half_value(((const uint16_t*)buf)[i]);
        case COHORT_DTYPE_BFLOAT16:
            return bf16_value(((const uint16_t*)buf)[i]);
        case COHORT_DTYPE_INT32:
            return ((const int32_t*)buf)[i];
        case COHORT_DTYPE_INT64:
            return (double)((const int64_t*)buf)[i];
        default:
            return ((const uint8_t*)buf)[i];
    }
}

static int is_integer(int32_t dtype) {
    return dtype == COHORT_DTYPE_INT32 || dtype == COHORT_DTYPE_INT64 || dtype == COHORT_DTYPE_UINT8;
}

/* What rank `rank` contributes at index i: small, positive, exact in every dtype. */
static double value_of(int rank, size_t i) {
    return (double)(rank + 1) + (double)(i % 5);
}

/* The reduction of value_of(0..ranks-1, i) with `op`, as the library computes it. */
static double expected(int32_t dtype, int32_t op, int ranks, size_t i) {
    double acc = value_of(0, i);
    for (int r = 1; r < ranks; ++r) {
        double v = value_of(r, i);
        switch (op) {
            case COHORT_OP_PROD:
                acc *= v;
                break;
            case COHORT_OP_MIN:
                acc = v < acc ? v : acc;
                break;
            case COHORT_OP_MAX:
                acc = v > acc ? v : acc;
                break;
            default:
                acc += v;
                break;
        }
    }
    if (op == COHORT_OP_AVG) {
        acc /= ranks;
        if (is_integer(dtype)) acc = (double)(long long)acc; /* integer division */
    }
    return acc;
}

/* Fills `count` elements with this rank's values. */
static void fill(void* buf, int32_t dtype, size_t count, int rank) {
    for (size_t i = 0; i < count; ++i) put(buf, dtype, i, value_of(rank, i));
}

/* 1 if every element is the reduction over `ranks` ranks; reports the first that is not. */
static int reduced_ok(const char* file, int line, const void* buf, int32_t dtype, int32_t op, int ranks, size_t count,
                      size_t first_index) {
    for (size_t i = 0; i < count; ++i) {
        double want = expected(dtype, op, ranks, first_index + i);
        double got = get(buf, dtype, i);
        if (got != want) {
            comm_fail(file, line, "reduced values");
            fprintf(stderr, "    %s %s over %d ranks: element %zu is %g, expected %g\n", cohort_dtype_name(dtype),
                    cohort_reduce_op_name(op), ranks, first_index + i, got, want);
            return 0;
        }
    }
    comm_pass();
    return 1;
}
#define CHECK_REDUCED(buf, dtype, op, ranks, count, first) \
    reduced_ok(__FILE__, __LINE__, (buf), (dtype), (op), (ranks), (count), (first))

/* -------------------------------------------------------------- names */

static void test_names(void) {
    static const char* dtype_names[N_DTYPES] = {"float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8"};
    static const size_t dtype_sizes[N_DTYPES] = {4, 8, 2, 2, 4, 8, 1};
    static const char* op_names[N_OPS] = {"sum", "prod", "min", "max", "avg"};
    static const char* algo_names[N_ALGOS] = {"auto", "star", "ring", "doubling", "hierarchical", "shm"};
    int32_t value = -7;

    for (int i = 0; i < N_DTYPES; ++i) {
        CHECK(strcmp(cohort_dtype_name(all_dtypes[i]), dtype_names[i]) == 0);
        CHECK(cohort_dtype_size(all_dtypes[i]) == dtype_sizes[i]);
        CHECK_OK(cohort_dtype_parse(dtype_names[i], &value));
        CHECK(value == all_dtypes[i]);
    }
    for (int i = 0; i < N_OPS; ++i) {
        CHECK(strcmp(cohort_reduce_op_name(all_ops[i]), op_names[i]) == 0);
        CHECK_OK(cohort_reduce_op_parse(op_names[i], &value));
        CHECK(value == all_ops[i]);
    }
    for (int i = 0; i < N_ALGOS; ++i) {
        CHECK(strcmp(cohort_algorithm_name(all_algos[i]), algo_names[i]) == 0);
        CHECK_OK(cohort_algorithm_parse(algo_names[i], &value));
        CHECK(value == all_algos[i]);
    }
    CHECK_OK(cohort_dtype_parse("bf16", &value));
    CHECK(value == COHORT_DTYPE_BFLOAT16);
    CHECK_OK(cohort_dtype_parse("double", &value));
    CHECK(value == COHORT_DTYPE_FLOAT64);

    CHECK(strcmp(cohort_dtype_name(99), "unknown") == 0);
    CHECK(strcmp(cohort_dtype_name(-1), "unknown") == 0);
    CHECK(cohort_dtype_size(99) == 0);
    CHECK(cohort_dtype_size(-1) == 0);
    CHECK(strcmp(cohort_reduce_op_name(5), "unknown") == 0);
    CHECK(strcmp(cohort_algorithm_name(COHORT_ALGO_SHM), "shm") == 0);
    CHECK(strcmp(cohort_algorithm_name(6), "unknown") == 0);
    CHECK(strcmp(cohort_transport_name(COHORT_TRANSPORT_SELF), "self") == 0);
    CHECK(strcmp(cohort_transport_name(COHORT_TRANSPORT_SHM), "shm") == 0);
    CHECK(strcmp(cohort_transport_name(COHORT_TRANSPORT_DIRECT), "direct") == 0);
    CHECK(strcmp(cohort_transport_name(COHORT_TRANSPORT_TCP), "tcp") == 0);
    CHECK(strcmp(cohort_transport_name(4), "unknown") == 0);
    CHECK(strcmp(cohort_transport_name(-1), "unknown") == 0);

    value = -7;
    CHECK_ERR(cohort_dtype_parse("flaot32", &value), BAD, "did you mean 'float32'");
    CHECK_HAS(cohort_last_error(), "cohort_dtype_parse");
    CHECK_ERR(cohort_reduce_op_parse("maxx", &value), BAD, "did you mean 'max'");
    CHECK_ERR(cohort_algorithm_parse("rnig", &value), BAD, "unknown algorithm 'rnig'");
    CHECK(value == -7);
    CHECK_ERR(cohort_dtype_parse(NULL, &value), BAD, "cohort_dtype_parse: name must not be NULL");
    CHECK_ERR(cohort_reduce_op_parse("sum", NULL), BAD, "cohort_reduce_op_parse: op must not be NULL");
    CHECK_ERR(cohort_algorithm_parse("ring", NULL), BAD, "algorithm must not be NULL");
}

/* ------------------------------------------------------------ options */

static void test_options(void) {
    cohort_comm_options* o = NULL;
    CHECK_ERR(cohort_comm_options_create(NULL), BAD, "cohort_comm_options_create: out must not be NULL");
    CHECK_OK(cohort_comm_options_create(&o));
    CHECK(o != NULL);

    CHECK_OK(cohort_comm_options_set_store(o, "file:///tmp/unused"));
    CHECK_OK(cohort_comm_options_set_store(o, NULL));
    CHECK_OK(cohort_comm_options_set_job_id(o, "job-7"));
    CHECK_OK(cohort_comm_options_set_job_id(o, NULL));
    CHECK_OK(cohort_comm_options_set_generation(o, 3));
    CHECK_OK(cohort_comm_options_set_timeout(o, 5.0));
    CHECK_OK(cohort_comm_options_set_connect_timeout(o, 5.0));
    CHECK_OK(cohort_comm_options_set_secret(o, "s\0cret", 6));
    CHECK_OK(cohort_comm_options_set_secret(o, NULL, 0));
    CHECK_OK(cohort_comm_options_set_address(o, "127.0.0.1"));
    CHECK_OK(cohort_comm_options_set_ifname(o, NULL));
    CHECK_OK(cohort_comm_options_set_host_label(o, "host-a"));
    CHECK_OK(cohort_comm_options_set_fusion_threshold(o, 1 << 20));
    CHECK_OK(cohort_comm_options_set_socket_buffer(o, 0));
    CHECK_OK(cohort_comm_options_set_max_frame(o, 1 << 16));

    CHECK_ERR(cohort_comm_options_set_store(NULL, "x"), BAD, "cohort_comm_options_set_store: options must not be NULL");
    CHECK_ERR(cohort_comm_options_set_timeout(o, 0), BAD,
              "cohort_comm_options_set_timeout: timeout_seconds must be positive");
    CHECK_ERR(cohort_comm_options_set_timeout(o, -5), BAD, "got -5");
    CHECK_ERR(cohort_comm_options_set_connect_timeout(o, 1e12), BAD, "at most a year");
    CHECK_ERR(cohort_comm_options_set_max_frame(o, 100), BAD,
              "cohort_comm_options_set_max_frame: communicator: max_frame 100 is outside 4 KiB..256 MiB");
    CHECK_ERR(cohort_comm_options_set_socket_buffer(o, 2ull << 30), BAD, "above 1 GiB");
    CHECK_ERR(cohort_comm_options_set_fusion_threshold(o, 0), BAD, "fusion_threshold must be at least 1 byte");
    CHECK_ERR(cohort_comm_options_set_secret(o, NULL, 3), BAD, "secret must not be NULL");
    CHECK_ERR(cohort_comm_options_set_tls(o, "/ca.pem", NULL, "/k.pem"), BAD,
              "give ca_file, cert_file and key_file together, or none (cert_file is missing)");
    CHECK_OK(cohort_comm_options_set_tls(o, NULL, NULL, NULL));
    {
        char long_id[300];
        memset(long_id, 'j', sizeof long_id - 1);
        long_id[sizeof long_id - 1] = '\0';
        CHECK_ERR(cohort_comm_options_set_job_id(o, long_id), BAD, "the job id must have 1 to 256 bytes, not 299");
    }
    CHECK_ERR(cohort_comm_options_set_generation(NULL, 1), BAD, "options must not be NULL");
    CHECK_ERR(cohort_comm_options_set_address(NULL, "x"), BAD, "options must not be NULL");
    CHECK_ERR(cohort_comm_options_set_ifname(NULL, "x"), BAD, "options must not be NULL");
    CHECK_ERR(cohort_comm_options_set_host_label(NULL, "x"), BAD, "options must not be NULL");
    cohort_comm_options_destroy(o);
    cohort_comm_options_destroy(NULL);
}

/* ------------------------------------------------------- size 1: work */

/* Every operation of a communicator of one rank: the result is the input. */
static void test_single_rank(void) {
    enum { COUNT = 23 };
    cohort_comm_options* o = NULL;
    cohort_comm* c = NULL;
    cohort_comm* plain = NULL;
    int32_t value = -1;
    const char* host = NULL;
    char* reason = NULL;
    double in[COUNT], out[COUNT], out2[COUNT]; /* double-sized: any dtype fits */

    CHECK_OK(cohort_comm_options_create(&o));
    CHECK_OK(cohort_comm_options_set_host_label(o, "solo"));
    CHECK_OK(cohort_comm_create(0, 1, o, &c));
    cohort_comm_options_destroy(o); /* the communicator copied them */
    if (c == NULL) return;
    CHECK_OK(cohort_comm_create(0, 1, NULL, &plain)); /* defaults: no store needed */
    if (plain != NULL) {
        /* Aborted (as a watchdog thread would): the next operation fails
         * with the reason; a second abort changes nothing. */
        CHECK_OK(cohort_comm_barrier(plain, 0));
        CHECK_OK(cohort_comm_abort(plain, "the world is over"));
        CHECK_OK(cohort_comm_abort(plain, NULL));
        CHECK_ERR(cohort_comm_barrier(plain, 0), COHORT_ERR_CLOSED, "aborted: the world is over");
        cohort_comm_destroy(plain);
        plain = NULL;
        CHECK_OK(cohort_comm_create(0, 1, NULL, &plain));
    }

    CHECK_OK(cohort_comm_rank(c, &value));
    CHECK(value == 0);
    CHECK_OK(cohort_comm_size(c, &value));
    CHECK(value == 1);
    CHECK_OK(cohort_comm_is_broken(c, &value));
    CHECK(value == 0);
    size_t reason_length = 99;
    CHECK_OK(cohort_comm_broken_reason(c, &reason, &reason_length));
    CHECK(reason != NULL && reason[0] == '\0' && reason_length == 0);
    cohort_free(reason);
    CHECK_OK(cohort_comm_host(c, 0, &host));
    CHECK(host != NULL && strcmp(host, "solo") == 0);
    {
        int32_t dead[2] = {-1, -1};
        size_t dead_count = 99;
        CHECK_OK(cohort_comm_dead_ranks(c, dead, 2, &dead_count));
        CHECK(dead_count == 0 && dead[0] == -1);
        CHECK_OK(cohort_comm_dead_ranks(c, NULL, 0, &dead_count));
        CHECK(dead_count == 0);
        CHECK_ERR(cohort_comm_dead_ranks(c, dead, 2, NULL), BAD, "cohort_comm_dead_ranks: count must not be NULL");
        CHECK_ERR(cohort_comm_dead_ranks(c, NULL, 3, &dead_count), BAD,
                  "cohort_comm_dead_ranks: the output buffer is NULL but capacity is 3");
        CHECK_ERR(cohort_comm_dead_ranks(NULL, dead, 2, &dead_count), BAD, "comm must not be NULL");
    }
    CHECK_OK(cohort_comm_host(plain, 0, &host));
    CHECK(host != NULL && host[0] != '\0'); /* the machine's name */
    CHECK_OK(cohort_comm_choose(c, 100, &value));
    CHECK(value > COHORT_ALGO_AUTO && value <= COHORT_ALGO_HIERARCHICAL);
    CHECK_OK(cohort_comm_choose(c, 64ull << 20, &value));
    CHECK(value > COHORT_ALGO_AUTO && value <= COHORT_ALGO_HIERARCHICAL);

    for (int d = 0; d < N_DTYPES; ++d) {
        const int32_t dtype = all_dtypes[d];
        for (int p = 0; p < N_OPS; ++p) {
            for (int a = 0; a < N_ALGOS; ++a) {
                fill(in, dtype, COUNT, 0);
                memset(out, 0, sizeof out);
                CHECK_OK(cohort_comm_allreduce(c, in, out, COUNT, dtype, all_ops[p], all_algos[a], 0));
                CHECK_REDUCED(out, dtype, all_ops[p], 1, COUNT, 0);
                CHECK_OK(cohort_comm_allreduce(c, in, in, COUNT, dtype, all_ops[p], all_algos[a], 1.0));
                CHECK_REDUCED(in, dtype, all_ops[p], 1, COUNT, 0);
            }
            fill(in, dtype, COUNT, 0);
            CHECK_OK(cohort_comm_reduce_scatter(c, in, out, COUNT, dtype, all_ops[p], 0));
            CHECK_REDUCED(out, dtype, all_ops[p], 1, COUNT, 0);
        }
    }
    /* A count of 0 moves nothing and needs no buffers. */
    CHECK_OK(cohort_comm_allreduce(c, NULL, NULL, 0, COHORT_DTYPE_FLOAT32, COHORT_OP_SUM, COHORT_ALGO_AUTO, 0));

    fill(in, COHORT_DTYPE_UINT8, 64, 0);
    CHECK_OK(cohort_comm_broadcast(c, in, 64, 0, 0));
    CHECK_REDUCED(in, COHORT_DTYPE_UINT8, COHORT_OP_SUM, 1, 64, 0);
    CHECK_OK(cohort_comm_barrier(c, 0));
    CHECK_OK(cohort_comm_barrier(c, 0.5));
    memset(out, 0, sizeof out);
    CHECK_OK(cohort_comm_allgather(c, in, out, 64, 0));
    CHECK(memcmp(in, out, 64) == 0);

    {
        float a[5];
        int64_t b[3];
        const char* names[2] = {"w", "b"};
        void* const buffers[2] = {a, b};
        const uint64_t counts[2] = {5, 3};
        const int32_t dtypes[2] = {COHORT_DTYPE_FLOAT32, COHORT_DTYPE_INT64};
        fill(a, COHORT_DTYPE_FLOAT32, 5, 0);
        fill(b, COHORT_DTYPE_INT64, 3, 0);
        CHECK_OK(cohort_comm_allreduce_named(c, 2, names, buffers, counts, dtypes, COHORT_OP_MAX, 0));
        CHECK_REDUCED(a, COHORT_DTYPE_FLOAT32, COHORT_OP_MAX, 1, 5, 0);
        CHECK_REDUCED(b, COHORT_DTYPE_INT64, COHORT_OP_MAX, 1, 3, 0);
        CHECK_OK(cohort_comm_allreduce_named(c, 0, NULL, NULL, NULL, NULL, COHORT_OP_SUM, 0));
    }

    /* Asynchronous forms, queued and waited for in order. */
    {
        cohort_work* w[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
        int32_t done = -1;
        fill(in, COHORT_DTYPE_INT32, COUNT, 0);
        memset(out, 0, sizeof out);
        memset(out2, 0, sizeof out2);
        CHECK_OK(cohort_comm_allreduce_async(c, in, out, COUNT, COHORT_DTYPE_INT32, COHORT_OP_SUM, COHORT_ALGO_RING, 0,
                                             &w[0]));
        CHECK_OK(cohort_comm_broadcast_async(c, in, 16, 0, 0, &w[1]));
        CHECK_OK(cohort_comm_barrier_async(c, 0, &w[2]));
        CHECK_OK(cohort_comm_allgather_async(c, in, out2, 16, 0, &w[3]));
        CHECK_OK(cohort_comm_reduce_scatter_async(c, in, out2 + 4, 4, COHORT_DTYPE_INT32, COHORT_OP_MIN, 0, &w[4]));
        CHECK_OK(cohort_comm_barrier_async(c, 0, &w[5]));
        for (int i = 0; i < 6; ++i) {
            CHECK(w[i] != NULL);
            CHECK_OK(cohort_work_wait(w[i], 0));
            CHECK_OK(cohort_work_wait(w[i], 1.0)); /* again: the same status */
            CHECK_OK(cohort_work_test(w[i], &done));
            CHECK(done == 1);
        }
        CHECK_REDUCED(out, COHORT_DTYPE_INT32, COHORT_OP_SUM, 1, COUNT, 0);
        CHECK(memcmp(in, out2, 16) == 0);
        CHECK_REDUCED(out2 + 4, COHORT_DTYPE_INT32, COHORT_OP_MIN, 1, 4, 0);
        for (int i = 0; i < 6; ++i) cohort_work_destroy(w[i]);
        cohort_work_destroy(NULL);

        /* Blocking calls after asynchronous ones keep their order. */
        fill(in, COHORT_DTYPE_FLOAT64, COUNT, 0);
        CHECK_OK(cohort_comm_allreduce(c, in, out, COUNT, COHORT_DTYPE_FLOAT64, COHORT_OP_AVG, COHORT_ALGO_AUTO, 0));
        CHECK_REDUCED(out, COHORT_DTYPE_FLOAT64, COHORT_OP_AVG, 1, COUNT, 0);

        /* A work may be released before it is waited for, and may outlive
         * its communicator. */
        CHECK_OK(cohort_comm_barrier_async(c, 0, &w[0]));
        cohort_work_destroy(w[0]);
        CHECK_OK(cohort_comm_barrier_async(plain, 0, &w[1]));
        cohort_comm_destroy(plain);
        plain = NULL;
        CHECK_OK(cohort_work_test(w[1], &done));
        CHECK(done == 1);
        CHECK_OK(cohort_work_wait(w[1], 0));
        cohort_work_destroy(w[1]);
    }

    /* After close, operations fail with CLOSED; closing again is a no-op. */
    CHECK_OK(cohort_comm_close(c));
    CHECK_OK(cohort_comm_close(c));
    CHECK_ERR(cohort_comm_barrier(c, 0), COHORT_ERR_CLOSED, "closed");
    {
        cohort_work* w = NULL;
        CHECK_OK(cohort_comm_barrier_async(c, 0, &w));
        CHECK_ERR(cohort_work_wait(w, 0), COHORT_ERR_CLOSED, "barrier");
        cohort_work_destroy(w);
    }
    CHECK_OK(cohort_comm_rank(c, &value));
    cohort_comm_destroy(c);
    cohort_comm_destroy(NULL);
}

/* ----------------------------------------------- size 1: bad arguments */

static void test_errors(void) {
    enum { COUNT = 8 };
    cohort_comm* c = NULL;
    cohort_comm* untouched = (cohort_comm*)&c; /* any non-NULL marker */
    cohort_work* work = (cohort_work*)&c;
    cohort_comm_options* o = NULL;
    float buf[COUNT * 2];
    int32_t value = -3;
    const char* host = "unchanged";

    memset(buf, 0, sizeof buf);
    CHECK_ERR(cohort_comm_create(0, 1, NULL, NULL), BAD, "cohort_comm_create: out must not be NULL");
    CHECK_ERR(cohort_comm_create(0, 0, NULL, &untouched), BAD, "communicator: size must be at least 1, not 0");
    CHECK_ERR(cohort_comm_create(1, 1, NULL, &untouched), BAD, "communicator: rank 1 is outside 0..0");
    CHECK_ERR(cohort_comm_create(-1, 4, NULL, &untouched), BAD, "rank -1 is outside 0..3");
    CHECK_ERR(cohort_comm_create(0, 2, NULL, &untouched), BAD, "no store");
    {
        /* TLS files are read by create, even for a world of one. */
        cohort_comm_options* t = NULL;
        CHECK_OK(cohort_comm_options_create(&t));
        CHECK_OK(cohort_comm_options_set_tls(t, "/nonexistent/ca.pem", "/nonexistent/c.pem", "/nonexistent/k.pem"));
        CHECK_ERR(cohort_comm_create(0, 1, t, &untouched), BAD, "cannot read the CA file '/nonexistent/ca.pem'");
        cohort_comm_options_destroy(t);
    }
    CHECK_OK(cohort_comm_options_create(&o));
    CHECK_OK(cohort_comm_options_set_store(o, "ftp://nowhere"));
    CHECK_ERR(cohort_comm_create(0, 2, o, &untouched), BAD, "unknown scheme 'ftp'");
    cohort_comm_options_destroy(o);
    CHECK(untouched == (cohort_comm*)&c);

    CHECK_OK(cohort_comm_create(0, 1, NULL, &c));
    if (c == NULL) return;

    /* NULL handles and out-parameters. */
    CHECK_ERR(cohort_comm_allreduce(NULL, buf, buf, COUNT, COHORT_DTYPE_FLOAT32, COHORT_OP_SUM, COHORT_ALGO_AUTO, 0),
              BAD, "cohort_comm_allreduce: comm must not be NULL");
    CHECK_ERR(cohort_comm_rank(c, NULL), BAD, "cohort_comm_rank: rank must not be NULL");
    CHECK_ERR(cohort_comm_size(NULL, &value), BAD, "cohort_comm_size: comm must not be NULL");
    CHECK_ERR(cohort_comm_is_broken(c, NULL), BAD, "broken must not be NULL");
    CHECK_ERR(cohort_comm_broken_reason(c, NULL, NULL), BAD, "reason must not be NULL");
    CHECK_ERR(cohort_comm_choose(c, 10, NULL), BAD, "cohort_comm_choose: algorithm must not be NULL");
    CHECK_ERR(cohort_comm_close(NULL), BAD, "cohort_comm_close: comm must not be NULL");
    CHECK_ERR(cohort_comm_abort(NULL, "x"), BAD, "cohort_comm_abort: comm must not be NULL");
    CHECK_ERR(cohort_comm_host(c, 1, &host), COHORT_ERR_OUT_OF_RANGE, "cohort_comm_host: rank 1 is outside 0..0");
    CHECK_ERR(cohort_comm_host(c, -1, &host), COHORT_ERR_OUT_OF_RANGE, "rank -1");
    CHECK(strcmp(host, "unchanged") == 0);
    CHECK_ERR(cohort_comm_host(c, 0, NULL), BAD, "host must not be NULL");
    CHECK(value == -3);

    /* Out-of-range enumerations. */
    CHECK_ERR(cohort_comm_allreduce(c, buf, buf, COUNT, 99, COHORT_OP_SUM, COHORT_ALGO_AUTO, 0), BAD,
              "cohort_comm_allreduce: dtype 99 is not a data type (0 float32 .. 6 uint8)");
    CHECK_ERR(cohort_comm_allreduce(c, buf, buf, COUNT, -1, COHORT_OP_SUM, COHORT_ALGO_AUTO, 0), BAD, "dtype -1");
    CHECK_ERR(cohort_comm_allreduce(c, buf, buf, COUNT, COHORT_DTYPE_FLOAT32, 5, COHORT_ALGO_AUTO, 0), BAD,
              "op 5 is not a reduce op (0 sum .. 4 avg)");
    CHECK_ERR(cohort_comm_allreduce(c, buf, buf, COUNT, COHORT_DTYPE_FLOAT32, COHORT_OP_SUM, 9, 0), BAD,
              "algorithm 9 is not an algorithm (0 auto .. 5 shm)");
    CHECK_ERR(cohort_comm_reduce_scatter(c, buf, buf, COUNT, COHORT_DTYPE_FLOAT32, -2, 0), BAD,
              "cohort_comm_reduce_scatter: op -2");
    CHECK_ERR(cohort_comm_reduce_scatter(c, buf, buf, COUNT, 7, COHORT_OP_SUM, 0), BAD, "dtype 7");

    /* NULL buffers with something to move, overlapping buffers. */
    CHECK_ERR(cohort_comm_allreduce(c, buf, NULL, COUNT, COHORT_DTYPE_FLOAT32, COHORT_OP_SUM, COHORT_ALGO_AUTO, 0), BAD,
              "cohort_comm_allreduce: allreduce: out must not be null when the call covers 32 bytes");
    CHECK_ERR(cohort_comm_allreduce(c, NULL, buf, COUNT, COHORT_DTYPE_FLOAT32, COHORT_OP_SUM, COHORT_ALGO_AUTO, 0), BAD,
              "in must not be null");
    CHECK_ERR(cohort_comm_allreduce(c, buf, buf + 1, COUNT, COHORT_DTYPE_FLOAT32, COHORT_OP_SUM, COHORT_ALGO_AUTO, 0),
              BAD, "in and out overlap");
    CHECK_ERR(
        cohort_comm_allreduce(c, buf, buf, UINT64_MAX / 2, COHORT_DTYPE_FLOAT64, COHORT_OP_SUM, COHORT_ALGO_AUTO, 0),
        BAD, "overflow");
    CHECK_ERR(cohort_comm_broadcast(c, NULL, 4, 0, 0), BAD, "cohort_comm_broadcast: broadcast: data must not be null");
    CHECK_ERR(cohort_comm_allgather(c, buf, NULL, 4, 0), BAD, "cohort_comm_allgather: allgather: out must not be null");
    CHECK_ERR(cohort_comm_reduce_scatter(c, buf, NULL, 2, COHORT_DTYPE_FLOAT32, COHORT_OP_SUM, 0), BAD,
              "cohort_comm_reduce_scatter: reduce_scatter: out must not be null");

    /* Roots and timeouts. */
    CHECK_ERR(cohort_comm_broadcast(c, buf, 4, 1, 0), BAD, "cohort_comm_broadcast: broadcast: root 1 is outside 0..0");
    CHECK_ERR(cohort_comm_broadcast(c, buf, 4, -1, 0), BAD, "root -1");
    CHECK_ERR(cohort_comm_barrier(c, -1), BAD, "cohort_comm_barrier: timeout_seconds must be 0 or positive");
    CHECK_ERR(cohort_comm_allgather(c, buf, buf + 4, 4, -10), BAD, "got -10");
    CHECK_ERR(cohort_comm_allreduce(c, buf, buf, COUNT, COHORT_DTYPE_FLOAT32, COHORT_OP_SUM, COHORT_ALGO_AUTO, 1e12),
              BAD, "at most a year");

    /* Named all-reduce. */
    {
        float a[2] = {1, 2}, b[2] = {3, 4};
        const char* names[2] = {"w", "w"};
        void* const buffers[2] = {a, b};
        const uint64_t counts[2] = {2, 2};
        int32_t dtypes[2] = {COHORT_DTYPE_FLOAT32, COHORT_DTYPE_FLOAT32};
        CHECK_ERR(cohort_comm_allreduce_named(c, 2, names, buffers, counts, dtypes, COHORT_OP_SUM, 0), BAD,
                  "names[0] and names[1] are both 'w'");
        names[1] = NULL;
        CHECK_ERR(cohort_comm_allreduce_named(c, 2, names, buffers, counts, dtypes, COHORT_OP_SUM, 0), BAD,
                  "names[1] must not be NULL");
        names[1] = "b";
        dtypes[1] = 42;
        CHECK_ERR(cohort_comm_allreduce_named(c, 2, names, buffers, counts, dtypes, COHORT_OP_SUM, 0), BAD,
                  "cohort_comm_allreduce_named: dtypes[1]: dtype 42 is not a data type");
        dtypes[1] = COHORT_DTYPE_FLOAT32;
        CHECK_ERR(cohort_comm_allreduce_named(c, 2, names, buffers, counts, dtypes, 11, 0), BAD, "op 11");
        CHECK_ERR(cohort_comm_allreduce_named(c, 2, NULL, buffers, counts, dtypes, COHORT_OP_SUM, 0), BAD,
                  "cohort_comm_allreduce_named: names must not be NULL");
        CHECK(a[0] == 1 && b[0] == 3); /* nothing moved */
    }

    /* Asynchronous forms check the same things and leave *work alone. */
    CHECK_ERR(
        cohort_comm_allreduce_async(c, buf, buf, COUNT, COHORT_DTYPE_FLOAT32, COHORT_OP_SUM, COHORT_ALGO_AUTO, 0, NULL),
        BAD, "cohort_comm_allreduce_async: work must not be NULL");
    CHECK_ERR(cohort_comm_allreduce_async(c, buf, NULL, COUNT, COHORT_DTYPE_FLOAT32, COHORT_OP_SUM, COHORT_ALGO_AUTO, 0,
                                          &work),
              BAD, "cohort_comm_allreduce_async: allreduce: out must not be null");
    CHECK_ERR(cohort_comm_broadcast_async(c, buf, 4, 3, 0, &work), BAD,
              "cohort_comm_broadcast_async: broadcast: root 3");
    CHECK_ERR(cohort_comm_barrier_async(NULL, 0, &work), BAD, "cohort_comm_barrier_async: comm must not be NULL");
    CHECK_ERR(cohort_comm_allgather_async(c, NULL, buf, 4, 0, &work), BAD,
              "cohort_comm_allgather_async: allgather: in must");
    CHECK_ERR(cohort_comm_reduce_scatter_async(c, buf, buf + 4, 2, 99, COHORT_OP_SUM, 0, &work), BAD, "dtype 99");
    CHECK(work == (cohort_work*)&c);
    CHECK_ERR(cohort_work_test(NULL, &value), BAD, "cohort_work_test: work must not be NULL");
    CHECK_ERR(cohort_work_wait(NULL, 0), BAD, "cohort_work_wait: work must not be NULL");
    work = NULL;
    CHECK_OK(cohort_comm_barrier_async(c, 0, &work));
    CHECK_ERR(cohort_work_test(work, NULL), BAD, "done must not be NULL");
    CHECK_ERR(cohort_work_wait(work, -1), BAD, "cohort_work_wait: limit_seconds must be 0 or positive");
    CHECK_OK(cohort_work_wait(work, 0));
    cohort_work_destroy(work);

    /* A failed call leaves the communicator healthy. */
    CHECK_OK(cohort_comm_is_broken(c, &value));
    CHECK(value == 0);
    cohort_comm_destroy(c);
}

/* ------------------------------------------------------------ 2 ranks */

struct rank_args {
    int rank;
    const char* store;
};

/* Rank 0 shows that cohort_work_wait gives up at its limit while rank 1 is
 * held back; then lets rank 1 into the barrier. */
static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cond = PTHREAD_COND_INITIALIZER;
static int hold_released;

static void release_hold(void) {
    pthread_mutex_lock(&hold_lock);
    hold_released = 1;
    pthread_cond_broadcast(&hold_cond);
    pthread_mutex_unlock(&hold_lock);
}

static void wait_for_hold(void) {
    pthread_mutex_lock(&hold_lock);
    while (!hold_released) pthread_cond_wait(&hold_cond, &hold_lock);
    pthread_mutex_unlock(&hold_lock);
}

static cohort_comm* join(int rank, int size, const char* store, const char* job) {
    cohort_comm_options* o = NULL;
    cohort_comm* c = NULL;
    CHECK_OK(cohort_comm_options_create(&o));
    CHECK_OK(cohort_comm_options_set_store(o, store));
    CHECK_OK(cohort_comm_options_set_job_id(o, job));
    CHECK_OK(cohort_comm_options_set_address(o, "127.0.0.1"));
    CHECK_OK(cohort_comm_options_set_host_label(o, "c-host"));
    CHECK_OK(cohort_comm_options_set_timeout(o, 20.0));
    CHECK_OK(cohort_comm_options_set_connect_timeout(o, 20.0));
    CHECK_OK(cohort_comm_options_set_secret(o, "shared", 6));
    CHECK_OK(cohort_comm_options_set_fusion_threshold(o, 64)); /* several fusion buffers */
    CHECK_OK(cohort_comm_create(rank, size, o, &c));
    cohort_comm_options_destroy(o);
    return c;
}

static void* rank_main(void* arg) {
    enum { COUNT = 37, BIG = 100003 };
    const struct rank_args* a = arg;
    const int rank = a->rank;
    cohort_comm* c = join(rank, 2, a->store, "c-test");
    int32_t value = -1;
    const char* host = NULL;
    double in[COUNT], out[COUNT];
    float* big = malloc(BIG * sizeof *big);
    float* big_out = malloc(BIG * sizeof *big_out);

    if (c == NULL || big == NULL || big_out == NULL) {
        cohort_comm_destroy(c);
        free(big);
        free(big_out);
        if (rank == 0) release_hold(); /* rank 1 must not wait for us forever */
        return NULL;
    }
    CHECK_OK(cohort_comm_rank(c, &value));
    CHECK(value == rank);
    CHECK_OK(cohort_comm_size(c, &value));
    CHECK(value == 2);
    for (int r = 0; r < 2; ++r) {
        CHECK_OK(cohort_comm_host(c, r, &host));
        CHECK(host != NULL && strcmp(host, "c-host") == 0);
    }
    /* One host label, one process: the two ranks share memory. */
    CHECK_OK(cohort_comm_transport(c, rank, &value));
    CHECK(value == COHORT_TRANSPORT_SELF);
    CHECK_OK(cohort_comm_transport(c, 1 - rank, &value));
    CHECK(value == COHORT_TRANSPORT_SHM);
    CHECK_ERR(cohort_comm_transport(c, 2, &value), COHORT_ERR_OUT_OF_RANGE, "cohort_comm_transport: rank 2 is outside 0..1");
    CHECK_OK(cohort_comm_choose(c, 1 << 20, &value));
    CHECK(value == COHORT_ALGO_SHM);
    {
        char* json = NULL;
        size_t length = 0;
        CHECK_OK(cohort_comm_describe(c, &json, &length));
        CHECK(json != NULL && strlen(json) == length);
        CHECK(json != NULL && strstr(json, "\"transports\":[") != NULL);
        CHECK(json != NULL && strstr(json, rank == 0 ? "[\"self\",\"shm\"]" : "[\"shm\",\"self\"]") != NULL);
        CHECK(json != NULL && strstr(json, "\"shm_unavailable\":null") != NULL);
        /* Where it listens, and why: the address option join() gave. */
        CHECK(json != NULL && strstr(json, "\"listen\":{\"address\":\"127.0.0.1\",\"port\":") != NULL);
        CHECK(json != NULL && strstr(json, "\"chosen_by\":\"the address option=127.0.0.1\"") != NULL);
        cohort_free(json);
    }

    /* Every dtype and op, out of place, the algorithm chosen for us. */
    for (int d = 0; d < N_DTYPES; ++d)
        for (int p = 0; p < N_OPS; ++p) {
            fill(in, all_dtypes[d], COUNT, rank);
            memset(out, 0, sizeof out);
            CHECK_OK(cohort_comm_allreduce(c, in, out, COUNT, all_dtypes[d], all_ops[p], COHORT_ALGO_AUTO, 0));
            CHECK_REDUCED(out, all_dtypes[d], all_ops[p], 2, COUNT, 0);
        }
    /* Every algorithm, small and large, in place. */
    for (int g = 0; g < N_ALGOS; ++g) {
        fill(in, COHORT_DTYPE_INT64, COUNT, rank);
        CHECK_OK(cohort_comm_allreduce(c, in, in, COUNT, COHORT_DTYPE_INT64, COHORT_OP_MAX, all_algos[g], 0));
        CHECK_REDUCED(in, COHORT_DTYPE_INT64, COHORT_OP_MAX, 2, COUNT, 0);
        fill(big, COHORT_DTYPE_FLOAT32, BIG, rank);
        CHECK_OK(cohort_comm_allreduce(c, big, big, BIG, COHORT_DTYPE_FLOAT32, COHORT_OP_SUM, all_algos[g], 0));
        CHECK_REDUCED(big, COHORT_DTYPE_FLOAT32, COHORT_OP_SUM, 2, BIG, 0);
    }

    /* Broadcast from rank 1. */
    {
        unsigned char data[1000];
        for (int i = 0; i < 1000; ++i) data[i] = rank == 1 ? (unsigned char)(i * 7) : 0;
        CHECK_OK(cohort_comm_broadcast(c, data, sizeof data, 1, 0));
        int same = 1;
        for (int i = 0; i < 1000; ++i) same &= data[i] == (unsigned char)(i * 7);
        CHECK(same);
    }
    /* Allgather: 16 bytes each, in rank order. */
    {
        unsigned char mine[16], all[32];
        for (int i = 0; i < 16; ++i) mine[i] = (unsigned char)(rank * 16 + i);
        CHECK_OK(cohort_comm_allgather(c, mine, all, 16, 0));
        int same = 1;
        for (int i = 0; i < 32; ++i) same &= all[i] == (unsigned char)i;
        CHECK(same);
    }
    /* Reduce-scatter: rank r gets the sums of block r. */
    {
        int32_t blocks[10], mine[5];
        fill(blocks, COHORT_DTYPE_INT32, 10, rank);
        CHECK_OK(cohort_comm_reduce_scatter(c, blocks, mine, 5, COHORT_DTYPE_INT32, COHORT_OP_SUM, 0));
        CHECK_REDUCED(mine, COHORT_DTYPE_INT32, COHORT_OP_SUM, 2, 5, (size_t)rank * 5);
    }
    CHECK_OK(cohort_comm_barrier(c, 0));

    /* Named: the ranks list the tensors in different orders. */
    {
        float w[10];
        int64_t b[3];
        uint16_t h[4];
        const char* names[3] = {"weights", "bias", "half"};
        void* buffers[3] = {w, b, h};
        uint64_t counts[3] = {10, 3, 4};
        int32_t dtypes[3] = {COHORT_DTYPE_FLOAT32, COHORT_DTYPE_INT64, COHORT_DTYPE_BFLOAT16};
        if (rank == 1) {
            names[0] = "bias", names[1] = "weights";
            buffers[0] = b, buffers[1] = w;
            counts[0] = 3, counts[1] = 10;
            dtypes[0] = COHORT_DTYPE_INT64, dtypes[1] = COHORT_DTYPE_FLOAT32;
        }
        fill(w, COHORT_DTYPE_FLOAT32, 10, rank);
        fill(b, COHORT_DTYPE_INT64, 3, rank);
        fill(h, COHORT_DTYPE_BFLOAT16, 4, rank);
        CHECK_OK(cohort_comm_allreduce_named(c, 3, names, buffers, counts, dtypes, COHORT_OP_SUM, 0));
        CHECK_REDUCED(w, COHORT_DTYPE_FLOAT32, COHORT_OP_SUM, 2, 10, 0);
        CHECK_REDUCED(b, COHORT_DTYPE_INT64, COHORT_OP_SUM, 2, 3, 0);
        CHECK_REDUCED(h, COHORT_DTYPE_BFLOAT16, COHORT_OP_SUM, 2, 4, 0);
    }

    /* Asynchronous operations, queued then waited for. */
    {
        cohort_work* w[5] = {NULL, NULL, NULL, NULL, NULL};
        uint16_t halves[COUNT], halves_out[COUNT];
        unsigned char data[64], all[128];
        int32_t blocks[8], mine[4];
        int32_t done = 0;
        fill(halves, COHORT_DTYPE_FLOAT16, COUNT, rank);
        for (int i = 0; i < 64; ++i) data[i] = rank == 0 ? (unsigned char)i : 0;
        fill(blocks, COHORT_DTYPE_INT32, 8, rank);
        CHECK_OK(cohort_comm_allreduce_async(c, halves, halves_out, COUNT, COHORT_DTYPE_FLOAT16, COHORT_OP_AVG,
                                             COHORT_ALGO_AUTO, 0, &w[0]));
        CHECK_OK(cohort_comm_broadcast_async(c, data, 64, 0, 0, &w[1]));
        CHECK_OK(cohort_comm_barrier_async(c, 0, &w[2]));
        CHECK_OK(cohort_comm_reduce_scatter_async(c, blocks, mine, 4, COHORT_DTYPE_INT32, COHORT_OP_PROD, 0, &w[3]));
        /* allgather of the broadcast result: queued behind it, so it sees it */
        CHECK_OK(cohort_comm_allgather_async(c, data, all, 64, 0, &w[4]));
        for (int i = 0; i < 5; ++i) {
            CHECK_OK(cohort_work_wait(w[i], 0));
            CHECK_OK(cohort_work_test(w[i], &done));
            CHECK(done == 1);
            cohort_work_destroy(w[i]);
        }
        CHECK_REDUCED(halves_out, COHORT_DTYPE_FLOAT16, COHORT_OP_AVG, 2, COUNT, 0);
        CHECK_REDUCED(mine, COHORT_DTYPE_INT32, COHORT_OP_PROD, 2, 4, (size_t)rank * 4);
        int same = 1;
        for (int i = 0; i < 128; ++i) same &= all[i] == (unsigned char)(i % 64);
        CHECK(same);
    }

    /* A wait with a limit gives up while the operation goes on. */
    if (rank == 0) {
        cohort_work* w = NULL;
        CHECK_OK(cohort_comm_barrier_async(c, 0, &w));
        CHECK_ERR(cohort_work_wait(w, 0.05), COHORT_ERR_TIMEOUT, "not finished after");
        release_hold();
        CHECK_OK(cohort_work_wait(w, 0));
        cohort_work_destroy(w);
    } else {
        wait_for_hold();
        CHECK_OK(cohort_comm_barrier(c, 0));
    }

    /* Different counts: every rank fails with MISMATCH and the
     * communicator is broken for good. */
    {
        char* reason = NULL;
        fill(in, COHORT_DTYPE_INT32, COUNT, rank);
        CHECK_ERR(cohort_comm_allreduce(c, in, out, rank == 0 ? 4 : 8, COHORT_DTYPE_INT32, COHORT_OP_SUM,
                                        COHORT_ALGO_RING, 5.0),
                  COHORT_ERR_MISMATCH, "rank");
        CHECK_OK(cohort_comm_is_broken(c, &value));
        CHECK(value == 1);
        size_t reason_length = 0;
        CHECK_OK(cohort_comm_broken_reason(c, &reason, &reason_length));
        CHECK(reason != NULL && reason[0] != '\0' && reason_length == strlen(reason));
        cohort_free(reason);
        CHECK_ERR(cohort_comm_barrier(c, 0), COHORT_ERR_CLOSED, "broken");
    }
    CHECK_OK(cohort_comm_close(c));
    cohort_comm_destroy(c);
    free(big);
    free(big_out);
    return NULL;
}

/* Removes the store's files (it keeps one flat folder) and the folder. */
static void remove_store(const char* dir) {
    DIR* d = opendir(dir);
    struct dirent* entry;
    char path[PATH_MAX + 256];
    if (d == NULL) return;
    while ((entry = readdir(d)) != NULL) {
        if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0) continue;
        int n = snprintf(path, sizeof path, "%s/%s", dir, entry->d_name);
        if (n > 0 && (size_t)n < sizeof path) unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

static void test_two_ranks(const char* scratch) {
    char base[PATH_MAX];
    char dir[PATH_MAX + 32];
    char url[PATH_MAX + 64];
    pthread_t threads[2];
    struct rank_args args[2];

    if (realpath(scratch, base) == NULL) {
        comm_fail(__FILE__, __LINE__, "realpath(scratch)");
        return;
    }
    snprintf(dir, sizeof dir, "%s/comm-XXXXXX", base);
    if (mkdtemp(dir) == NULL) {
        comm_fail(__FILE__, __LINE__, "mkdtemp");
        return;
    }
    snprintf(url, sizeof url, "file://%s", dir);

    for (int r = 0; r < 2; ++r) {
        args[r].rank = r;
        args[r].store = url;
        CHECK(pthread_create(&threads[r], NULL, rank_main, &args[r]) == 0);
    }
    for (int r = 0; r < 2; ++r) pthread_join(threads[r], NULL);

    /* A rank that never comes: TIMEOUT naming it, and *out untouched. */
    {
        cohort_comm_options* o = NULL;
        cohort_comm* c = NULL;
        CHECK_OK(cohort_comm_options_create(&o));
        CHECK_OK(cohort_comm_options_set_store(o, url));
        CHECK_OK(cohort_comm_options_set_job_id(o, "lonely"));
        CHECK_OK(cohort_comm_options_set_address(o, "127.0.0.1"));
        CHECK_OK(cohort_comm_options_set_connect_timeout(o, 0.3));
        CHECK_ERR(cohort_comm_create(0, 2, o, &c), COHORT_ERR_TIMEOUT, "rank(s) 1 of 2 never registered");
        CHECK(c == NULL);
        cohort_comm_options_destroy(o);
    }
    remove_store(dir);
}

/* ------------------------------------------------------------------ run */

int run_comm_tests(const char* scratch); /* called by c_test.c's main() */

int run_comm_tests(const char* scratch) {
    struct {
        const char* name;
        void (*run)(void);
    } tests[] = {
        {"comm_names", test_names},
        {"comm_options", test_options},
        {"comm_single_rank", test_single_rank},
        {"comm_errors", test_errors},
    };
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; ++i) {
        int failed_before = comm_failed;
        tests[i].run();
        printf("%-18s %s\n", tests[i].name, comm_failed == failed_before ? "ok" : "FAILED");
    }
    {
        int failed_before = comm_failed;
        test_two_ranks(scratch);
        printf("%-18s %s\n", "comm_two_ranks", comm_failed == failed_before ? "ok" : "FAILED");
    }
    printf("comm: %d passed, %d failed\n", comm_passed, comm_failed);
    return comm_failed;
}
