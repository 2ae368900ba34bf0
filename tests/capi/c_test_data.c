/*
 * c_test_data.c: the data path through the C ABI, from plain C11 (with
 * POSIX processes, files and sleeps): the workload registry (a workload
 * described as JSON, figures, per-process GPU memory, a process that ends)
 * and the transfer scheduler (reads of real files into buffers and a
 * staging directory, a C policy that boosts, delays, reduces prefetch and
 * stages and is seen to change the order, a GPU monitor's rule pack,
 * explanations, stats, and every error path with its message). Includes
 * nothing from cohort but cohort.h; c_test.c's main() runs it.
 */
#define _XOPEN_SOURCE 700 /* fork, kill, waitpid, mkdir, nanosleep */

#include "cohort.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef COHORT_GPU_TEST_DATA
#error "COHORT_GPU_TEST_DATA must name tests/data/gpu/capi"
#endif

static int data_passed;
static int data_failed;

static void data_fail(const char* file, int line, const char* what) {
    ++data_failed;
    fprintf(stderr, "%s:%d: FAILED: %s\n", file, line, what);
}

/* status must be `code`; unless it is COHORT_OK, the last error must contain `needle`. */
static void check_status(const char* file, int line, const char* call, int status, int code, const char* needle) {
    const char* message = cohort_last_error();
    if (status == code && (code == COHORT_OK || strstr(message, needle) != NULL)) {
        ++data_passed;
        return;
    }
    data_fail(file, line, call);
    fprintf(stderr, "    returned %d (expected %d), last error: \"%s\"\n", status, code, message);
    if (code != COHORT_OK) fprintf(stderr, "    expected it to contain \"%s\"\n", needle);
}

static void check_has(const char* file, int line, const char* what, const char* text, const char* needle, int want) {
    const int has = text != NULL && strstr(text, needle) != NULL;
    if (has == want) {
        ++data_passed;
        return;
    }
    data_fail(file, line, what);
    fprintf(stderr, "    got \"%s\"\n    %s \"%s\"\n", text ? text : "(null)", want ? "lacks" : "has", needle);
}

#define CHECK(cond) ((cond) ? (void)++data_passed : data_fail(__FILE__, __LINE__, #cond))
#define CHECK_OK(call) check_status(__FILE__, __LINE__, #call, (call), COHORT_OK, "")
#define CHECK_ERR(call, code, needle) check_status(__FILE__, __LINE__, #call, (call), (code), (needle))
#define CHECK_HAS(text, needle) check_has(__FILE__, __LINE__, #text, (text), (needle), 1)
#define CHECK_LACKS(text, needle) check_has(__FILE__, __LINE__, #text, (text), (needle), 0)
#define BAD_ARGUMENT COHORT_ERR_INVALID_ARGUMENT

static const char* g_scratch;
static char g_file[1024];  /* FILE_BYTES bytes: byte i is i % 251 */
#define FILE_BYTES 65536

static void sleep_seconds(double seconds) {
    struct timespec ts;
    ts.tv_sec = (time_t)seconds;
    ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
    nanosleep(&ts, NULL);
}

static int pattern_ok(const unsigned char* data, size_t length, uint64_t offset) {
    for (size_t i = 0; i < length; ++i)
        if (data[i] != (unsigned char)((offset + i) % 251)) return 0;
    return 1;
}

static void write_data_file(void) {
    snprintf(g_file, sizeof g_file, "%s/data-path.bin", g_scratch);
    FILE* f = fopen(g_file, "wb");
    CHECK(f != NULL);
    if (f == NULL) return;
    for (unsigned i = 0; i < FILE_BYTES; ++i) fputc((int)(i % 251), f);
    fclose(f);
}

/* ------------------------------------------------------------ registry */

static int32_t alive_4242(void* user_data, int64_t pid) {
    const int* ended = (const int*)user_data;
    return pid == 4242 && !*ended ? 1 : 0;
}

