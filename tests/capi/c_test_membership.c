/*
 * c_test_membership.c: a member of an elastic job through the C ABI, from
 * plain C11 (with POSIX setenv and nanosleep). Hosts a coordinator; one
 * membership gets a world of one, builds its communicator, reports metrics
 * and takes a shard; a second node joining opens a round the membership
 * hears of, and it joins the world of two; then it leaves. Role groups: a
 * worker and an evaluator in worlds of their own, the evaluator's death
 * opening no round for the worker. Also the errors of bad arguments and of
 * cohort_membership_from_env.
 * Includes nothing from cohort but cohort.h; c_test.c's main() runs it.
 */
#define _XOPEN_SOURCE 700 /* setenv, unsetenv, nanosleep */

#include "cohort.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int member_passed;
static int member_failed;

static void member_fail(const char* file, int line, const char* what) {
    ++member_failed;
    fprintf(stderr, "%s:%d: FAILED: %s\n", file, line, what);
}

/* status must be `code`; unless it is COHORT_OK, the last error must contain `needle`. */
static void check_status(const char* file, int line, const char* call, int status, int code, const char* needle) {
    const char* message = cohort_last_error();
    if (status == code && (code == COHORT_OK || strstr(message, needle) != NULL)) {
        ++member_passed;
        return;
    }
    member_fail(file, line, call);
    fprintf(stderr, "    returned %d (%s; expected %d), last error: \"%s\"\n", status, cohort_strerror(status), code,
            message);
    if (code != COHORT_OK) fprintf(stderr, "    expected it to contain \"%s\"\n", needle);
}

static void check_has(const char* file, int line, const char* what, const char* text, const char* needle) {
    if (text != NULL && strstr(text, needle) != NULL) {
        ++member_passed;
        return;
    }
    member_fail(file, line, what);
    fprintf(stderr, "    got \"%s\"\n    lacks \"%s\"\n", text ? text : "(null)", needle);
}

#define CHECK(cond) ((cond) ? (void)++member_passed : member_fail(__FILE__, __LINE__, #cond))
#define CHECK_OK(call) check_status(__FILE__, __LINE__, #call, (call), COHORT_OK, "")
#define CHECK_ERR(call, code, needle) check_status(__FILE__, __LINE__, #call, (call), (code), (needle))
#define CHECK_HAS(text, needle) check_has(__FILE__, __LINE__, #text, (text), (needle))

static void sleep_ms(long ms) {
    struct timespec t;
    t.tv_sec = ms / 1000;
    t.tv_nsec = (ms % 1000) * 1000000L;
    nanosleep(&t, NULL);
}

