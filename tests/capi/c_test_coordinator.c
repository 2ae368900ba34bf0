/*
 * c_test_coordinator.c: the coordinator through the C ABI, from plain C11.
 * Hosts a coordinator with a token, then as two members of one job: join,
 * wait for the world, heartbeat, store set/get, shards, leave; and the
 * errors for a wrong token, an unknown job and a wrong generation.
 * Includes nothing from cohort but cohort.h; c_test.c's main() runs it.
 */
#include "cohort.h"

#include <stdio.h>
#include <string.h>

static int coord_passed;
static int coord_failed;

static void coord_fail(const char* file, int line, const char* what) {
    ++coord_failed;
    fprintf(stderr, "%s:%d: FAILED: %s\n", file, line, what);
}

/* status must be `code`; unless it is COHORT_OK, the last error must contain `needle`. */
static void check_status(const char* file, int line, const char* call, int status, int code, const char* needle) {
    const char* message = cohort_last_error();
    if (status == code && (code == COHORT_OK || strstr(message, needle) != NULL)) {
        ++coord_passed;
        return;
    }
    coord_fail(file, line, call);
    fprintf(stderr, "    returned %d (%s; expected %d), last error: \"%s\"\n", status, cohort_strerror(status), code,
            message);
    if (code != COHORT_OK) fprintf(stderr, "    expected it to contain \"%s\"\n", needle);
}

static void check_has(const char* file, int line, const char* what, const char* text, const char* needle) {
    if (text != NULL && strstr(text, needle) != NULL) {
        ++coord_passed;
        return;
    }
    coord_fail(file, line, what);
    fprintf(stderr, "    got \"%s\"\n    lacks \"%s\"\n", text ? text : "(null)", needle);
}

#define CHECK(cond) ((cond) ? (void)++coord_passed : coord_fail(__FILE__, __LINE__, #cond))
#define CHECK_OK(call) check_status(__FILE__, __LINE__, #call, (call), COHORT_OK, "")
#define CHECK_ERR(call, code, needle) check_status(__FILE__, __LINE__, #call, (call), (code), (needle))
#define CHECK_HAS(text, needle) check_has(__FILE__, __LINE__, #text, (text), (needle))