static void test_registry_errors(cohort_workload_registry* registry) {
    char json[512];
    const long pid = (long)getpid();
    CHECK_ERR(cohort_workload_registry_add(NULL, "{}"), BAD_ARGUMENT, "registry must not be NULL");
    CHECK_ERR(cohort_workload_registry_add(registry, NULL), BAD_ARGUMENT, "workload_json must be a JSON object");
    CHECK_ERR(cohort_workload_registry_add(registry, "{\"id\": "), BAD_ARGUMENT, "workload_json is not JSON");
    CHECK_ERR(cohort_workload_registry_add(registry, "[1]"), BAD_ARGUMENT, "workload_json must be a JSON object");
    CHECK_ERR(cohort_workload_registry_add(registry, "{\"pid\": 1, \"memory_bytes\": 1}"), BAD_ARGUMENT,
              "workload_json lacks the field \"id\"");
    CHECK_ERR(cohort_workload_registry_add(registry, "{\"id\": \"w\", \"pid\": \"1\", \"memory_bytes\": 1}"),
              BAD_ARGUMENT, "workload_json field \"pid\" must be a whole number");
    snprintf(json, sizeof json, "{\"id\": \"w\", \"pid\": %ld, \"memory_bytes\": 1, \"gpu\": [0]}", pid);
    CHECK_ERR(cohort_workload_registry_add(registry, json), BAD_ARGUMENT, "unknown field \"gpu\"");
    snprintf(json, sizeof json, "{\"id\": \"w\", \"pid\": %ld, \"memory_bytes\": 1, \"access\": \"striped\"}", pid);
    CHECK_ERR(cohort_workload_registry_add(registry, json), BAD_ARGUMENT,
              "field \"access\" must be \"sequential\" or \"random\", got \"striped\"");
    snprintf(json, sizeof json, "{\"id\": \"w\", \"pid\": %ld, \"memory_bytes\": 1, \"gpus\": [0, -1]}", pid);
    CHECK_ERR(cohort_workload_registry_add(registry, json), BAD_ARGUMENT, "field \"gpus\" must be an array of GPU");
    snprintf(json, sizeof json, "{\"id\": \"w\", \"pid\": %ld, \"memory_bytes\": 1, \"gpus\": [0, 0]}", pid);
    CHECK_ERR(cohort_workload_registry_add(registry, json), BAD_ARGUMENT, "workload 'w': gpus lists GPU 0 twice");
    CHECK_ERR(cohort_workload_registry_add(registry, "{\"id\": \"w\", \"pid\": -3, \"memory_bytes\": 1}"),
              BAD_ARGUMENT, "pid must be a process id > 0, got -3");
    snprintf(json, sizeof json, "{\"id\": \"w\", \"pid\": %ld, \"memory_bytes\": 0}", pid);
    CHECK_ERR(cohort_workload_registry_add(registry, json), BAD_ARGUMENT, "memory_bytes");
    snprintf(json, sizeof json, "{\"id\": \"\", \"pid\": %ld, \"memory_bytes\": 1}", pid);
    CHECK_ERR(cohort_workload_registry_add(registry, json), BAD_ARGUMENT, "id");
    snprintf(json, sizeof json, "{\"id\": \"w\", \"pid\": %ld, \"memory_bytes\": 1, \"model_files\": [\"\"]}", pid);
    CHECK_ERR(cohort_workload_registry_add(registry, json), BAD_ARGUMENT, "model_files");
    CHECK_ERR(cohort_workload_registry_remove(registry, "nobody"), COHORT_ERR_NOT_FOUND,
              "no workload 'nobody' is registered");
    CHECK_ERR(cohort_workload_registry_update(registry, "nobody", 1, 1, 1), COHORT_ERR_NOT_FOUND,
              "no workload 'nobody' is registered");
    CHECK_ERR(cohort_workload_registry_update(registry, NULL, 1, 1, 1), BAD_ARGUMENT, "id must not be NULL");
}

static void test_registry(void) {
    cohort_workload_registry* registry = NULL;
    CHECK_ERR(cohort_workload_registry_create(NULL, NULL, NULL), BAD_ARGUMENT, "out must not be NULL");
    CHECK_OK(cohort_workload_registry_create(NULL, NULL, &registry));
    test_registry_errors(registry);

    char json[1024];
    snprintf(json, sizeof json,
             "{\"id\": \"train\", \"pid\": %ld, \"gpus\": [1, 0], \"memory_bytes\": 64424509440, "
             "\"priority\": 10, \"dataset_files\": [\"/data/a.tar\"], \"model_files\": [\"/m/llama.pt\"], "
             "\"access\": \"random\"}",
             (long)getpid());
    CHECK_OK(cohort_workload_registry_add(registry, json));
    CHECK_ERR(cohort_workload_registry_add(registry, json), BAD_ARGUMENT, "workload 'train' is already registered");
    CHECK_OK(cohort_workload_registry_update(registry, "train", 2.5e9, 256, 1800));
    CHECK_ERR(cohort_workload_registry_update(registry, "train", -1, 256, 1800), BAD_ARGUMENT,
              "io_bytes_per_second must be a number >= 0, got -1");
    CHECK_OK(cohort_workload_registry_observe_memory(registry, NULL, NULL, 0));
    const int64_t pids[2] = {(int64_t)getpid(), 99999999};
    const uint64_t bytes[2] = {123456789, 5};
    CHECK_OK(cohort_workload_registry_observe_memory(registry, pids, bytes, 2));
    const int64_t twice[2] = {7, 7};
    CHECK_ERR(cohort_workload_registry_observe_memory(registry, twice, bytes, 2), BAD_ARGUMENT,
              "pids[1] is 7, listed twice");
    CHECK_ERR(cohort_workload_registry_observe_memory(registry, NULL, bytes, 1), BAD_ARGUMENT,
              "pids must not be NULL");

    char* out = NULL;
    size_t length = 0;
    CHECK_OK(cohort_workload_registry_find(registry, "train", &out, &length));
    CHECK(out != NULL && length == strlen(out));
    CHECK_HAS(out, "\"id\":\"train\"");
    CHECK_HAS(out, "\"gpus\":[1,0]");
    CHECK_HAS(out, "\"memory_bytes\":64424509440");
    CHECK_HAS(out, "\"priority\":10");
    CHECK_HAS(out, "\"model_files\":[\"/m/llama.pt\"]");
    CHECK_HAS(out, "\"access\":\"random\"");
    CHECK_HAS(out, "\"batch_size\":256");
    CHECK_HAS(out, "\"io_bytes_per_second\":2.5E9");
    /* Counted on the workload's first GPU, 1. */
    CHECK_HAS(out, "\"gpu_memory\":[{\"gpu\":1,\"bytes\":123456789}]");
    CHECK_HAS(out, "\"gpu_memory_total\":123456789");
    cohort_free(out);
    out = NULL;
    CHECK_ERR(cohort_workload_registry_find(registry, "eval", &out, NULL), COHORT_ERR_NOT_FOUND,
              "no workload 'eval' is registered (or its process ended)");
    CHECK(out == NULL);

    /* A child process registered, then killed: prune drops it. */
    pid_t child = fork();
    if (child == 0) {
        pause();
        _exit(0);
    }
    CHECK(child > 0);
    snprintf(json, sizeof json, "{\"id\": \"child\", \"pid\": %ld, \"memory_bytes\": 1}", (long)child);
    CHECK_OK(cohort_workload_registry_add(registry, json));
    uint64_t size = 0;
    CHECK_OK(cohort_workload_registry_size(registry, &size));
    CHECK(size == 2);
    CHECK_OK(cohort_workload_registry_prune(registry, &out, &length));
    CHECK_HAS(out, "[]");
    cohort_free(out);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    /* Its pid no longer runs: adding it again is NOT_FOUND. */
    snprintf(json, sizeof json, "{\"id\": \"child2\", \"pid\": %ld, \"memory_bytes\": 1}", (long)child);
    CHECK_ERR(cohort_workload_registry_add(registry, json), COHORT_ERR_NOT_FOUND, "is not running");
    CHECK_OK(cohort_workload_registry_prune(registry, &out, &length));
    CHECK_HAS(out, "[\"child\"]");
    cohort_free(out);
    CHECK_OK(cohort_workload_registry_prune(registry, NULL, NULL));
    CHECK_OK(cohort_workload_registry_size(registry, &size));
    CHECK(size == 1);
    CHECK_OK(cohort_workload_registry_list(registry, &out, &length));
    CHECK_HAS(out, "[{\"id\":\"train\"");
    CHECK_LACKS(out, "child");
    cohort_free(out);
    CHECK_OK(cohort_workload_registry_remove(registry, "train"));
    CHECK_OK(cohort_workload_registry_list(registry, &out, NULL));
    CHECK_HAS(out, "[]");
    cohort_free(out);
    cohort_workload_registry_destroy(registry);
    cohort_workload_registry_destroy(NULL);
}

