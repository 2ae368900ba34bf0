/*
 * c_test_advisor.c: the data advisor through the C ABI, from plain C11:
 * cohort_shard_plan_advise on a plan whose locality map puts one file on
 * one node: the baseline per style, the local replica chosen, a measured
 * data wait raising the prefetch, the memory budget capping it, and the
 * errors (bad options, a pattern that matches nothing, a node that is not
 * a member). Includes nothing from cohort but cohort.h; c_test.c's main()
 * runs it.
 */
#include "cohort.h"

#include <stdio.h>
#include <string.h>

static int advisor_passed;
static int advisor_failed;

static void advisor_fail(const char* file, int line, const char* what) {
    ++advisor_failed;
    fprintf(stderr, "%s:%d: FAILED: %s\n", file, line, what);
}

/* status must be `code`; unless it is COHORT_OK, the last error must contain `needle`. */
static void check_status(const char* file, int line, const char* call, int status, int code, const char* needle) {
    const char* message = cohort_last_error();
    if (status == code && (code == COHORT_OK || strstr(message, needle) != NULL)) {
        ++advisor_passed;
        return;
    }
    advisor_fail(file, line, call);
    fprintf(stderr, "    returned %d (%s; expected %d), last error: \"%s\"\n", status, cohort_strerror(status), code,
            message);
    if (code != COHORT_OK) fprintf(stderr, "    expected it to contain \"%s\"\n", needle);
}

static void check_has(const char* file, int line, const char* what, const char* text, const char* needle, int want) {
    const int has = text != NULL && strstr(text, needle) != NULL;
    if (has == want) {
        ++advisor_passed;
        return;
    }
    advisor_fail(file, line, what);
    fprintf(stderr, "    %s \"%s\"\n    in \"%.600s\"\n", want ? "lacks" : "has", needle, text ? text : "(null)");
}

#define CHECK(cond) ((cond) ? (void)++advisor_passed : advisor_fail(__FILE__, __LINE__, #cond))
#define CHECK_OK(call) check_status(__FILE__, __LINE__, #call, (call), COHORT_OK, "")
#define CHECK_ERR(call, code, needle) check_status(__FILE__, __LINE__, #call, (call), (code), (needle))
#define CHECK_HAS(text, needle) check_has(__FILE__, __LINE__, #text, (text), (needle), 1)
#define CHECK_LACKS(text, needle) check_has(__FILE__, __LINE__, #text, (text), (needle), 0)

#define MIB (1024ull * 1024ull)

/* Three workers holding every shard of two 4 MiB files (4096 records each:
 * 1 KiB per sample), cut in 4 shards; w1 has train/a.rec on its disk. */
static cohort_shard_plan* make_plan(void) {
    cohort_topology* t = NULL;
    cohort_dataset* d = NULL;
    cohort_shards* s = NULL;
    cohort_plan_options* o = NULL;
    cohort_shard_plan* plan = NULL;
    CHECK_OK(cohort_topology_create(&t));
    CHECK_OK(cohort_topology_add_node(t, "w0", NULL, NULL, COHORT_ROLE_WORKER));
    CHECK_OK(cohort_topology_add_node(t, "w1", NULL, NULL, COHORT_ROLE_WORKER));
    CHECK_OK(cohort_topology_add_node(t, "w2", NULL, NULL, COHORT_ROLE_WORKER));
    CHECK_OK(cohort_dataset_create(&d));
    CHECK_OK(cohort_dataset_add_file(d, "train/a.rec", 4 * MIB, 4096));
    CHECK_OK(cohort_dataset_add_file(d, "eval/b.rec", 4 * MIB, 4096));
    CHECK_OK(cohort_shards_split(d, 0, 4, &s));
    CHECK_OK(cohort_plan_options_create(&o));
    CHECK_OK(cohort_plan_options_set_replication(o, 3));
    CHECK_OK(cohort_plan_options_add_locality(o, "w1", "train/a.rec", 1.0));
    CHECK_OK(cohort_shard_plan_create(s, t, o, &plan));
    cohort_plan_options_destroy(o);
    cohort_shards_destroy(s);
    cohort_dataset_destroy(d);
    cohort_topology_destroy(t);
    return plan;
}