/* Polls the job's state until it contains `needle` (5 s at most). */
static int job_state_has(cohort_coordinator_client* client, const char* job, const char* needle) {
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

static void test_membership(void) {
    cohort_coordinator* server = NULL;
    cohort_coordinator_client* admin = NULL;
    cohort_membership* m = NULL;
    cohort_membership* never = NULL;
    cohort_comm* comm = NULL;
    const char* url = NULL;
    const char* text_in = NULL;
    char* text = NULL;
    size_t length = 0;
    int32_t pending = -1;
    uint64_t generation = 0;
    int32_t active = -1;
    int32_t rank = -1;

    CHECK_OK(cohort_coordinator_create(NULL, 0, "", NULL, &server));
    CHECK_OK(cohort_coordinator_url(server, &url));
    CHECK_OK(cohort_coordinator_client_create(url, "", 5.0, 2.0, &admin));
    /* Grows from one node to two: a node that joins the running world of one
     * opens a round, which waits last_call for the member to join it too. */
    CHECK_OK(cohort_coordinator_client_ensure_job(
        admin, "mjob",
        "{\"min_nodes\": 1, \"max_nodes\": 2, \"last_call\": 1, \"heartbeat_interval\": 0.05, "
        "\"failure_timeout\": 2}"));

    /* Bad arguments. */
    CHECK_ERR(cohort_membership_create(NULL, "mjob", NULL, NULL, &m), COHORT_ERR_INVALID_ARGUMENT,
              "coordinator must not be NULL");
    CHECK_ERR(cohort_membership_create(url, NULL, NULL, NULL, &m), COHORT_ERR_INVALID_ARGUMENT, "job must not be NULL");
    CHECK_ERR(cohort_membership_create(url, "mjob", NULL, NULL, NULL), COHORT_ERR_INVALID_ARGUMENT,
              "out must not be NULL");
    CHECK(m == NULL);

    CHECK_OK(cohort_membership_create(url, "mjob", "m-a", "host-a", &m));
    CHECK_OK(cohort_membership_member(m, &text_in));
    CHECK_HAS(text_in, "m-a");
    CHECK_OK(cohort_membership_job(m, &text_in));
    CHECK_HAS(text_in, "mjob");
    CHECK_ERR(cohort_comm_from_membership(m, &comm), COHORT_ERR_INVALID_ARGUMENT, "next_world");
    CHECK(comm == NULL);
    CHECK_ERR(cohort_membership_next_world(m, -1, &text, &length), COHORT_ERR_INVALID_ARGUMENT, "timeout_seconds");
    CHECK_ERR(cohort_membership_next_world(m, 1.0, NULL, &length), COHORT_ERR_INVALID_ARGUMENT, "world_json");

    /* A world of one, and its communicator. */
    CHECK_OK(cohort_membership_next_world(m, 5.0, &text, &length));
    CHECK_HAS(text, "\"state\":\"active\"");
    CHECK_HAS(text, "\"rank\":0");
    CHECK_HAS(text, "\"world_size\":1");
    CHECK(text != NULL && length == strlen(text));
    cohort_free(text);
    text = NULL;
    CHECK_OK(cohort_membership_round_pending(m, &pending));
    CHECK(pending == 0);
    CHECK_OK(cohort_comm_from_membership(m, &comm));
    {
        float values[2] = {1.5f, -2.0f};
        int32_t size = 0;
        CHECK_OK(cohort_comm_size(comm, &size));
        CHECK(size == 1);
        CHECK_OK(
            cohort_comm_allreduce(comm, values, values, 2, COHORT_DTYPE_FLOAT32, COHORT_OP_SUM, COHORT_ALGO_AUTO, 0));
        CHECK(values[0] == 1.5f && values[1] == -2.0f);
    }
    /* Kept for cohort_membership_report_dead below, once its world is over. */

    /* Metrics reach the job's state with the next heartbeats. */
    CHECK_OK(cohort_membership_record_step(m, 4, 0.5, 64.0, 0.01, -1.0));
    CHECK_OK(cohort_membership_record_step(m, 5, 0.25, 128.0, -1.0, -1.0));
    CHECK_OK(cohort_membership_set_collective(m, 11, 0));
    CHECK_OK(cohort_membership_set_gpu_json(m, "{\"gpus\": [{\"index\": 0, \"memory_used\": 42}]}"));
    CHECK_ERR(cohort_membership_set_gpu_json(m, "{gpus"), COHORT_ERR_INVALID_ARGUMENT, "not JSON");
    CHECK(job_state_has(admin, "mjob", "\"step\":5"));
    CHECK(job_state_has(admin, "mjob", "\"memory_used\":42"));

    /* Shards leased to the member. */
    CHECK_OK(cohort_coordinator_client_register_dataset(admin, "mjob", "{\"shards\": [{\"id\": \"only\"}]}"));
    CHECK_OK(cohort_membership_next_shard(m, &text, &length));
    CHECK_HAS(text, "\"granted\":true");
    CHECK_HAS(text, "\"shard_id\":\"only\"");
    {
        const char* at = text != NULL ? strstr(text, "\"lease\":") : NULL;
        const uint64_t lease = at != NULL ? strtoull(at + 8, NULL, 10) : 0;
        cohort_free(text);
        text = NULL;
        int32_t outcome = -1;
        CHECK_OK(cohort_membership_shard_done(m, lease, &outcome));
        CHECK(outcome == COHORT_SHARD_COUNTED);
        CHECK_OK(cohort_membership_shard_release(m, lease, &outcome));
        CHECK(outcome == COHORT_SHARD_REPORTED);
        CHECK_ERR(cohort_membership_shard_release(NULL, lease, &outcome), COHORT_ERR_INVALID_ARGUMENT, "membership");
    }

    /* A second node opens a round; the member hears of it and joins the world of two. */
    CHECK_OK(cohort_coordinator_client_join(admin, "mjob", "m-b", NULL, NULL, &generation, &active, &rank));
    CHECK(active == 0);
    for (int i = 0; i < 250 && pending == 0; ++i) {
        sleep_ms(20);
        CHECK_OK(cohort_membership_round_pending(m, &pending));
    }
    CHECK(pending == 1);
    CHECK_OK(cohort_membership_next_world(m, 5.0, &text, &length));
    CHECK_HAS(text, "\"world_size\":2");
    cohort_free(text);
    text = NULL;
    CHECK_OK(cohort_membership_round_pending(m, &pending));
    CHECK(pending == 0);
    CHECK_OK(cohort_coordinator_client_world(admin, "mjob", "m-b", &text, &length));
    CHECK_HAS(text, "\"state\":\"active\"");
    cohort_free(text);
    text = NULL;

    /* A report through the communicator of the world before: no rank of it
     * died, and it is not this world's, so nobody is reported; a round is
     * asked for all the same. */
    {
        int32_t reported = -1;
        size_t count = 99;
        CHECK_OK(cohort_comm_dead_ranks(comm, NULL, 0, &count));
        CHECK(count == 0);
        CHECK_OK(cohort_membership_report_dead(m, comm, &reported, &pending));
        CHECK(reported == 0);
        CHECK(pending == 1);
        CHECK_OK(cohort_membership_report_dead(m, comm, NULL, NULL));
        CHECK_ERR(cohort_membership_report_dead(NULL, comm, NULL, NULL), COHORT_ERR_INVALID_ARGUMENT,
                  "cohort_membership_report_dead: membership must not be NULL");
        CHECK_ERR(cohort_membership_report_dead(m, NULL, NULL, NULL), COHORT_ERR_INVALID_ARGUMENT,
                  "comm must not be NULL");
    }
    cohort_comm_destroy(comm);
    comm = NULL;

    CHECK_OK(cohort_membership_leave(m));
    CHECK_OK(cohort_membership_leave(m));
    CHECK(job_state_has(admin, "mjob", "\"state\":\"left\""));
    cohort_membership_destroy(m);
    cohort_membership_destroy(NULL);

    /* An unknown job. */
    CHECK_OK(cohort_membership_create(url, "no-such-job", NULL, NULL, &never));
    CHECK_ERR(cohort_membership_next_world(never, 1.0, &text, &length), COHORT_ERR_NOT_FOUND, "no-such-job");
    CHECK(text == NULL);
    cohort_membership_destroy(never);

    cohort_coordinator_client_destroy(admin);
    cohort_coordinator_destroy(server);
}

/* Sets `name` to `value` (NULL: unsets it). */
static void put_env(const char* name, const char* value) {
    if (value != NULL)
        setenv(name, value, 1);
    else
        unsetenv(name);
}

static void test_membership_from_env(void) {
    static const char* const names[] = {"COHORT_COORDINATOR", "COHORT_JOB", "COHORT_MEMBER", "COHORT_GENERATION"};
    char* saved[4] = {NULL, NULL, NULL, NULL};
    cohort_membership* m = NULL;
    const char* member = NULL;

    for (int i = 0; i < 4; ++i) {
        const char* v = getenv(names[i]);
        if (v != NULL) {
            saved[i] = malloc(strlen(v) + 1);
            if (saved[i] != NULL) strcpy(saved[i], v);
        }
        put_env(names[i], NULL);
    }

    CHECK_ERR(cohort_membership_from_env(&m), COHORT_ERR_INVALID_ARGUMENT, "COHORT_COORDINATOR is not set");
    put_env("COHORT_COORDINATOR", "127.0.0.1:1");
    CHECK_ERR(cohort_membership_from_env(&m), COHORT_ERR_INVALID_ARGUMENT, "COHORT_JOB is not set");
    put_env("COHORT_JOB", "envjob");
    put_env("COHORT_GENERATION", "x1");
    CHECK_ERR(cohort_membership_from_env(&m), COHORT_ERR_INVALID_ARGUMENT, "COHORT_GENERATION='x1'");
    CHECK_ERR(cohort_membership_from_env(NULL), COHORT_ERR_INVALID_ARGUMENT, "out must not be NULL");
    CHECK(m == NULL);
    put_env("COHORT_GENERATION", "3");
    put_env("COHORT_MEMBER", "env-member");
    CHECK_OK(cohort_membership_from_env(&m)); /* contacts nobody yet */
    CHECK_OK(cohort_membership_member(m, &member));
    CHECK_HAS(member, "env-member");
    cohort_membership_destroy(m);
    put_env("COHORT_ROLE", "ps");
    CHECK_OK(cohort_membership_from_env(&m));
    CHECK_OK(cohort_membership_job(m, &member));
    CHECK(strcmp(member, "envjob.ps") == 0);
    cohort_membership_destroy(m);
    put_env("COHORT_ROLE", "p s");
    m = NULL;
    CHECK_ERR(cohort_membership_from_env(&m), COHORT_ERR_INVALID_ARGUMENT, "COHORT_ROLE: 'p s' is not a role name");
    CHECK(m == NULL);
    put_env("COHORT_ROLE", NULL);

    for (int i = 0; i < 4; ++i) {
        put_env(names[i], saved[i]);
        free(saved[i]);
    }
}

static void test_membership_roles(void) {
    cohort_coordinator* server = NULL;
    cohort_coordinator_client* admin = NULL;
    cohort_membership* worker = NULL;
    cohort_membership* evaluator = NULL;
    cohort_comm* comm = NULL;
    const char* url = NULL;
    const char* text_in = NULL;
    char* text = NULL;
    size_t length = 0;
    int32_t pending = -1;

    CHECK_OK(cohort_role_job("rjob", NULL, &text, &length));
    CHECK(strcmp(text, "rjob") == 0 && length == 4);
    cohort_free(text);
    CHECK_OK(cohort_role_job("rjob", "worker", &text, NULL));
    CHECK(strcmp(text, "rjob") == 0);
    cohort_free(text);
    CHECK_OK(cohort_role_job("rjob", "evaluator", &text, &length));
    CHECK(strcmp(text, "rjob.evaluator") == 0 && length == 14);
    cohort_free(text);
    text = NULL;
    CHECK_ERR(cohort_role_job("rjob", "ev.al", &text, NULL), COHORT_ERR_INVALID_ARGUMENT,
              "'ev.al' is not a role name");
    CHECK_ERR(cohort_role_job(NULL, "x", &text, NULL), COHORT_ERR_INVALID_ARGUMENT, "job must not be NULL");
    CHECK(text == NULL);

    CHECK_OK(cohort_coordinator_create(NULL, 0, "", NULL, &server));
    CHECK_OK(cohort_coordinator_url(server, &url));
    CHECK_OK(cohort_coordinator_client_create(url, "", 5.0, 2.0, &admin));
    static const char* const one =
        "{\"min_nodes\": 1, \"max_nodes\": 1, \"last_call\": 0, \"heartbeat_interval\": 0.05, "
        "\"failure_timeout\": 1}";
    CHECK_OK(cohort_coordinator_client_ensure_job(admin, "rjob", one));
    CHECK_OK(cohort_coordinator_client_ensure_job(admin, "rjob.evaluator", one));

    CHECK_ERR(cohort_membership_from_role(url, "rjob", "a b", "w", NULL, &worker), COHORT_ERR_INVALID_ARGUMENT,
              "'a b' is not a role name");
    CHECK(worker == NULL);
    CHECK_OK(cohort_membership_from_role(url, "rjob", NULL, "w", "host-w", &worker));
    CHECK_OK(cohort_membership_from_role(url, "rjob", "evaluator", "e", "host-e", &evaluator));
    CHECK_OK(cohort_membership_role(worker, &text_in));
    CHECK_HAS(text_in, "default");
    CHECK_OK(cohort_membership_job(evaluator, &text_in));
    CHECK(strcmp(text_in, "rjob.evaluator") == 0);
    CHECK_OK(cohort_membership_role(evaluator, &text_in));
    CHECK(strcmp(text_in, "evaluator") == 0);
    CHECK_ERR(cohort_membership_role(evaluator, NULL), COHORT_ERR_INVALID_ARGUMENT, "role must not be NULL");

    /* Each a world of one in its own job, with a communicator of its own. */
    CHECK_OK(cohort_membership_next_world(worker, 5.0, &text, NULL));
    CHECK_HAS(text, "\"world_size\":1");
    CHECK_HAS(text, "\"generation\":1");
    cohort_free(text);
    CHECK_OK(cohort_membership_next_world(evaluator, 5.0, &text, NULL));
    CHECK_HAS(text, "\"world_size\":1");
    cohort_free(text);
    CHECK_OK(cohort_comm_from_membership(evaluator, &comm));
    cohort_comm_destroy(comm);
    CHECK(job_state_has(admin, "rjob.evaluator", "\"role\":\"evaluator\""));

    /* The evaluator dies (no leave): its job fails it; the worker's stays as it was. */
    cohort_membership_destroy(evaluator);
    CHECK(job_state_has(admin, "rjob.evaluator", "\"state\":\"failed\""));
    sleep_ms(300);
    CHECK_OK(cohort_membership_round_pending(worker, &pending));
    CHECK(pending == 0);
    CHECK_OK(cohort_membership_next_world(worker, 1.0, &text, NULL));
    CHECK_HAS(text, "\"generation\":1");
    cohort_free(text);

    cohort_membership_destroy(worker);
    cohort_coordinator_client_destroy(admin);
    cohort_coordinator_destroy(server);
}

int run_membership_tests(void); /* called by c_test.c's main() */

/* Runs every membership test; returns the number of failures. */
int run_membership_tests(void) {
    int failed_before = member_failed;
    test_membership();
    printf("%-18s %s\n", "membership", member_failed == failed_before ? "ok" : "FAILED");
    failed_before = member_failed;
    test_membership_roles();
    printf("%-18s %s\n", "membership_roles", member_failed == failed_before ? "ok" : "FAILED");
    failed_before = member_failed;
    test_membership_from_env();
    printf("%-18s %s\n", "membership_env", member_failed == failed_before ? "ok" : "FAILED");
    printf("membership: %d passed, %d failed\n", member_passed, member_failed);
    return member_failed;
}