/* Per-process memory from a monitor's simulated sample (process 4242 holds
 * 70 GiB on GPU 0), with a liveness check of our own. */
static void test_registry_monitor(void) {
    int ended = 0;
    cohort_workload_registry* registry = NULL;
    CHECK_OK(cohort_workload_registry_create(alive_4242, &ended, &registry));
    CHECK_OK(cohort_workload_registry_add(registry, "{\"id\": \"sim\", \"pid\": 4242, \"gpus\": [0], "
                                                    "\"memory_bytes\": 1000}"));
    CHECK_ERR(cohort_workload_registry_add(registry, "{\"id\": \"x\", \"pid\": 4243, \"memory_bytes\": 1}"),
              COHORT_ERR_NOT_FOUND, "process 4243 is not running");

    cohort_gpu_probe* probe = NULL;
    cohort_gpu_monitor* monitor = NULL;
    CHECK_OK(cohort_gpu_probe_open("file:" COHORT_GPU_TEST_DATA "/gpus.yaml", 2.0, &probe));
    CHECK_OK(cohort_gpu_monitor_create(probe, 1.0, 4, COHORT_GPU_TEST_DATA "/io_rules.yaml", &monitor));
    CHECK_ERR(cohort_workload_registry_observe_monitor(registry, monitor), COHORT_ERR_NOT_FOUND,
              "the monitor has no sample yet");
    CHECK_ERR(cohort_workload_registry_observe_monitor(registry, NULL), BAD_ARGUMENT, "monitor must not be NULL");
    CHECK_OK(cohort_gpu_monitor_sample_now(monitor, NULL, NULL));
    CHECK_OK(cohort_workload_registry_observe_monitor(registry, monitor));
    char* out = NULL;
    CHECK_OK(cohort_workload_registry_find(registry, "sim", &out, NULL));
    CHECK_HAS(out, "\"gpu_memory\":[{\"gpu\":0,\"bytes\":75161927680}]");
    cohort_free(out);
    ended = 1;
    out = NULL;
    CHECK_ERR(cohort_workload_registry_find(registry, "sim", &out, NULL), COHORT_ERR_NOT_FOUND, "'sim'");
    uint64_t size = 9;
    CHECK_OK(cohort_workload_registry_size(registry, &size));
    CHECK(size == 0); /* find dropped it */
    cohort_workload_registry_destroy(registry);
    cohort_gpu_monitor_destroy(monitor);
    cohort_gpu_probe_destroy(probe);
}

/* ----------------------------------------------------------- scheduler */

/* Order the transfers finished in, from the completion callbacks. */
static char g_order[16][32];
static atomic_int g_done_count;
static atomic_int g_release;     /* the gate's callback holds its I/O thread until set */
static atomic_int g_starve;      /* the policy stops prefetching while set */
static atomic_int g_delay_x;     /* the policy holds "x" when it is about to start the first time */
static atomic_int g_x_asks;
static atomic_int g_policy_calls;
static int g_action_errors;      /* checks run inside the policy */

static void record_done(void* user_data, const char* id, int32_t status, const char* result_json, size_t length) {
    (void)user_data;
    const int i = atomic_fetch_add(&g_done_count, 1);
    if (i < 16) snprintf(g_order[i], sizeof g_order[i], "%s", id);
    if (status != COHORT_OK || strlen(result_json) != length || strstr(result_json, "\"decisions\":[") == NULL)
        ++g_action_errors;
    if (strcmp(id, "gate") == 0)
        while (!atomic_load(&g_release)) sleep_seconds(0.002);
}