static void test_advice(cohort_shard_plan* plan) {
    char* json = NULL;
    size_t length = 0;
    /* Parameter server: 4 batches of 256 KiB; train/a.rec is shards 0 and 1, read from w1. */
    CHECK_OK(cohort_shard_plan_advise(plan,
                                      "{\"batch_size\": 256, \"memory_budget_bytes\": \"16MiB\", "
                                      "\"style\": \"parameter_server\", \"patterns\": [\"train/*\"]}",
                                      &json, &length));
    CHECK(json != NULL && length == strlen(json));
    CHECK_HAS(json, "\"style\":\"parameter_server\"");
    CHECK_HAS(json, "\"batch_bytes\":262144");
    CHECK_HAS(json, "\"files\":[\"train/a.rec\"]");
    CHECK_HAS(json, "\"prefetch\":{\"batches\":4,\"bytes\":1048576");
    CHECK_HAS(json, "\"high_locality\":{\"nodes\":[\"w1\"]");
    CHECK_HAS(json, "\"shard\":0,\"bytes\":2097152,\"preferred_node\":\"w1\",\"locality\":1");
    CHECK_HAS(json, "\"shard\":1,\"bytes\":2097152,\"preferred_node\":\"w1\"");
    CHECK_LACKS(json, "\"shard\":2,"); /* eval/b.rec is not selected */
    CHECK_HAS(json, "\"cache\":{\"enabled\":false");
    cohort_free(json);

    /* All-reduce, 2 epochs: 2 batches, and a cache. NULL length is allowed. */
    json = NULL;
    CHECK_OK(cohort_shard_plan_advise(plan, "{\"batch_size\": 256, \"memory_budget_bytes\": 16777216, \"epochs\": 2}",
                                      &json, NULL));
    CHECK_HAS(json, "\"prefetch\":{\"batches\":2,");
    CHECK_HAS(json, "\"cache\":{\"enabled\":true,\"reason\":\"epochs 2 > 1");
    CHECK_HAS(json, "\"strategy\":\"memory\"");
    cohort_free(json);

    /* A measured data wait with a low hit rate: 4 / (1 - 0.5) = 8 batches... */
    json = NULL;
    CHECK_OK(cohort_shard_plan_advise(plan,
                                      "{\"batch_size\": 256, \"memory_budget_bytes\": \"16MiB\", "
                                      "\"style\": \"parameter_server\", \"measurements\": {\"job\": "
                                      "{\"data_wait_fraction\": 0.5, \"prefetch_hit_rate\": 0.1}}}",
                                      &json, &length));
    CHECK_HAS(json, "\"prefetch\":{\"batches\":8,\"bytes\":2097152");
    CHECK_HAS(json, "raised to ceil(4 / (1 - 0.50)) = 8 batches");
    CHECK_HAS(json, "\"measured\":true");
    cohort_free(json);

    /* ... and a budget of 1 MiB holds it to 4 batches. */
    json = NULL;
    CHECK_OK(cohort_shard_plan_advise(plan,
                                      "{\"batch_size\": 256, \"memory_budget_bytes\": \"1MiB\", "
                                      "\"style\": \"parameter_server\", \"measurements\": {\"nodes\": {\"w2\": "
                                      "{\"data_wait\": 0.5, \"step_time\": 1.0}}}}",
                                      &json, &length));
    CHECK_HAS(json, "\"node\":\"w2\",\"prefetch\":{\"batches\":4,");
    CHECK_HAS(json, "capped at 4 batches by the memory budget");
    cohort_free(json);

    /* Raised from the depth in use (3 / (1 - 0.25) = 4), then divided by the
     * factor floor 0.5 that a reduce_prefetch rule may apply: 8 batches. */
    json = NULL;
    CHECK_OK(cohort_shard_plan_advise(plan,
                                      "{\"batch_size\": 256, \"memory_budget_bytes\": \"16MiB\", "
                                      "\"prefetch_factor_floor\": 0.5, \"measurements\": {\"job\": "
                                      "{\"data_wait_fraction\": 0.25, \"prefetch_depth\": 3}}}",
                                      &json, &length));
    CHECK_HAS(json, "\"prefetch\":{\"batches\":8,");
    CHECK_HAS(json, "= 4 batches from the depth in use");
    CHECK_HAS(json, "divided by the prefetch factor floor 0.50");
    cohort_free(json);
}

