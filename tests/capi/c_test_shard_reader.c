/*
 * c_test_shard_reader.c: the data path's shard reader through the C ABI,
 * from plain C11. Hosts a coordinator, writes two data files into the
 * scratch directory, registers the plan of their shards, and reads every
 * shard of two epochs through a reader over a membership, checking each
 * shard's bytes; the reader's wait reaches the member's heartbeat. A reader
 * over a client reads a file shorter than the layout: IO naming the shard,
 * the file and the offset. Also the errors of bad arguments.
 * Includes nothing from cohort but cohort.h; c_test.c's main() runs it.
 */
#define _XOPEN_SOURCE 700 /* nanosleep */

#include "cohort.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int reader_passed;
static int reader_failed;

static void reader_fail(const char* file, int line, const char* what) {
    ++reader_failed;
    fprintf(stderr, "%s:%d: FAILED: %s\n", file, line, what);
}

/* status must be `code`; unless it is COHORT_OK, the last error must contain `needle`. */
static void reader_status(const char* file, int line, const char* call, int status, int code, const char* needle) {
    const char* message = cohort_last_error();
    if (status == code && (code == COHORT_OK || strstr(message, needle) != NULL)) {
        ++reader_passed;
        return;
    }
    reader_fail(file, line, call);
    fprintf(stderr, "    returned %d (%s; expected %d), last error: \"%s\"\n", status, cohort_strerror(status), code,
            message);
    if (code != COHORT_OK) fprintf(stderr, "    expected it to contain \"%s\"\n", needle);
}

#define CHECK(cond) ((cond) ? (void)++reader_passed : reader_fail(__FILE__, __LINE__, #cond))
#define CHECK_OK(call) reader_status(__FILE__, __LINE__, #call, (call), COHORT_OK, "")
#define CHECK_ERR(call, code, needle) reader_status(__FILE__, __LINE__, #call, (call), (code), (needle))

/* Byte `offset` of data file `file`. */
static uint8_t content(uint32_t file, uint64_t offset) {
    return (uint8_t)((offset * 13 + file * 101 + offset / 97) % 256);
}

/* Writes `written` bytes of file `file` under `dir` as NAME; the path goes to `path`. */
static int write_file(const char* dir, const char* name, uint32_t file, uint64_t written, char* path, size_t size) {
    snprintf(path, size, "%s/%s", dir, name);
    FILE* out = fopen(path, "wb");
    if (out == NULL) return 0;
    for (uint64_t i = 0; i < written; ++i) fputc(content(file, i), out);
    return fclose(out) == 0;
}

/* Whether data[0..length) is shard `shard` of `shards`, whose file i was written as file first + i. */
static int holds_shard(const cohort_shards* shards, uint32_t first, uint64_t shard, const uint8_t* data,
                       uint64_t length) {
    uint64_t bytes = 0, records = 0, at = 0;
    uint32_t segments = 0;
    if (cohort_shards_info(shards, shard, &bytes, &records, &segments) != COHORT_OK || bytes != length) return 0;
    for (uint32_t s = 0; s < segments; ++s) {
        uint32_t file = 0;
        uint64_t begin = 0, end = 0;
        if (cohort_shards_segment(shards, shard, s, &file, &begin, &end) != COHORT_OK) return 0;
        for (uint64_t o = begin; o < end; ++o)
            if (data[at++] != content(first + file, o)) return 0;
    }
    return 1;
}

static void sleep_ms(long ms) {
    struct timespec t;
    t.tv_sec = ms / 1000;
    t.tv_nsec = (ms % 1000) * 1000000L;
    nanosleep(&t, NULL);
}

/* Polls the job's state until it contains `needle` (5 s at most). */
static int state_has(cohort_coordinator_client* client, const char* job, const char* needle) {
    for (int i = 0; i < 250; ++i) {
        char* text = NULL;
        int found = 0;
        if (cohort_coordinator_client_job_state(client, job, &text, NULL) == COHORT_OK) {
            found = strstr(text, needle) != NULL;
            cohort_free(text);
        }
        if (found) return 1;
        sleep_ms(20);
    }
    return 0;
}

/* The number after the first "field": in the job's state, or -1. */
static double state_number(cohort_coordinator_client* client, const char* job, const char* field) {
    char* text = NULL;
    char key[64];
    double value = -1;
    snprintf(key, sizeof key, "\"%s\":", field);
    if (cohort_coordinator_client_job_state(client, job, &text, NULL) != COHORT_OK) return -1;
    const char* at = strstr(text, key);
    if (at != NULL) value = strtod(at + strlen(key), NULL);
    cohort_free(text);
    return value;
}