static int32_t steering_policy(void* user_data, const char* id, const char* workload, const char* kind,
                               uint64_t bytes, int64_t priority, int32_t prefetch, cohort_transfer_actions* actions) {
    (void)user_data;
    (void)workload;
    (void)bytes;
    (void)priority;
    atomic_fetch_add(&g_policy_calls, 1);
    const int32_t boost = 50;
    if (strcmp(id, "y") == 0 && cohort_transfer_actions_add(actions, "boost_y", "prioritize", "memory", 1, 0, &boost))
        ++g_action_errors;
    /* The first ask is at submit (for a boost only); the second at start. */
    if (strcmp(id, "x") == 0 && atomic_fetch_add(&g_x_asks, 1) == 1 && atomic_load(&g_delay_x)) {
        if (cohort_transfer_actions_add(actions, "hold_x", "delay_transfer", "thermal", 1, 0.5, NULL) ||
            cohort_transfer_actions_add_value(actions, "gpu_temperature", 92))
            ++g_action_errors;
    }
    if (atomic_load(&g_starve) &&
        cohort_transfer_actions_add(actions, "no_prefetch", "reduce_prefetch", "memory", 0, 0, NULL))
        ++g_action_errors;
    if (strcmp(kind, "model") == 0 &&
        cohort_transfer_actions_add(actions, "stage_models", "stage_transfer", NULL, 1, 0, NULL))
        ++g_action_errors;
    if (strcmp(id, "broken") == 0) {
        cohort_transfer_actions_set_error(actions, "no GPU data");
        return 7;
    }
    /* The sink's own errors, checked once. */
    if (strcmp(id, "gate") == 0 && prefetch == 0) {
        if (cohort_transfer_actions_add(actions, "r", "slow_down", NULL, 1, 0, NULL) != BAD_ARGUMENT ||
            strstr(cohort_last_error(), "type 'slow_down' is not an action") == NULL)
            ++g_action_errors;
        if (cohort_transfer_actions_add(actions, "r", "reduce_prefetch", NULL, -1, 0, NULL) != BAD_ARGUMENT ||
            strstr(cohort_last_error(), "factor must be a finite number >= 0") == NULL)
            ++g_action_errors;
        if (cohort_transfer_actions_add(actions, "r", "delay_transfer", NULL, 1, -2, NULL) != BAD_ARGUMENT ||
            strstr(cohort_last_error(), "delay_seconds must be from 0 to a year") == NULL)
            ++g_action_errors;
        if (cohort_transfer_actions_add(NULL, "r", "prioritize", NULL, 1, 0, NULL) != BAD_ARGUMENT) ++g_action_errors;
    }
    return 0;
}

static int32_t value_first_policy(void* user_data, const char* id, const char* workload, const char* kind,
                                  uint64_t bytes, int64_t priority, int32_t prefetch,
                                  cohort_transfer_actions* actions) {
    (void)id, (void)workload, (void)kind, (void)bytes, (void)priority, (void)prefetch;
    int* failures = (int*)user_data;
    if (cohort_transfer_actions_add_value(actions, "x", 1) != BAD_ARGUMENT ||
        strstr(cohort_last_error(), "no action to add value 'x' to") == NULL)
        ++*failures;
    return 0;
}

static cohort_transfer* submit(cohort_transfer_scheduler* scheduler, const char* id, int priority, int prefetch,
                               unsigned char* buffer, uint64_t length) {
    char json[1600];
    snprintf(json, sizeof json, "{\"id\": \"%s\", \"path\": \"%s\", \"offset\": 100, \"length\": %llu, "
             "\"priority\": %d, \"prefetch\": %s}",
             id, g_file, (unsigned long long)length, priority, prefetch ? "true" : "false");
    cohort_transfer* t = NULL;
    CHECK_OK(cohort_transfer_submit(scheduler, json, buffer, length, record_done, NULL, &t));
    return t;
}