static void test_coordinator(void) {
    cohort_coordinator* server = NULL;
    cohort_coordinator_client* client = NULL;
    cohort_coordinator_client* wrong = NULL;
    const char* url = NULL;
    uint16_t port = 0;
    uint64_t generation = 99;
    int32_t active = -2;
    int32_t rank = -2;
    int32_t rendezvous = -1;
    char* text = NULL;
    size_t length = 0;
    char saved_url[64] = "";

    CHECK_OK(cohort_coordinator_create(NULL, 0, "c-secret", NULL, &server));
    CHECK_OK(cohort_coordinator_port(server, &port));
    CHECK(port != 0);
    CHECK_OK(cohort_coordinator_url(server, &url));
    CHECK_HAS(url, "http://127.0.0.1:");
    if (url != NULL && strlen(url) < sizeof saved_url) strcpy(saved_url, url); /* outlives the server */

    CHECK_OK(cohort_coordinator_client_create(url, "c-secret", 5.0, 2.0, &client));
    CHECK_OK(cohort_coordinator_client_ensure_job(
        client, "cjob", "{\"min_nodes\": 2, \"max_nodes\": 2, \"last_call\": 0, \"heartbeat_interval\": 0.05}"));
    CHECK_OK(
        cohort_coordinator_client_join(client, "cjob", "a", "host-a", "127.0.0.1:7000", &generation, &active, &rank));
    CHECK(active == 0 && rank == -1);
    CHECK_OK(cohort_coordinator_client_world(client, "cjob", "a", &text, &length));
    CHECK_HAS(text, "\"state\":\"waiting\"");
    CHECK(text != NULL && length == strlen(text));
    cohort_free(text);
    text = NULL;
    CHECK_OK(cohort_coordinator_client_heartbeat(client, "cjob", "a", 0, -1, -1.0, -1.0, NULL, &active, NULL));
    CHECK(active == 0);
    CHECK_OK(cohort_coordinator_client_join(client, "cjob", "b", NULL, NULL, &generation, &active, &rank));
    CHECK(active == 1 && rank >= 0 && generation > 0);

    CHECK_OK(cohort_coordinator_client_wait_for_world(client, "cjob", "a", 5.0, &text, &length));
    CHECK_HAS(text, "\"state\":\"active\"");
    CHECK_HAS(text, "\"world_size\":2");
    CHECK_HAS(text, "127.0.0.1:7000");
    cohort_free(text);
    text = NULL;
    CHECK_OK(cohort_coordinator_client_heartbeat(client, "cjob", "a", generation, 7, 0.25, 100.0, NULL, &active,
                                                 &rendezvous));
    CHECK(active == 1 && rendezvous == 0);
    CHECK_OK(cohort_coordinator_client_job_state(client, "cjob", &text, NULL));
    CHECK_HAS(text, "\"step\":7");
    cohort_free(text);
    text = NULL;

    /* Store: bytes with a NUL in them, and a get that waits for nothing. */
    CHECK_OK(cohort_coordinator_client_store_set(client, "cjob", generation, "addr/0", "a\0b", 3));
    CHECK_OK(cohort_coordinator_client_store_get(client, "cjob", generation, "addr/0", 1.0, &text, &length));
    CHECK(text != NULL && length == 3 && memcmp(text, "a\0b", 3) == 0 && text[3] == '\0');
    cohort_free(text);
    text = NULL;
    CHECK_ERR(cohort_coordinator_client_store_get(client, "cjob", generation, "never", 0.03, &text, &length),
              COHORT_ERR_TIMEOUT, "'never'");
    CHECK_ERR(cohort_coordinator_client_store_get(client, "cjob", generation, "never", 0, &text, &length),
              COHORT_ERR_NOT_FOUND, "'never'");
    CHECK_ERR(cohort_coordinator_client_store_set(client, "cjob", generation + 5, "k", "v", 1), COHORT_ERR_MISMATCH,
              "generation");
    CHECK(text == NULL);

    /* Store: add, compare-and-set, wait, delete. */
    {
        int64_t sum = 0;
        int32_t stored = -1, deleted = -1;
        const char* keys[2] = {"addr/0", "counter"};
        CHECK_OK(cohort_coordinator_client_store_add(client, "cjob", generation, "counter", 5, &sum));
        CHECK(sum == 5);
        CHECK_OK(cohort_coordinator_client_store_add(client, "cjob", generation, "counter", -2, &sum));
        CHECK(sum == 3);
        CHECK_ERR(cohort_coordinator_client_store_add(client, "cjob", generation, "addr/0", 1, &sum),
                  COHORT_ERR_INVALID_ARGUMENT, "addr/0");
        CHECK_OK(cohort_coordinator_client_store_compare_and_set(client, "cjob", generation, "leader", NULL, 0, "a", 1,
                                                                 &stored, &text, &length));
        CHECK(stored == 1 && text != NULL && length == 1 && text[0] == 'a');
        cohort_free(text);
        text = NULL;
        CHECK_OK(cohort_coordinator_client_store_compare_and_set(client, "cjob", generation, "leader", "x", 1, "b", 1,
                                                                 &stored, &text, &length));
        CHECK(stored == 0 && text != NULL && text[0] == 'a');
        cohort_free(text);
        text = NULL;
        CHECK_OK(cohort_coordinator_client_store_wait(client, "cjob", generation, keys, 2, 1.0));
        keys[1] = "missing";
        CHECK_ERR(cohort_coordinator_client_store_wait(client, "cjob", generation, keys, 2, 0.03), COHORT_ERR_TIMEOUT,
                  "missing");
        CHECK_OK(cohort_coordinator_client_store_delete(client, "cjob", generation, "leader", &deleted));
        CHECK(deleted == 1);
        CHECK_OK(cohort_coordinator_client_store_delete(client, "cjob", generation, "leader", &deleted));
        CHECK(deleted == 0);
    }

    /* A heartbeat with batched steps and GPU samples, as JSON. */
    CHECK_OK(cohort_coordinator_client_heartbeat_json(
        client, "cjob", "a", generation,
        "{\"step\": 9, \"collective_seq\": 4, \"in_collective\": true, \"gpu\": {\"gpus\": []},"
        " \"samples\": [{\"age\": 0.5, \"step\": 8, \"step_time\": 0.2}, {\"age\": 0, \"step\": 9}]}",
        &text, &length));
    CHECK_HAS(text, "\"state\":\"active\"");
    CHECK_HAS(text, "\"world_size\":2");
    cohort_free(text);
    text = NULL;
    CHECK_OK(cohort_coordinator_client_job_state(client, "cjob", &text, NULL));
    CHECK_HAS(text, "\"step\":9");
    CHECK_HAS(text, "\"collective_seq\":4");
    cohort_free(text);
    text = NULL;
    CHECK_ERR(cohort_coordinator_client_heartbeat_json(client, "cjob", "a", generation, "{\"step\": -1}", &text, NULL),
              COHORT_ERR_INVALID_ARGUMENT, "step");
    CHECK_ERR(cohort_coordinator_client_heartbeat_json(client, "cjob", "a", generation, "{\"speed\": 1}", &text, NULL),
              COHORT_ERR_INVALID_ARGUMENT, "metrics_json: unknown field 'speed'");
    CHECK_ERR(cohort_coordinator_client_heartbeat_json(client, "cjob", "a", generation, "{\"samples\": [{\"age\": 1}]}",
                                                       &text, NULL),
              COHORT_ERR_INVALID_ARGUMENT, "samples[0]: missing field 'step'");
    CHECK_ERR(
        cohort_coordinator_client_heartbeat_json(client, "cjob", "a", generation, "{\"samples\": [3]}", &text, NULL),
        COHORT_ERR_INVALID_ARGUMENT, "samples[0]: expected an object, not a number");
    CHECK(text == NULL);

    /* Shards. */
    CHECK_OK(
        cohort_coordinator_client_register_dataset(client, "cjob", "{\"shards\": [{\"id\": \"only\", \"bytes\": 5}]}"));
    CHECK_OK(cohort_coordinator_client_next_shard(client, "cjob", "a", &text, &length));
    CHECK_HAS(text, "\"granted\":true");
    CHECK_HAS(text, "\"shard_id\":\"only\"");
    {
        const char* lease_text = text != NULL ? strstr(text, "\"lease\":") : NULL;
        unsigned long long lease = 0;
        CHECK(lease_text != NULL && sscanf(lease_text, "\"lease\":%llu", &lease) == 1);
        int32_t outcome = -1;
        /* Given back, the shard is leased again at once (a new lease). */
        CHECK_OK(cohort_coordinator_client_shard_release(client, "cjob", "a", (uint64_t)lease, &outcome));
        CHECK(outcome == COHORT_SHARD_RELEASED);
        CHECK_OK(cohort_coordinator_client_shard_release(client, "cjob", "a", (uint64_t)lease, &outcome));
        CHECK(outcome == COHORT_SHARD_REQUEUED);
        CHECK_ERR(cohort_coordinator_client_shard_release(client, "cjob", "a", 999, &outcome), COHORT_ERR_NOT_FOUND,
                  "never granted lease 999");
        CHECK_ERR(cohort_coordinator_client_shard_release(client, "cjob", NULL, 1, &outcome),
                  COHORT_ERR_INVALID_ARGUMENT, "member");
        cohort_free(text);
        text = NULL;
        CHECK_OK(cohort_coordinator_client_next_shard(client, "cjob", "a", &text, &length));
        CHECK_HAS(text, "\"shard_id\":\"only\"");
        lease_text = text != NULL ? strstr(text, "\"lease\":") : NULL;
        CHECK(lease_text != NULL && sscanf(lease_text, "\"lease\":%llu", &lease) == 1);
        CHECK_OK(cohort_coordinator_client_shard_done(client, "cjob", "a", (uint64_t)lease, &outcome));
        CHECK(outcome == COHORT_SHARD_COUNTED);
        CHECK_OK(cohort_coordinator_client_shard_release(client, "cjob", "a", (uint64_t)lease, NULL));
        CHECK_OK(cohort_coordinator_client_shard_release(client, "cjob", "a", (uint64_t)lease, &outcome));
        CHECK(outcome == COHORT_SHARD_REPORTED);
        CHECK_OK(cohort_coordinator_client_shard_done(client, "cjob", "a", (uint64_t)lease, &outcome));
        CHECK(outcome == COHORT_SHARD_ALREADY_DONE);
        CHECK_OK(cohort_coordinator_client_shard_done(client, "cjob", "a", (uint64_t)lease, NULL));
    }
    cohort_free(text);
    text = NULL;
    CHECK_OK(cohort_coordinator_client_next_shard(client, "cjob", "a", &text, NULL));
    CHECK_HAS(text, "\"finished\":true");
    cohort_free(text);
    text = NULL;

    CHECK_ERR(cohort_coordinator_client_leave_failed(client, "cjob", "b", ""), COHORT_ERR_INVALID_ARGUMENT, "failure");
    CHECK_ERR(cohort_coordinator_client_leave_failed(client, "cjob", "b", NULL), COHORT_ERR_INVALID_ARGUMENT,
              "failure");
    CHECK_OK(cohort_coordinator_client_leave_failed(client, "cjob", "b", "killed by signal 9"));
    CHECK_OK(
        cohort_coordinator_client_heartbeat(client, "cjob", "a", generation, -1, -1.0, -1.0, NULL, NULL, &rendezvous));
    CHECK(rendezvous == 1);
    CHECK_OK(cohort_coordinator_client_job_state(client, "cjob", &text, NULL));
    CHECK_HAS(text, "killed by signal 9");
    CHECK_HAS(text, "\"failed\"");
    cohort_free(text);
    text = NULL;

    /* Errors. */
    CHECK_ERR(cohort_coordinator_client_job_state(client, "no-such-job", &text, NULL), COHORT_ERR_NOT_FOUND,
              "no-such-job");
    CHECK_OK(cohort_coordinator_client_create(url, "wrong", 0, 0, &wrong));
    CHECK_ERR(cohort_coordinator_client_leave(wrong, "cjob", "a"), COHORT_ERR_PERMISSION_DENIED, "401");
    CHECK_ERR(cohort_coordinator_client_create(NULL, NULL, 0, 0, &wrong), COHORT_ERR_INVALID_ARGUMENT, "url");
    CHECK_ERR(cohort_coordinator_client_create("ftp://x", NULL, 0, 0, &client), COHORT_ERR_INVALID_ARGUMENT,
              "http://HOST:PORT");
    CHECK_ERR(cohort_coordinator_client_world(NULL, "cjob", "a", &text, NULL), COHORT_ERR_INVALID_ARGUMENT, "client");
    CHECK(text == NULL);

    cohort_coordinator_client_destroy(wrong);
    cohort_coordinator_client_destroy(client);
    cohort_coordinator_destroy(server);
    cohort_coordinator_client_destroy(NULL);
    cohort_coordinator_destroy(NULL);

    /* A server that is gone: UNAVAILABLE naming the URL, within the deadline. */
    CHECK_OK(cohort_coordinator_client_create(saved_url, NULL, 1.0, 0.2, &client));
    CHECK_ERR(cohort_coordinator_client_job_state(client, "cjob", &text, NULL), COHORT_ERR_UNAVAILABLE, "curl error");
    cohort_coordinator_client_destroy(client);
}