static const char* const kSettings =
    "{\"min_nodes\": 1, \"max_nodes\": 1, \"last_call\": 0, \"heartbeat_interval\": 0.05, \"failure_timeout\": 2}";

static void test_shard_reader(const char* scratch) {
    cohort_coordinator* server = NULL;
    cohort_coordinator_client* admin = NULL;
    cohort_membership* m = NULL;
    cohort_dataset* dataset = NULL;
    cohort_shards* shards = NULL;
    cohort_shard_reader* reader = NULL;
    cohort_reader_stats stats;
    const char* url = NULL;
    char* text = NULL;
    size_t length = 0;
    char path[1024];
    char options[1200];
    uint64_t count = 0;
    int seen[2][6];

    CHECK(write_file(scratch, "c-reader-0.bin", 0, 5000, path, sizeof path));
    CHECK(write_file(scratch, "c-reader-1.bin", 1, 1234, path, sizeof path));
    CHECK_OK(cohort_dataset_create(&dataset));
    CHECK_OK(cohort_dataset_add_file(dataset, "c-reader-0.bin", 5000, COHORT_RECORDS_UNKNOWN));
    CHECK_OK(cohort_dataset_add_file(dataset, "c-reader-1.bin", 1234, COHORT_RECORDS_UNKNOWN));
    CHECK_OK(cohort_shards_split(dataset, 0, 6, &shards));
    CHECK_OK(cohort_shards_count(shards, &count));
    CHECK(count == 6);

    CHECK_OK(cohort_coordinator_create(NULL, 0, "", NULL, &server));
    CHECK_OK(cohort_coordinator_url(server, &url));
    CHECK_OK(cohort_coordinator_client_create(url, "", 5.0, 2.0, &admin));
    CHECK_OK(cohort_coordinator_client_ensure_job(admin, "rjob", kSettings));
    CHECK_ERR(cohort_shards_plan_json(shards, 0, &text, &length), COHORT_ERR_INVALID_ARGUMENT, "epochs");
    CHECK_OK(cohort_shards_plan_json(shards, 2, &text, &length));
    CHECK(text != NULL && strstr(text, "\"epochs\": 2") != NULL && length == strlen(text));
    CHECK_OK(cohort_coordinator_client_register_dataset(admin, "rjob", text));
    cohort_free(text);
    text = NULL;
    CHECK_OK(cohort_membership_create(url, "rjob", "r-a", "host-a", &m));
    CHECK_OK(cohort_membership_next_world(m, 5.0, &text, &length));
    cohort_free(text);
    text = NULL;

    /* Bad arguments. */
    snprintf(options, sizeof options, "{\"data_dir\": \"%s\", \"workers\": 2, \"prefetch_depth\": 2}", scratch);
    CHECK_ERR(cohort_shard_reader_from_membership(NULL, shards, NULL, options, &reader), COHORT_ERR_INVALID_ARGUMENT,
              "membership must not be NULL");
    CHECK_ERR(cohort_shard_reader_from_membership(m, NULL, NULL, options, &reader), COHORT_ERR_INVALID_ARGUMENT,
              "shards must not be NULL");
    CHECK_ERR(cohort_shard_reader_from_membership(m, shards, NULL, "{\"workers\": 1000}", &reader),
              COHORT_ERR_INVALID_ARGUMENT, "workers");
    CHECK_ERR(cohort_shard_reader_from_membership(m, shards, NULL, "{\"depth\": 1}", &reader),
              COHORT_ERR_INVALID_ARGUMENT, "depth");
    CHECK_ERR(cohort_shard_reader_from_membership(m, shards, NULL, "[1]", &reader), COHORT_ERR_INVALID_ARGUMENT,
              "options_json");
    CHECK_ERR(cohort_shard_reader_from_membership(m, shards, NULL, "{\"poll_interval_seconds\": 0}", &reader),
              COHORT_ERR_INVALID_ARGUMENT, "poll_interval_seconds");
    CHECK(reader == NULL);
    CHECK_ERR(cohort_membership_add_data_wait(m, -1.0), COHORT_ERR_INVALID_ARGUMENT, "add_data_wait");

    /* Every shard of both epochs, once each, with its bytes. */
    memset(seen, 0, sizeof seen);
    CHECK_OK(cohort_shard_reader_from_membership(m, shards, NULL, options, &reader));
    for (int i = 0; i < 20; ++i) {
        int32_t finished = -1, outcome = -1;
        uint64_t lease = 0, shard = 99, size = 0;
        uint32_t epoch = 99;
        const char* id = NULL;
        const uint8_t* data = NULL;
        CHECK_OK(cohort_shard_reader_next(reader, 10.0, &finished, &lease, &shard, &epoch, &id, &data, &size));
        if (finished != 0) break;
        CHECK(shard < 6 && epoch < 2);
        if (shard < 6 && epoch < 2) ++seen[epoch][shard];
        CHECK(id != NULL && strtoull(id, NULL, 10) == shard);
        CHECK(data != NULL && holds_shard(shards, 0, shard, data, size));
        CHECK_OK(cohort_shard_reader_done(reader, lease, &outcome));
        CHECK(outcome == COHORT_SHARD_COUNTED);
        CHECK_ERR(cohort_shard_reader_done(reader, lease, NULL), COHORT_ERR_INVALID_ARGUMENT,
                  "not a shard next() handed out");
    }
    for (int e = 0; e < 2; ++e)
        for (int s = 0; s < 6; ++s) CHECK(seen[e][s] == 1);
    CHECK_OK(cohort_shard_reader_stats(reader, &stats));
    CHECK(stats.shards == 12 && stats.reported == 12 && stats.failed == 0);
    CHECK(stats.bytes == 2 * (5000 + 1234));
    CHECK(stats.prefetch_hits + stats.prefetch_misses == 12);
    CHECK(stats.finished == 1 && stats.ahead == 0 && stats.max_ahead <= 2);
    CHECK(stats.data_wait_seconds >= 0);
    CHECK_ERR(cohort_shard_reader_next(reader, -1.0, &stats.finished, NULL, NULL, NULL, NULL, NULL, NULL),
              COHORT_ERR_INVALID_ARGUMENT, "timeout_seconds");
    CHECK_ERR(cohort_shard_reader_next(reader, 1.0, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
              COHORT_ERR_INVALID_ARGUMENT, "finished must not be NULL");
    CHECK_ERR(cohort_shard_reader_stats(reader, NULL), COHORT_ERR_INVALID_ARGUMENT, "out must not be NULL");
    cohort_shard_reader_destroy(reader);
    reader = NULL;
    cohort_shard_reader_destroy(NULL);

    /* The waits the reader measured, and one added by hand, fill the step's
     * data_wait, left unmeasured (-1). */
    CHECK_OK(cohort_membership_add_data_wait(m, 0.375));
    CHECK_OK(cohort_membership_record_step(m, 7, 1.0, 10.0, -1.0, -1.0));
    CHECK(state_has(admin, "rjob", "\"step\":7"));
    {
        const double sent = state_number(admin, "rjob", "data_wait");
        const double expected = 0.375 + stats.data_wait_seconds;
        CHECK(sent > expected - 1e-6 && sent < expected + 1e-6);
    }
    /* A data_wait the program measured wins. */
    CHECK_OK(cohort_membership_add_data_wait(m, 5.0));
    CHECK_OK(cohort_membership_record_step(m, 8, 1.0, 10.0, 0.25, -1.0));
    CHECK(state_has(admin, "rjob", "\"step\":8"));
    CHECK(state_number(admin, "rjob", "data_wait") == 0.25);
    CHECK_OK(cohort_membership_leave(m));
    cohort_membership_destroy(m);

    /* A reader over a client; the second file is shorter than listed. */
    {
        cohort_dataset* listed = NULL;
        cohort_shards* halves = NULL;
        int32_t finished = -1, generation_active = -1, rank = -1;
        uint64_t generation = 0, lease = 0, shard = 0;
        const uint8_t* data = NULL;
        uint64_t size = 0;
        CHECK_OK(cohort_dataset_create(&listed));
        CHECK_OK(cohort_dataset_add_file(listed, "c-reader-1.bin", 2000, COHORT_RECORDS_UNKNOWN));
        CHECK_OK(cohort_shards_split(listed, 0, 2, &halves));
        CHECK_OK(cohort_coordinator_client_ensure_job(admin, "rshort", kSettings));
        CHECK_OK(cohort_shards_plan_json(halves, 1, &text, &length));
        CHECK_OK(cohort_coordinator_client_register_dataset(admin, "rshort", text));
        cohort_free(text);
        text = NULL;
        CHECK_OK(cohort_coordinator_client_join(admin, "rshort", "r-b", NULL, NULL, &generation, &generation_active,
                                                &rank));
        cohort_transfer_scheduler* scheduler = NULL;
        CHECK_OK(cohort_transfer_scheduler_create("{\"workers\": 1, \"prefetch_depth\": 3}", NULL, NULL, NULL, NULL,
                                                  &scheduler));
        snprintf(options, sizeof options, "{\"data_dir\": \"%s\", \"workload\": \"\", \"priority\": 5}", scratch);
        CHECK_ERR(cohort_shard_reader_create(admin, NULL, "r-b", halves, scheduler, options, &reader),
                  COHORT_ERR_INVALID_ARGUMENT, "job must not be NULL");
        CHECK_ERR(cohort_shard_reader_create(admin, "rshort", "r-b", halves, scheduler, "{\"workers\": 2}", &reader),
                  COHORT_ERR_INVALID_ARGUMENT, "a reader without a scheduler");
        /* Through a scheduler of the caller's: its prefetch depth is the reader's. */
        CHECK_OK(cohort_shard_reader_create(admin, "rshort", "r-b", halves, scheduler, options, &reader));
        /* Shard 0 is [0, 1000): whole. Shard 1 is [1000, 2000): the file ends at 1234. */
        CHECK_OK(cohort_shard_reader_next(reader, 10.0, &finished, &lease, &shard, NULL, NULL, &data, &size));
        CHECK(finished == 0 && shard == 0 && size == 1000 && holds_shard(halves, 1, 0, data, size));
        CHECK_OK(cohort_shard_reader_done(reader, lease, NULL));
        CHECK_ERR(cohort_shard_reader_next(reader, 10.0, &finished, &lease, &shard, NULL, NULL, &data, &size),
                  COHORT_ERR_IO, "shard 1 ('1', lease");
        CHECK(strstr(cohort_last_error(), "c-reader-1.bin") != NULL);
        CHECK(strstr(cohort_last_error(), "offset 1000") != NULL);
        CHECK(strstr(cohort_last_error(), "member 'r-b' of job 'rshort'") != NULL);
        /* Not reported, the failed shard stays leased until its lease expires: nothing to lease now. */
        CHECK_ERR(cohort_shard_reader_next(reader, 0.2, &finished, NULL, NULL, NULL, NULL, NULL, NULL),
                  COHORT_ERR_TIMEOUT, "for a lease");
        CHECK_OK(cohort_shard_reader_stats(reader, &stats));
        CHECK(stats.failed == 1 && stats.shards == 1 && stats.depth == 3);
        {
            cohort_transfer_stats t;
            CHECK_OK(cohort_transfer_scheduler_stats(scheduler, &t));
            CHECK(t.submitted == 2 && t.failed == 1);
        }
        CHECK(state_number(admin, "rshort", "leased") == 1);
        /* Its end gives back only the leases of shards it holds: the one whose
         * read failed waits out its lease (a pause before anyone reads the
         * file again). */
        cohort_shard_reader_destroy(reader);
        CHECK(state_number(admin, "rshort", "leased") == 1);
        CHECK(state_number(admin, "rshort", "released") == 0);
        CHECK_ERR(cohort_shard_reader_create(admin, "rshort", "r-b", halves, scheduler, "{\"release_on_close\": 1}",
                                             &reader),
                  COHORT_ERR_INVALID_ARGUMENT, "release_on_close");
        cohort_transfer_scheduler_destroy(scheduler);
        cohort_shards_destroy(halves);
        cohort_dataset_destroy(listed);
    }

    cohort_shards_destroy(shards);
    cohort_dataset_destroy(dataset);
    cohort_coordinator_client_destroy(admin);
    cohort_coordinator_destroy(server);
}

int run_shard_reader_tests(const char* scratch); /* called by c_test.c's main() */

/* Runs the shard reader tests in `scratch`; returns the number of failures. */
int run_shard_reader_tests(const char* scratch) {
    int failed_before = reader_failed;
    test_shard_reader(scratch);
    printf("%-18s %s\n", "shard_reader", reader_failed == failed_before ? "ok" : "FAILED");
    printf("shard_reader: %d passed, %d failed\n", reader_passed, reader_failed);
    return reader_failed;
}