static void test_scheduler_errors(void) {
    cohort_transfer_scheduler* s = NULL;
    CHECK_ERR(cohort_transfer_scheduler_create(NULL, NULL, NULL, NULL, NULL, NULL), BAD_ARGUMENT,
              "out must not be NULL");
    CHECK_ERR(cohort_transfer_scheduler_create("{\"workers\": 0}", NULL, NULL, NULL, NULL, &s), BAD_ARGUMENT,
              "workers must be 1 to 256 I/O threads, got 0");
    CHECK_ERR(cohort_transfer_scheduler_create("{\"workers\": 300}", NULL, NULL, NULL, NULL, &s), BAD_ARGUMENT,
              "workers must be 1 to 256 I/O threads, got 300");
    CHECK_ERR(cohort_transfer_scheduler_create("{\"workers\": -1}", NULL, NULL, NULL, NULL, &s), BAD_ARGUMENT,
              "options_json field \"workers\" must be a whole number");
    CHECK_ERR(cohort_transfer_scheduler_create("{\"aging_per_second\": 0}", NULL, NULL, NULL, NULL, &s),
              BAD_ARGUMENT, "aging_per_second must be more than 0");
    CHECK_ERR(cohort_transfer_scheduler_create("{\"prefetch_depth\": 0}", NULL, NULL, NULL, NULL, &s), BAD_ARGUMENT,
              "prefetch_depth must be at least 1");
    CHECK_ERR(cohort_transfer_scheduler_create("{\"staging_dir\": \"/no/such/dir\"}", NULL, NULL, NULL, NULL, &s),
              BAD_ARGUMENT, "staging_dir /no/such/dir is not a directory; create it first");
    CHECK_ERR(cohort_transfer_scheduler_create("{\"worker\": 2}", NULL, NULL, NULL, NULL, &s), BAD_ARGUMENT,
              "options_json has an unknown field \"worker\"");
    CHECK_ERR(cohort_transfer_scheduler_create("{\"workers\": ", NULL, NULL, NULL, NULL, &s), BAD_ARGUMENT,
              "options_json is not JSON");
    cohort_gpu_monitor* fake = (cohort_gpu_monitor*)&s; /* never used: refused first */
    CHECK_ERR(cohort_transfer_scheduler_create(NULL, NULL, fake, steering_policy, NULL, &s), BAD_ARGUMENT,
              "give a monitor or a policy callback, not both");
    CHECK(s == NULL);

    CHECK_OK(cohort_transfer_scheduler_create("", NULL, NULL, NULL, NULL, &s));
    unsigned char buffer[64];
    cohort_transfer* t = NULL;
    char json[1600];
    CHECK_ERR(cohort_transfer_submit(s, NULL, buffer, 64, NULL, NULL, &t), BAD_ARGUMENT,
              "request_json must be a JSON object");
    CHECK_ERR(cohort_transfer_submit(s, "{\"id\": \"a\", \"length\": 4}", buffer, 64, NULL, NULL, &t), BAD_ARGUMENT,
              "request_json lacks the field \"path\"");
    snprintf(json, sizeof json, "{\"id\": \"a\", \"path\": \"%s\", \"length\": 4, \"prefetch\": 1}", g_file);
    CHECK_ERR(cohort_transfer_submit(s, json, buffer, 64, NULL, NULL, &t), BAD_ARGUMENT,
              "request_json field \"prefetch\" must be true or false");
    snprintf(json, sizeof json, "{\"id\": \"a\", \"path\": \"%s\", \"length\": 4, \"size\": 4}", g_file);
    CHECK_ERR(cohort_transfer_submit(s, json, buffer, 64, NULL, NULL, &t), BAD_ARGUMENT,
              "request_json has an unknown field \"size\"");
    snprintf(json, sizeof json, "{\"id\": \"a\", \"path\": \"%s\", \"length\": 0}", g_file);
    CHECK_ERR(cohort_transfer_submit(s, json, buffer, 64, NULL, NULL, &t), BAD_ARGUMENT,
              "transfer 'a': length is 0");
    snprintf(json, sizeof json, "{\"id\": \"a\", \"path\": \"%s\", \"length\": 100}", g_file);
    CHECK_ERR(cohort_transfer_submit(s, json, buffer, 64, NULL, NULL, &t), BAD_ARGUMENT,
              "transfer 'a': buffer holds 64 bytes, fewer than length 100");
    CHECK_ERR(cohort_transfer_submit(s, json, NULL, 0, NULL, NULL, &t), BAD_ARGUMENT,
              "transfer 'a': no destination");
    CHECK_ERR(cohort_transfer_submit(s, json, NULL, 100, NULL, NULL, &t), BAD_ARGUMENT,
              "transfer 'a': buffer is NULL but buffer_length is 100");
    CHECK_ERR(cohort_transfer_submit(s, json, buffer, 0, NULL, NULL, &t), BAD_ARGUMENT,
              "transfer 'a': buffer_length is 0");
    snprintf(json, sizeof json, "{\"id\": \"a\", \"path\": \"%s\", \"length\": 4, \"stage\": true}", g_file);
    CHECK_ERR(cohort_transfer_submit(s, json, NULL, 0, NULL, NULL, &t), BAD_ARGUMENT,
              "stage is set, but the scheduler has no staging_dir");
    snprintf(json, sizeof json, "{\"id\": \"a\", \"path\": \"%s\", \"length\": 4, \"deadline_seconds\": -1}", g_file);
    CHECK_ERR(cohort_transfer_submit(s, json, buffer, 64, NULL, NULL, &t), BAD_ARGUMENT,
              "\"deadline_seconds\" (seconds after submit) must be from 0 to a year, got -1");
    CHECK_ERR(cohort_transfer_submit(NULL, json, buffer, 64, NULL, NULL, &t), BAD_ARGUMENT,
              "scheduler must not be NULL");
    CHECK(t == NULL);

    /* A read past the end of the file is a result, not a submit error. */
    snprintf(json, sizeof json, "{\"id\": \"short\", \"path\": \"%s\", \"offset\": %d, \"length\": 64}", g_file,
             FILE_BYTES - 10);
    CHECK_OK(cohort_transfer_submit(s, json, buffer, 64, NULL, NULL, &t));
    CHECK_ERR(cohort_transfer_wait(t, 10), COHORT_ERR_IO, "the file ends after 10 of the 64 bytes asked for");
    char* out = NULL;
    CHECK_OK(cohort_transfer_result(t, &out, NULL));
    CHECK_HAS(out, "\"status\":3");
    CHECK_HAS(out, "\"bytes\":0");
    CHECK_HAS(out, "at offset 65526");
    cohort_free(out);
    CHECK_ERR(cohort_transfer_wait(t, -1), BAD_ARGUMENT, "limit_seconds must be 0 or positive");
    cohort_transfer_destroy(t);
    snprintf(json, sizeof json, "{\"id\": \"missing\", \"path\": \"%s.nope\", \"length\": 4}", g_file);
    CHECK_OK(cohort_transfer_submit(s, json, buffer, 64, NULL, NULL, &t));
    CHECK_ERR(cohort_transfer_wait(t, 0), COHORT_ERR_IO, "transfer 'missing'");
    cohort_transfer_destroy(t);

    out = NULL;
    CHECK_ERR(cohort_transfer_scheduler_explain(s, "nope", &out, NULL), COHORT_ERR_NOT_FOUND,
              "no transfer 'nope' is queued or running");
    CHECK(out == NULL);
    cohort_transfer_stats stats;
    CHECK_OK(cohort_transfer_scheduler_stats(s, &stats));
    CHECK(stats.submitted == 2 && stats.failed == 2 && stats.completed == 0 && stats.bytes == 0);
    CHECK_ERR(cohort_transfer_scheduler_stats(s, NULL), BAD_ARGUMENT, "out must not be NULL");
    cohort_transfer_scheduler_destroy(s);
    cohort_transfer_scheduler_destroy(NULL);
    cohort_transfer_destroy(NULL);
}