static void test_errors(cohort_shard_plan* plan) {
    char* json = NULL;
    CHECK_ERR(cohort_shard_plan_advise(plan, "{\"batch_size\": 0, \"memory_budget_bytes\": 1}", &json, NULL),
              COHORT_ERR_INVALID_ARGUMENT, "batch_size: must be at least 1");
    CHECK(json == NULL); /* out-parameters are written only on success */
    CHECK_ERR(cohort_shard_plan_advise(plan, "{\"batch_size\": 8, \"memory_budget_bytes\": 1, "
                                             "\"prefetch_factor_floor\": 2}", &json, NULL),
              COHORT_ERR_INVALID_ARGUMENT, "prefetch_factor_floor: must be in (0, 1]");
    CHECK_ERR(cohort_shard_plan_advise(plan, "{\"batch_size\": 8}", &json, NULL), COHORT_ERR_INVALID_ARGUMENT,
              "cohort_shard_plan_advise: options_json: missing field 'memory_budget_bytes'");
    CHECK_ERR(cohort_shard_plan_advise(plan,
                                       "{\"batch_size\": 8, \"memory_budget_bytes\": 1, \"measurements\": {\"job\": "
                                       "{\"prefetch_hit_rate\": 1.5}}}",
                                       &json, NULL),
              COHORT_ERR_INVALID_ARGUMENT, "prefetch_hit_rate: must be in [0, 1], got 1.5");
    CHECK_ERR(cohort_shard_plan_advise(plan,
                                       "{\"batch_size\": 8, \"memory_budget_bytes\": 1, \"measurements\": {\"job\": "
                                       "{\"read_bytes_per_second\": -5}}}",
                                       &json, NULL),
              COHORT_ERR_INVALID_ARGUMENT, "read_bytes_per_second: must be a finite number >= 0");
    CHECK_ERR(cohort_shard_plan_advise(
                  plan, "{\"batch_size\": 8, \"memory_budget_bytes\": 1, \"patterns\": [\"nope/*\"]}", &json, NULL),
              COHORT_ERR_NOT_FOUND, "file pattern 'nope/*' matches none of the dataset's 2 files");
    CHECK_ERR(cohort_shard_plan_advise(plan,
                                       "{\"batch_size\": 8, \"memory_budget_bytes\": 1, \"measurements\": "
                                       "{\"nodes\": {\"w9\": {\"data_wait_fraction\": 0.1}}}}",
                                       &json, NULL),
              COHORT_ERR_NOT_FOUND, "measurements for node 'w9'");
    CHECK_ERR(
        cohort_shard_plan_advise(plan, "{\"batch_size\": 8, \"memory_budget_bytes\": 1, \"colour\": 1}", &json, NULL),
        COHORT_ERR_INVALID_ARGUMENT, "unknown field 'colour'");
    CHECK_ERR(cohort_shard_plan_advise(plan, "not json", &json, NULL), COHORT_ERR_INVALID_ARGUMENT, "not JSON");
    CHECK_ERR(cohort_shard_plan_advise(NULL, "{}", &json, NULL), COHORT_ERR_INVALID_ARGUMENT, "plan must not be NULL");
    CHECK_ERR(cohort_shard_plan_advise(plan, NULL, &json, NULL), COHORT_ERR_INVALID_ARGUMENT,
              "options_json must not be NULL");
    CHECK_ERR(cohort_shard_plan_advise(plan, "{\"batch_size\": 8, \"memory_budget_bytes\": 1}", NULL, NULL),
              COHORT_ERR_INVALID_ARGUMENT, "advice_json must not be NULL");
    CHECK(json == NULL);
}

int run_advisor_tests(void) {
    cohort_shard_plan* plan = make_plan();
    if (plan != NULL) {
        test_advice(plan);
        test_errors(plan);
    }
    cohort_shard_plan_destroy(plan);
    printf("c_test_advisor: %d checks passed, %d failed\n", advisor_passed, advisor_failed);
    return advisor_failed;
}