/* Options as JSON: a server from them; unknown fields, wrong types and bad
 * etcd settings refused naming the field. */
static void test_coordinator_json(void) {
    cohort_coordinator* server = NULL;
    const char* url = NULL;
    CHECK_OK(cohort_coordinator_from_json("{\"host\": \"127.0.0.1\", \"port\": 0, \"token\": \"\"}", &server));
    CHECK_OK(cohort_coordinator_url(server, &url));
    CHECK_HAS(url, "http://127.0.0.1:");
    cohort_coordinator_destroy(server);
    server = NULL;
    CHECK_OK(cohort_coordinator_from_json(NULL, &server));
    cohort_coordinator_destroy(server);
    server = NULL;
    CHECK_ERR(cohort_coordinator_from_json("{\"prot\": 1}", &server), COHORT_ERR_INVALID_ARGUMENT, "\"prot\"");
    CHECK_ERR(cohort_coordinator_from_json("{\"port\": \"80\"}", &server), COHORT_ERR_INVALID_ARGUMENT, "\"port\"");
    CHECK_ERR(cohort_coordinator_from_json("[1]", &server), COHORT_ERR_INVALID_ARGUMENT, "object");
    CHECK_ERR(cohort_coordinator_from_json("{\"etcd\": \"127.0.0.1:1\", \"etcd_prefix\": \"rel\"}", &server),
              COHORT_ERR_INVALID_ARGUMENT, "prefix");
    CHECK_ERR(cohort_coordinator_from_json("{\"etcd\": \"127.0.0.1:1\", \"data_dir\": \"/tmp/x\"}", &server),
              COHORT_ERR_INVALID_ARGUMENT, "etcd");
    /* A field name's odd bytes come back escaped. */
    CHECK_ERR(cohort_coordinator_from_json("{\"a\\u0001\\u00e9\": 1}", &server), COHORT_ERR_INVALID_ARGUMENT,
              "unknown field \"a\\x01\\xc3\\xa9\"");
    /* TLS and connection limits: files checked, values range-checked. */
    CHECK_ERR(cohort_coordinator_from_json("{\"tls_cert\": \"/nonexistent/c.pem\", \"tls_key\": \"/nonexistent/k.pem\"}",
                                           &server),
              COHORT_ERR_INVALID_ARGUMENT, "/nonexistent/c.pem");
    CHECK_ERR(cohort_coordinator_from_json("{\"tls_client_ca\": \"/nonexistent/ca.pem\"}", &server),
              COHORT_ERR_INVALID_ARGUMENT, "tls_cert_file");
    CHECK_ERR(cohort_coordinator_from_json("{\"max_connections\": 70000}", &server), COHORT_ERR_INVALID_ARGUMENT,
              "\"max_connections\" must be a whole number from 0 to 65536");
    CHECK_ERR(cohort_coordinator_from_json("{\"idle_timeout\": 0}", &server), COHORT_ERR_INVALID_ARGUMENT,
              "\"idle_timeout\" must be a positive number");
    CHECK(server == NULL);
    CHECK_OK(cohort_coordinator_from_json("{\"max_connections\": 64, \"max_connections_per_client\": 8, "
                                          "\"idle_timeout\": 5, \"crowded_idle_timeout\": 0.5}",
                                          &server));
    cohort_coordinator_destroy(server);
    server = NULL;
}

int run_coordinator_tests(void); /* called by c_test.c's main() */

int run_coordinator_tests(void) {
    int failed_before = coord_failed;
    test_coordinator();
    test_coordinator_json();
    printf("%-18s %s\n", "coordinator", coord_failed == failed_before ? "ok" : "FAILED");
    printf("coordinator: %d passed, %d failed\n", coord_passed, coord_failed);
    return coord_failed;
}