/* One I/O thread, held by "gate" while the others queue; the policy boosts
 * y, holds x once, and stops prefetching: y, z, w, x finish in that order
 * (by priority alone it would be z, x, y, w), and the prefetch p, priority
 * 100, only once prefetching resumes. */
static void test_policy_order(void) {
    atomic_store(&g_done_count, 0);
    atomic_store(&g_release, 0);
    atomic_store(&g_starve, 1);
    atomic_store(&g_delay_x, 1);
    atomic_store(&g_x_asks, 0);
    g_action_errors = 0;
    cohort_transfer_scheduler* s = NULL;
    CHECK_OK(cohort_transfer_scheduler_create("{\"workers\": 1, \"prefetch_depth\": 4}", NULL, NULL, steering_policy,
                                              NULL, &s));
    unsigned char b[6][256];
    cohort_transfer* gate = submit(s, "gate", 0, 0, b[0], 256);
    while (atomic_load(&g_done_count) == 0) sleep_seconds(0.002); /* the gate holds the one I/O thread */
    cohort_transfer* p = submit(s, "p", 100, 1, b[1], 256);
    cohort_transfer* x = submit(s, "x", 0, 0, b[2], 256);
    cohort_transfer* y = submit(s, "y", 0, 0, b[3], 256);
    cohort_transfer* z = submit(s, "z", 10, 0, b[4], 256);
    cohort_transfer* w = submit(s, "w", -5, 0, b[5], 256);
    cohort_transfer* twice = NULL;
    CHECK_ERR(cohort_transfer_submit(s, "{\"id\": \"z\", \"path\": \"/x\", \"length\": 1}", b[0], 1, NULL, NULL,
                                     &twice),
              BAD_ARGUMENT, "transfer 'z': a transfer with this id is already queued or running");
    CHECK(twice == NULL);
    int32_t done = 1;
    CHECK_OK(cohort_transfer_test(z, &done));
    CHECK(done == 0);
    char* out = NULL;
    CHECK_ERR(cohort_transfer_result(z, &out, NULL), BAD_ARGUMENT, "transfer 'z' has not finished");
    CHECK_ERR(cohort_transfer_wait(z, 0.05), COHORT_ERR_TIMEOUT, "transfer 'z' has not finished after 0.05 s");
    atomic_store(&g_release, 1);
    CHECK_OK(cohort_transfer_wait(gate, 0));
    CHECK_OK(cohort_transfer_wait(x, 30));
    CHECK_OK(cohort_transfer_wait(w, 30));
    CHECK_OK(cohort_transfer_test(p, &done));
    CHECK(done == 0); /* still starved */
    cohort_transfer_stats stats;
    CHECK_OK(cohort_transfer_scheduler_stats(s, &stats));
    CHECK(stats.prefetch_factor == 0.0 && stats.prefetch_depth == 0);
    CHECK(stats.queued == 1 && stats.prefetch_waits >= 1);
    atomic_store(&g_starve, 0);
    CHECK_OK(cohort_transfer_wait(p, 30));
    CHECK_OK(cohort_transfer_wait(y, 30));
    CHECK_OK(cohort_transfer_wait(z, 30));
    CHECK(atomic_load(&g_done_count) == 6);
    const char* expected[6] = {"gate", "y", "z", "w", "x", "p"};
    for (int i = 0; i < 6; ++i) {
        if (strcmp(g_order[i], expected[i]) != 0) {
            data_fail(__FILE__, __LINE__, "finish order");
            fprintf(stderr, "    position %d: %s, expected %s\n", i, g_order[i], expected[i]);
        } else {
            ++data_passed;
        }
    }
    CHECK(g_action_errors == 0);
    CHECK(pattern_ok(b[3], 256, 100) && pattern_ok(b[1], 256, 100));

    const char* id = NULL;
    CHECK_OK(cohort_transfer_id(y, &id));
    CHECK(id != NULL && strcmp(id, "y") == 0);
    CHECK_OK(cohort_transfer_result(y, &out, NULL));
    CHECK_HAS(out, "\"id\":\"y\",\"status\":0");
    CHECK_HAS(out, "\"rule\":\"boost_y\",\"action\":\"prioritize\"");
    CHECK_HAS(out, "priority 0 -> 50 (boost 50)");
    CHECK_HAS(out, "\"bytes\":256");
    cohort_free(out);
    CHECK_OK(cohort_transfer_scheduler_explain(s, "x", &out, NULL));
    CHECK_HAS(out, "\"rule\":\"hold_x\",\"action\":\"delay_transfer\",\"values\":{\"gpu_temperature\":9.2E1}");
    CHECK_HAS(out, "\"effect\":\"held for 0.5 s\",\"delay_seconds\":5E-1");
    CHECK_HAS(out, "\"action\":\"dispatch\"");
    cohort_free(out);
    CHECK_OK(cohort_transfer_scheduler_explain(s, "p", &out, NULL));
    CHECK_HAS(out, "\"rule\":\"no_prefetch\",\"action\":\"reduce_prefetch\"");
    CHECK_HAS(out, "prefetch depth 4 x 0 = 0");
    cohort_free(out);
    CHECK_OK(cohort_transfer_scheduler_stats(s, &stats));
    CHECK(stats.submitted == 6 && stats.completed == 6 && stats.failed == 0 && stats.queued == 0);
    CHECK(stats.running == 0 && stats.prioritized == 1 && stats.delayed == 1);
    CHECK(stats.total_delay_seconds > 0.49 && stats.total_delay_seconds < 0.51);
    CHECK(stats.bytes == 6 * 256 && stats.bytes_per_second > 0);
    CHECK(stats.memory_pressure_events >= 2 && stats.temperature_events == 1);
    CHECK(stats.prefetch_factor == 1.0 && stats.prefetch_depth == 4);
    CHECK(atomic_load(&g_policy_calls) >= 12);
    cohort_transfer* all[6] = {gate, p, x, y, z, w};
    for (int i = 0; i < 6; ++i) cohort_transfer_destroy(all[i]);
    cohort_transfer_scheduler_destroy(s);
}

/* Staging by request and by a policy's stage_transfer; a failing policy;
 * a missed deadline; the queued transfers a shutdown completes. */
static void test_staging_and_shutdown(void) {
    char dir[1100], json[2400];
    snprintf(dir, sizeof dir, "%s/staging", g_scratch);
    mkdir(dir, 0700);
    snprintf(json, sizeof json, "{\"staging_dir\": \"%s\", \"workers\": 1}", dir);
    atomic_store(&g_done_count, 0);
    atomic_store(&g_release, 1);
    atomic_store(&g_starve, 0);
    atomic_store(&g_delay_x, 0);
    g_action_errors = 0;
    cohort_transfer_scheduler* s = NULL;
    CHECK_OK(cohort_transfer_scheduler_create(json, NULL, NULL, steering_policy, NULL, &s));

    cohort_transfer* t = NULL;
    snprintf(json, sizeof json, "{\"id\": \"shard/1\", \"path\": \"%s\", \"offset\": 1000, \"length\": 3000, "
             "\"stage\": true}", g_file);
    CHECK_OK(cohort_transfer_submit(s, json, NULL, 0, NULL, NULL, &t));
    CHECK_OK(cohort_transfer_wait(t, 30));
    char* out = NULL;
    CHECK_OK(cohort_transfer_result(t, &out, NULL));
    CHECK_HAS(out, "-shard_1\"");
    char* staged = strstr(out, "\"staged\":\"");
    CHECK(staged != NULL);
    if (staged != NULL) {
        staged += strlen("\"staged\":\"");
        *strchr(staged, '"') = '\0';
        FILE* f = fopen(staged, "rb");
        CHECK(f != NULL);
        if (f != NULL) {
            unsigned char data[3001];
            CHECK(fread(data, 1, sizeof data, f) == 3000);
            CHECK(pattern_ok(data, 3000, 1000));
            fclose(f);
        }
        CHECK(remove(staged) == 0);
    }
    cohort_free(out);
    cohort_transfer_destroy(t);

    /* A model file: the policy's stage_transfer sends it to the staging
     * directory although a buffer was given; the buffer is left alone. */
    unsigned char buffer[512];
    memset(buffer, 0xEE, sizeof buffer);
    snprintf(json, sizeof json, "{\"id\": \"llama\", \"path\": \"%s\", \"length\": 512, \"kind\": \"model\"}", g_file);
    CHECK_OK(cohort_transfer_submit(s, json, buffer, sizeof buffer, NULL, NULL, &t));
    CHECK_OK(cohort_transfer_wait(t, 30));
    CHECK_OK(cohort_transfer_result(t, &out, NULL));
    CHECK_HAS(out, "\"rule\":\"stage_models\",\"action\":\"stage_transfer\"");
    CHECK_HAS(out, "instead of the caller's buffer");
    CHECK(buffer[0] == 0xEE && buffer[511] == 0xEE);
    staged = strstr(out, "\"staged\":\"");
    if (staged != NULL) {
        staged += strlen("\"staged\":\"");
        *strchr(staged, '"') = '\0';
        CHECK(remove(staged) == 0);
    }
    cohort_free(out);
    cohort_transfer_destroy(t);

    /* A policy that fails is recorded; the transfer goes ahead. */
    snprintf(json, sizeof json, "{\"id\": \"broken\", \"path\": \"%s\", \"length\": 16, \"deadline_seconds\": 0}",
             g_file);
    CHECK_OK(cohort_transfer_submit(s, json, buffer, sizeof buffer, NULL, NULL, &t));
    CHECK_OK(cohort_transfer_wait(t, 30));
    CHECK_OK(cohort_transfer_result(t, &out, NULL));
    CHECK_HAS(out, "\"action\":\"policy\"");
    CHECK_HAS(out, "the policy failed (the policy callback returned 7: no GPU data); no rule applied");
    CHECK_HAS(out, "\"missed_deadline\":true");
    CHECK_HAS(out, "\"action\":\"deadline\"");
    CHECK(pattern_ok(buffer, 16, 0));
    cohort_free(out);
    cohort_transfer_destroy(t);
    cohort_transfer_stats stats;
    CHECK_OK(cohort_transfer_scheduler_stats(s, &stats));
    CHECK(stats.staged == 2 && stats.misses == 1 && stats.completed == 3);

    /* Shutdown: a transfer held (for 0.5 s) is completed with CLOSED, and
     * its handle outlives the scheduler. */
    atomic_store(&g_delay_x, 1);
    atomic_store(&g_x_asks, 0);
    snprintf(json, sizeof json, "{\"id\": \"x\", \"path\": \"%s\", \"length\": 16}", g_file);
    CHECK_OK(cohort_transfer_submit(s, json, buffer, sizeof buffer, NULL, NULL, &t));
    sleep_seconds(0.05);
    cohort_transfer_scheduler_destroy(s);
    int32_t done = 0;
    CHECK_OK(cohort_transfer_test(t, &done));
    CHECK(done == 1);
    CHECK_ERR(cohort_transfer_wait(t, 1), COHORT_ERR_CLOSED, "transfer 'x': the scheduler shut down before it started");
    cohort_transfer_destroy(t);
    CHECK(g_action_errors == 0);

    int failures = 0;
    CHECK_OK(cohort_transfer_scheduler_create(NULL, NULL, NULL, value_first_policy, &failures, &s));
    snprintf(json, sizeof json, "{\"id\": \"v\", \"path\": \"%s\", \"length\": 16}", g_file);
    CHECK_OK(cohort_transfer_submit(s, json, buffer, sizeof buffer, NULL, NULL, &t));
    CHECK_OK(cohort_transfer_wait(t, 30));
    CHECK(failures == 0);
    cohort_transfer_destroy(t);
    cohort_transfer_scheduler_destroy(s);
}

/* A registry's workloads and a GPU monitor's rule pack: GPU 0 of gpus.yaml
 * is 90 % full, so io_rules.yaml's memory_pressure gives 0.25. */
static void test_registry_and_monitor_policy(void) {
    cohort_workload_registry* registry = NULL;
    CHECK_OK(cohort_workload_registry_create(NULL, NULL, &registry));
    char json[1600];
    snprintf(json, sizeof json, "{\"id\": \"train\", \"pid\": %ld, \"memory_bytes\": 1, \"priority\": 7}",
             (long)getpid());
    CHECK_OK(cohort_workload_registry_add(registry, json));
    cohort_gpu_probe* probe = NULL;
    cohort_gpu_monitor* monitor = NULL;
    CHECK_OK(cohort_gpu_probe_open("file:" COHORT_GPU_TEST_DATA "/gpus.yaml", 2.0, &probe));
    CHECK_OK(cohort_gpu_monitor_create(probe, 1.0, 4, COHORT_GPU_TEST_DATA "/io_rules.yaml", &monitor));
    CHECK_OK(cohort_gpu_monitor_sample_now(monitor, NULL, NULL));
    cohort_transfer_scheduler* s = NULL;
    CHECK_OK(cohort_transfer_scheduler_create("{\"workers\": 2}", registry, monitor, NULL, NULL, &s));

    unsigned char buffer[128];
    cohort_transfer* t = NULL;
    snprintf(json, sizeof json, "{\"id\": \"m\", \"workload\": \"eval\", \"path\": \"%s\", \"length\": 128}", g_file);
    CHECK_ERR(cohort_transfer_submit(s, json, buffer, sizeof buffer, NULL, NULL, &t), COHORT_ERR_NOT_FOUND,
              "workload 'eval' is not registered");
    snprintf(json, sizeof json, "{\"id\": \"m\", \"workload\": \"train\", \"path\": \"%s\", \"length\": 128, "
             "\"kind\": \"model\", \"priority\": 3}", g_file);
    CHECK_OK(cohort_transfer_submit(s, json, buffer, sizeof buffer, NULL, NULL, &t));
    CHECK_OK(cohort_transfer_wait(t, 30));
    CHECK(pattern_ok(buffer, 128, 0));
    char* out = NULL;
    CHECK_OK(cohort_transfer_result(t, &out, NULL));
    CHECK_HAS(out, "\"values\":{\"priority\":1E1"); /* 3 + the workload's 7 */
    cohort_free(out);
    cohort_transfer_stats stats;
    CHECK_OK(cohort_transfer_scheduler_stats(s, &stats));
    CHECK(stats.prefetch_factor == 0.25 && stats.prefetch_depth == 2);
    cohort_transfer_destroy(t);
    cohort_transfer_scheduler_destroy(s);
    cohort_gpu_monitor_destroy(monitor);
    cohort_gpu_probe_destroy(probe);
    cohort_workload_registry_destroy(registry);
}

int run_data_tests(const char* scratch) {
    g_scratch = scratch;
    write_data_file();
    test_registry();
    test_registry_monitor();
    test_scheduler_errors();
    test_policy_order();
    test_staging_and_shutdown();
    test_registry_and_monitor_policy();
    remove(g_file);
    printf("data: %d passed, %d failed\n", data_passed, data_failed);
    return data_failed;
}
