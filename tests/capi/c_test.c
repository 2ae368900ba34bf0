/*
 * c_test.c: the C ABI from plain C11. Includes only cohort.h and calls every
 * function it declares, checking real results and the error paths a C user
 * relies on (status codes, cohort_last_error, untouched out-parameters).
 *
 * Usage: capi_c_test SCRATCH_DIR  (an existing directory for temporary files)
 */
#include "cohort.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ harness */

static int g_passed;
static int g_failed;
static const char* g_scratch;

static void report_failure(const char* file, int line, const char* what) {
    ++g_failed;
    fprintf(stderr, "%s:%d: FAILED: %s\n", file, line, what);
}

#define CHECK(cond)                                           \
    do {                                                      \
        if (cond)                                             \
            ++g_passed;                                       \
        else                                                  \
            report_failure(__FILE__, __LINE__, #cond);        \
    } while (0)

/* A call that must succeed; prints the status and message if it does not. */
#define CHECK_OK(call)                                                                     \
    do {                                                                                   \
        int rc_ = (call);                                                                  \
        if (rc_ == COHORT_OK) {                                                            \
            ++g_passed;                                                                    \
        } else {                                                                           \
            report_failure(__FILE__, __LINE__, #call);                                     \
            fprintf(stderr, "    returned %d (%s): %s\n", rc_, cohort_strerror(rc_),        \
                    cohort_last_error());                                                  \
        }                                                                                  \
    } while (0)

/* A call that must fail with `code` and leave a message behind. */
#define CHECK_ERR(call, code)                                                              \
    do {                                                                                   \
        int rc_ = (call);                                                                  \
        if (rc_ == (code) && (rc_ == COHORT_OK || cohort_last_error()[0] != '\0')) {       \
            ++g_passed;                                                                    \
        } else {                                                                           \
            report_failure(__FILE__, __LINE__, #call " == " #code);                        \
            fprintf(stderr, "    returned %d (%s), last error: \"%s\"\n", rc_,               \
                    cohort_strerror(rc_), cohort_last_error());                            \
        }                                                                                  \
    } while (0)

/* A call that must fail (with any code) and leave a message behind. */
#define CHECK_FAILS(call)                                                                  \
    do {                                                                                   \
        int rc_ = (call);                                                                  \
        if (rc_ != COHORT_OK && cohort_last_error()[0] != '\0') {                          \
            ++g_passed;                                                                    \
        } else {                                                                           \
            report_failure(__FILE__, __LINE__, #call " fails");                            \
            fprintf(stderr, "    returned %d (%s)\n", rc_, cohort_strerror(rc_));           \
        }                                                                                  \
    } while (0)

#define CHECK_STR(actual, expected)                                                        \
    do {                                                                                   \
        const char* a_ = (actual);                                                         \
        const char* e_ = (expected);                                                       \
        if (a_ != NULL && strcmp(a_, e_) == 0) {                                           \
            ++g_passed;                                                                    \
        } else {                                                                           \
            report_failure(__FILE__, __LINE__, #actual " == \"" #expected "\"");           \
            fprintf(stderr, "    got \"%s\", expected \"%s\"\n", a_ ? a_ : "(null)", e_);   \
        }                                                                                  \
    } while (0)

/* The message of the last failure mentions `needle`. */
#define CHECK_MESSAGE_HAS(needle)                                                          \
    do {                                                                                   \
        const char* m_ = cohort_last_error();                                              \
        if (m_ != NULL && strstr(m_, (needle)) != NULL) {                                  \
            ++g_passed;                                                                    \
        } else {                                                                           \
            report_failure(__FILE__, __LINE__, "last error mentions \"" needle "\"");      \
            fprintf(stderr, "    last error: \"%s\"\n", m_ ? m_ : "(null)");               \
        }                                                                                  \
    } while (0)

static int contains(const char* haystack, const char* needle) {
    return haystack != NULL && strstr(haystack, needle) != NULL;
}

static int write_file(const char* path, const char* text) {
    FILE* f = fopen(path, "wb");
    if (f == NULL) return 0;
    size_t n = strlen(text);
    int ok = fwrite(text, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

static void scratch_path(char* out, size_t size, const char* name) {
    snprintf(out, size, "%s/%s", g_scratch, name);
}

/* ------------------------------------------------------------- status */

static void test_status(void) {
    /* Nothing has failed yet on this thread. */
    CHECK_STR(cohort_last_error(), "");

    char expected[32];
    snprintf(expected, sizeof expected, "%d.%d.%d", COHORT_VERSION_MAJOR, COHORT_VERSION_MINOR,
             COHORT_VERSION_PATCH);
    CHECK_STR(cohort_version(), expected);
    CHECK_STR(cohort_version(), "0.1.0");

    CHECK_STR(cohort_strerror(COHORT_OK), "ok");
    CHECK_STR(cohort_strerror(COHORT_ERR_INVALID_ARGUMENT), "invalid argument");
    CHECK_STR(cohort_strerror(COHORT_ERR_PARSE), "parse error");
    CHECK_STR(cohort_strerror(COHORT_ERR_NOT_FOUND), "not found");
    CHECK_STR(cohort_strerror(COHORT_ERR_OUT_OF_RANGE), "out of range");
    CHECK_STR(cohort_strerror(COHORT_ERR_CALLBACK), "callback failed");
    CHECK_STR(cohort_strerror(COHORT_ERR_BUFFER_TOO_SMALL), "buffer too small");
    CHECK_STR(cohort_strerror(COHORT_ERR_UNSATISFIABLE), "unsatisfiable");
    /* Every code has its own non-empty name; unknown codes still get text. */
    for (int a = COHORT_OK; a <= COHORT_ERR_UNSATISFIABLE; ++a) {
        const char* name = cohort_strerror(a);
        CHECK(name != NULL && name[0] != '\0');
        for (int b = a + 1; b <= COHORT_ERR_UNSATISFIABLE; ++b) {
            const char* other = cohort_strerror(b);
            if (name != NULL && other != NULL && strcmp(name, other) == 0) {
                report_failure(__FILE__, __LINE__, "distinct strerror names");
                fprintf(stderr, "    codes %d and %d are both \"%s\"\n", a, b, name);
            }
        }
    }
    CHECK(cohort_strerror(9999) != NULL && cohort_strerror(9999)[0] != '\0');
    CHECK(cohort_strerror(-1) != NULL && cohort_strerror(-1)[0] != '\0');

    /* Codes never change value: they are part of the ABI. */
    CHECK(COHORT_ERR_INVALID_ARGUMENT == 1 && COHORT_ERR_CALLBACK == 9 &&
          COHORT_ERR_BUFFER_TOO_SMALL == 11 && COHORT_ERR_UNSATISFIABLE == 12);

    cohort_free(NULL);
}

/* ----------------------------------------------------------- topology */

/* One node as the tests expect to read it back. */
typedef struct expected_node {
    const char* id;
    const char* host; /* NULL: the node is its own host */
    const char* address;
    int32_t role;
    int32_t status;
    const char* labels[4]; /* switch, rack, zone, region */
    uint32_t gpus;
    uint64_t gpu_memory;
} expected_node;

#define GIB80 85899345920ull

/* Deliberately not in rank order, so the rank order has work to do. */
static const expected_node kNodes[] = {
    {"w4", "h2", "10.0.2.4:7000", COHORT_ROLE_WORKER, COHORT_STATUS_READY,
     {"s2", "r1", "z0", "eu"}, 8, GIB80},
    {"w2", "h1", "10.0.1.2:7000", COHORT_ROLE_WORKER, COHORT_STATUS_READY,
     {"s1", "r0", "z0", "eu"}, 8, GIB80},
    {"c0", "h0", "10.0.0.1:7000", COHORT_ROLE_CHIEF, COHORT_STATUS_READY,
     {"s0", "r0", "z0", "eu"}, 8, GIB80},
    {"w5", "h2", NULL, COHORT_ROLE_WORKER, COHORT_STATUS_READY, {"s2", "r1", "z0", "eu"}, 8, GIB80},
    {"w1", "h0", NULL, COHORT_ROLE_WORKER, COHORT_STATUS_READY, {"s0", "r0", "z0", "eu"}, 8, GIB80},
    {"w3", "h1", NULL, COHORT_ROLE_WORKER, COHORT_STATUS_READY, {"s1", "r0", "z0", "eu"}, 8, GIB80},
    {"e0", "h3", NULL, COHORT_ROLE_EVALUATOR, COHORT_STATUS_READY,
     {"s3", "r1", "z0", "eu"}, 1, 17179869184ull},
    {"w6", "h3", NULL, COHORT_ROLE_WORKER, COHORT_STATUS_DOWN, {"s3", "r1", "z0", "eu"}, 8, GIB80},
    {"solo", NULL, NULL, COHORT_ROLE_PARAMETER_SERVER, COHORT_STATUS_JOINING,
     {NULL, NULL, NULL, NULL}, 0, 0},
};
#define NODE_COUNT (sizeof kNodes / sizeof kNodes[0])

/* The same cluster as a file, nodes in another order. */
static const char kClusterYaml[] =
    "name: capi-test\n"
    "nodes:\n"
    "  - id: solo\n"
    "    role: ps\n"
    "    status: joining\n"
    "  - id: w6\n"
    "    host: h3\n"
    "    status: down\n"
    "    locality: {switch: s3, rack: r1, zone: z0, region: eu}\n"
    "    gpus: 8\n"
    "    gpu_memory: 80GiB\n"
    "  - id: e0\n"
    "    host: h3\n"
    "    role: evaluator\n"
    "    locality: {switch: s3, rack: r1, zone: z0, region: eu}\n"
    "    gpus: 1\n"
    "    gpu_memory: 16GiB\n"
    "  - id: w3\n"
    "    host: h1\n"
    "    role: worker\n"
    "    locality: {switch: s1, rack: r0, zone: z0, region: eu}\n"
    "    gpus: 8\n"
    "    gpu_memory: 85899345920\n"
    "  - id: w1\n"
    "    host: h0\n"
    "    locality: {switch: s0, rack: r0, zone: z0, region: eu}\n"
    "    gpus: 8\n"
    "    gpu_memory: 80GiB\n"
    "  - id: w5\n"
    "    host: h2\n"
    "    locality: {switch: s2, rack: r1, zone: z0, region: eu}\n"
    "    gpus: 8\n"
    "    gpu_memory: 80GiB\n"
    "  - id: c0\n"
    "    host: h0\n"
    "    address: 10.0.0.1:7000\n"
    "    role: chief\n"
    "    locality:\n"
    "      switch: s0\n"
    "      rack: r0\n"
    "      zone: z0\n"
    "      region: eu\n"
    "    gpus: 8\n"
    "    gpu_memory: 80GiB\n"
    "  - id: w2\n"
    "    host: h1\n"
    "    address: 10.0.1.2:7000\n"
    "    locality: {switch: s1, rack: r0, zone: z0, region: eu}\n"
    "    gpus: 8\n"
    "    gpu_memory: 80GiB\n"
    "  - id: w4\n"
    "    host: h2\n"
    "    address: 10.0.2.4:7000\n"
    "    locality: {switch: s2, rack: r1, zone: z0, region: eu}\n"
    "    gpus: 8\n"
    "    gpu_memory: 80GiB\n";

static cohort_topology* build_topology(void) {
    cohort_topology* t = NULL;
    CHECK_OK(cohort_topology_create(&t));
    if (t == NULL) return NULL;
    for (size_t i = 0; i < NODE_COUNT; ++i) {
        const expected_node* n = &kNodes[i];
        CHECK_OK(cohort_topology_add_node(t, n->id, n->host, n->address, n->role));
        for (int32_t level = COHORT_LEVEL_SWITCH; level <= COHORT_LEVEL_REGION; ++level) {
            if (n->labels[level - 1] != NULL)
                CHECK_OK(cohort_topology_set_locality(t, n->id, level, n->labels[level - 1]));
        }
        if (n->gpus != 0) CHECK_OK(cohort_topology_set_gpus(t, n->id, n->gpus, n->gpu_memory));
        if (n->status != COHORT_STATUS_READY)
            CHECK_OK(cohort_topology_set_status(t, n->id, n->status));
    }
    return t;
}

static const char* const kRoleNames[] = {"worker", "chief", "evaluator", "parameter_server",
                                         "coordinator"};
static const char* const kStatusNames[] = {"ready", "joining", "draining", "down"};

/* Every node of kNodes is in `t` with exactly the expected fields. */
static void check_topology_matches(const cohort_topology* t, const char* what) {
    uint32_t count = 0;
    CHECK_OK(cohort_topology_node_count(t, &count));
    CHECK(count == NODE_COUNT);
    for (size_t i = 0; i < NODE_COUNT; ++i) {
        const expected_node* n = &kNodes[i];
        uint32_t index = UINT32_MAX;
        int rc = cohort_topology_find(t, n->id, &index);
        if (rc != COHORT_OK) {
            report_failure(__FILE__, __LINE__, "node is in the topology");
            fprintf(stderr, "    %s: node '%s' missing: %s\n", what, n->id, cohort_last_error());
            continue;
        }
        CHECK(index < count);
        const char* s = NULL;
        CHECK_OK(cohort_topology_node_str(t, index, COHORT_FIELD_ID, &s));
        CHECK_STR(s, n->id);
        s = NULL;
        CHECK_OK(cohort_topology_node_str(t, index, COHORT_FIELD_HOST, &s));
        if (n->host != NULL) {
            CHECK_STR(s, n->host);
        } else {
            /* No host given: the node is its own host, reported as "" or its id. */
            CHECK(s != NULL && (strcmp(s, "") == 0 || strcmp(s, n->id) == 0));
        }
        s = NULL;
        CHECK_OK(cohort_topology_node_str(t, index, COHORT_FIELD_ADDRESS, &s));
        CHECK_STR(s, n->address != NULL ? n->address : "");
        for (int32_t level = COHORT_LEVEL_SWITCH; level <= COHORT_LEVEL_REGION; ++level) {
            s = NULL;
            /* COHORT_FIELD_SWITCH .. COHORT_FIELD_REGION follow the levels. */
            CHECK_OK(cohort_topology_node_str(t, index, COHORT_FIELD_SWITCH + level - 1, &s));
            CHECK_STR(s, n->labels[level - 1] != NULL ? n->labels[level - 1] : "");
        }
        s = NULL;
        CHECK_OK(cohort_topology_node_str(t, index, COHORT_FIELD_ROLE, &s));
        CHECK_STR(s, kRoleNames[n->role]);
        s = NULL;
        CHECK_OK(cohort_topology_node_str(t, index, COHORT_FIELD_STATUS, &s));
        CHECK_STR(s, kStatusNames[n->status]);

        int32_t role = -1, status = -1;
        uint32_t gpus = 12345;
        uint64_t memory = 12345;
        CHECK_OK(cohort_topology_node_info(t, index, &role, &status, &gpus, &memory));
        CHECK(role == n->role);
        CHECK(status == n->status);
        CHECK(gpus == n->gpus);
        CHECK(memory == n->gpu_memory);
    }
}

static void test_topology_build(void) {
    cohort_topology* t = build_topology();
    CHECK(t != NULL);
    if (t == NULL) return;
    check_topology_matches(t, "built");

    /* Insertion order is kept. */
    const char* s = NULL;
    CHECK_OK(cohort_topology_node_str(t, 0, COHORT_FIELD_ID, &s));
    CHECK_STR(s, "w4");
    CHECK_OK(cohort_topology_node_str(t, NODE_COUNT - 1, COHORT_FIELD_ID, &s));
    CHECK_STR(s, "solo");

    /* Errors name the culprit, and leave out-parameters alone. */
    CHECK_ERR(cohort_topology_add_node(t, "w1", "h9", NULL, COHORT_ROLE_WORKER),
              COHORT_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("w1");
    CHECK_ERR(cohort_topology_add_node(t, "", NULL, NULL, COHORT_ROLE_WORKER),
              COHORT_ERR_INVALID_ARGUMENT);
    CHECK_ERR(cohort_topology_add_node(t, "bad-role", NULL, NULL, 17), COHORT_ERR_INVALID_ARGUMENT);
    CHECK_ERR(cohort_topology_add_node(t, "bad-role", NULL, NULL, -1), COHORT_ERR_INVALID_ARGUMENT);
    CHECK_ERR(cohort_topology_set_gpus(t, "ghost-node", 1, 1), COHORT_ERR_NOT_FOUND);
    CHECK_MESSAGE_HAS("ghost-node");
    CHECK_ERR(cohort_topology_set_status(t, "ghost-node", COHORT_STATUS_DOWN), COHORT_ERR_NOT_FOUND);
    CHECK_ERR(cohort_topology_set_status(t, "w1", 42), COHORT_ERR_INVALID_ARGUMENT);
    CHECK_ERR(cohort_topology_set_locality(t, "ghost-node", COHORT_LEVEL_RACK, "r0"),
              COHORT_ERR_NOT_FOUND);
    CHECK_ERR(cohort_topology_set_locality(t, "w1", COHORT_LEVEL_HOST, "h0"),
              COHORT_ERR_INVALID_ARGUMENT);
    CHECK_ERR(cohort_topology_set_locality(t, "w1", 9, "x"), COHORT_ERR_INVALID_ARGUMENT);

    uint32_t count = 0;
    CHECK_OK(cohort_topology_node_count(t, &count));
    CHECK(count == NODE_COUNT); /* failed adds added nothing */

    uint32_t index = 777;
    CHECK_ERR(cohort_topology_find(t, "ghost-node", &index), COHORT_ERR_NOT_FOUND);
    CHECK_MESSAGE_HAS("ghost-node");
    CHECK(index == 777);
    s = "untouched";
    CHECK_ERR(cohort_topology_node_str(t, NODE_COUNT, COHORT_FIELD_ID, &s), COHORT_ERR_OUT_OF_RANGE);
    CHECK_STR(s, "untouched");
    CHECK_ERR(cohort_topology_node_str(t, 0, 99, &s), COHORT_ERR_INVALID_ARGUMENT);
    CHECK_STR(s, "untouched");
    int32_t role = -5, status = -5;
    uint32_t gpus = 5;
    uint64_t memory = 5;
    CHECK_ERR(cohort_topology_node_info(t, 1000, &role, &status, &gpus, &memory),
              COHORT_ERR_OUT_OF_RANGE);
    CHECK(role == -5 && status == -5 && gpus == 5 && memory == 5);

    /* Clearing a label with "" or NULL; changing status and GPUs. */
    CHECK_OK(cohort_topology_find(t, "w1", &index));
    CHECK_OK(cohort_topology_set_locality(t, "w1", COHORT_LEVEL_ZONE, ""));
    CHECK_OK(cohort_topology_set_locality(t, "w1", COHORT_LEVEL_REGION, NULL));
    CHECK_OK(cohort_topology_node_str(t, index, COHORT_FIELD_ZONE, &s));
    CHECK_STR(s, "");
    CHECK_OK(cohort_topology_node_str(t, index, COHORT_FIELD_REGION, &s));
    CHECK_STR(s, "");
    CHECK_OK(cohort_topology_node_str(t, index, COHORT_FIELD_RACK, &s));
    CHECK_STR(s, "r0");
    CHECK_OK(cohort_topology_set_status(t, "w1", COHORT_STATUS_DRAINING));
    CHECK_OK(cohort_topology_set_gpus(t, "w1", 4, 1024));
    CHECK_OK(cohort_topology_node_info(t, index, &role, &status, &gpus, &memory));
    CHECK(status == COHORT_STATUS_DRAINING && gpus == 4 && memory == 1024 &&
          role == COHORT_ROLE_WORKER);
    CHECK_OK(cohort_topology_node_str(t, index, COHORT_FIELD_STATUS, &s));
    CHECK_STR(s, "draining");

    cohort_topology_destroy(t);
}

static void test_topology_load(void) {
    cohort_topology* built = build_topology();
    cohort_topology* loaded = NULL;
    CHECK_OK(cohort_topology_load_string(kClusterYaml, strlen(kClusterYaml), COHORT_FORMAT_YAML,
                                         "cluster.yaml", &loaded));
    if (loaded != NULL) check_topology_matches(loaded, "loaded from YAML");
    cohort_topology_destroy(loaded);

    /* AUTO sniffs YAML; the length bounds the text (no NUL needed). */
    loaded = NULL;
    CHECK_OK(cohort_topology_load_string(kClusterYaml, strlen(kClusterYaml), COHORT_FORMAT_AUTO,
                                         NULL, &loaded));
    if (loaded != NULL) check_topology_matches(loaded, "loaded with AUTO");
    cohort_topology_destroy(loaded);

    /* JSON round trip through to_json. */
    char* json = NULL;
    size_t length = 0;
    CHECK_OK(cohort_topology_to_json(built, &json, &length));
    CHECK(json != NULL && length == strlen(json));
    CHECK(json != NULL && json[0] == '{');
    CHECK(contains(json, "\"nodes\""));
    CHECK(contains(json, "\"c0\""));
    CHECK(contains(json, "\"chief\""));
    CHECK(contains(json, "\"eu\""));
    if (json != NULL) {
        loaded = NULL;
        CHECK_OK(cohort_topology_load_string(json, length, COHORT_FORMAT_JSON, "round-trip.json",
                                             &loaded));
        if (loaded != NULL) check_topology_matches(loaded, "JSON round trip");
        cohort_topology_destroy(loaded);
        loaded = NULL;
        CHECK_OK(cohort_topology_load_string(json, length, COHORT_FORMAT_AUTO, NULL, &loaded));
        if (loaded != NULL) check_topology_matches(loaded, "JSON with AUTO");
        cohort_topology_destroy(loaded);

        /* From files, the format chosen by the extension. */
        char path[1024];
        scratch_path(path, sizeof path, "cluster.json");
        CHECK(write_file(path, json));
        loaded = NULL;
        CHECK_OK(cohort_topology_load_file(path, &loaded));
        if (loaded != NULL) check_topology_matches(loaded, "cluster.json file");
        cohort_topology_destroy(loaded);
    }
    cohort_free(json);

    char path[1024];
    scratch_path(path, sizeof path, "cluster.yaml");
    CHECK(write_file(path, kClusterYaml));
    loaded = NULL;
    CHECK_OK(cohort_topology_load_file(path, &loaded));
    if (loaded != NULL) check_topology_matches(loaded, "cluster.yaml file");
    cohort_topology_destroy(loaded);

    /* Errors: where, which field, what. */
    cohort_topology* untouched = (cohort_topology*)&untouched;
    scratch_path(path, sizeof path, "no-such-cluster.yaml");
    CHECK_ERR(cohort_topology_load_file(path, &untouched), COHORT_ERR_IO);
    CHECK_MESSAGE_HAS("no-such-cluster.yaml");
    CHECK(untouched == (cohort_topology*)&untouched);

    static const char bad_gpus[] = "nodes:\n  - id: a\n    gpus: lots\n";
    CHECK_ERR(cohort_topology_load_string(bad_gpus, strlen(bad_gpus), COHORT_FORMAT_YAML,
                                          "bad-gpus.yaml", &untouched),
              COHORT_ERR_PARSE);
    CHECK_MESSAGE_HAS("bad-gpus.yaml:3");
    CHECK_MESSAGE_HAS("nodes[0].gpus");
    CHECK(untouched == (cohort_topology*)&untouched);

    static const char typo[] = "nodes:\n  - id: a\n    rol: worker\n";
    CHECK_ERR(cohort_topology_load_string(typo, strlen(typo), COHORT_FORMAT_YAML, "typo.yaml",
                                          &untouched),
              COHORT_ERR_PARSE);
    CHECK_MESSAGE_HAS("typo.yaml:3");
    CHECK_MESSAGE_HAS("did you mean 'role'");

    static const char duplicate[] = "nodes:\n  - id: a\n  - id: b\n  - id: a\n";
    CHECK_ERR(cohort_topology_load_string(duplicate, strlen(duplicate), COHORT_FORMAT_AUTO,
                                          "dup.yaml", &untouched),
              COHORT_ERR_PARSE);
    CHECK_MESSAGE_HAS("duplicate node id 'a'");

    static const char bad_role[] = "{\"nodes\": [{\"id\": \"a\", \"role\": \"boss\"}]}";
    CHECK_ERR(cohort_topology_load_string(bad_role, strlen(bad_role), COHORT_FORMAT_JSON,
                                          "role.json", &untouched),
              COHORT_ERR_PARSE);
    CHECK_MESSAGE_HAS("boss");

    static const char broken_json[] = "{\"nodes\": [";
    CHECK_ERR(cohort_topology_load_string(broken_json, strlen(broken_json), COHORT_FORMAT_JSON,
                                          "broken.json", &untouched),
              COHORT_ERR_PARSE);
    CHECK_MESSAGE_HAS("broken.json");

    /* Only the first `length` bytes are read: cutting the text mid-node fails. */
    CHECK_ERR(cohort_topology_load_string(bad_gpus, 8, COHORT_FORMAT_YAML, "cut.yaml",
                                          &untouched),
              COHORT_ERR_PARSE);
    CHECK_ERR(cohort_topology_load_string(kClusterYaml, strlen(kClusterYaml),
                                          COHORT_FORMAT_LISTING, NULL, &untouched),
              COHORT_ERR_INVALID_ARGUMENT);
    CHECK_ERR(cohort_topology_load_string(kClusterYaml, strlen(kClusterYaml), 42, NULL,
                                          &untouched),
              COHORT_ERR_INVALID_ARGUMENT);
    CHECK(untouched == (cohort_topology*)&untouched);

    cohort_topology_destroy(built);
}

/* --------------------------------------------------------- rank order */

/* The group a topology node belongs to at `level`: its host, or the labels
 * from that level up (a label only means something inside its parent). */
static void group_key(const cohort_topology* t, uint32_t node, int32_t level, char* out,
                      size_t size) {
    const char* s = "";
    out[0] = '\0';
    if (level == COHORT_LEVEL_HOST) {
        cohort_topology_node_str(t, node, COHORT_FIELD_HOST, &s);
        if (s[0] == '\0') cohort_topology_node_str(t, node, COHORT_FIELD_ID, &s);
        snprintf(out, size, "host=%s", s);
        return;
    }
    for (int32_t l = COHORT_LEVEL_REGION; l >= level; --l) {
        size_t used = strlen(out);
        cohort_topology_node_str(t, node, COHORT_FIELD_SWITCH + l - 1, &s);
        snprintf(out + used, size - used, "/%s", s);
    }
}

/* Checks what a rank order promises for topology `t`. */
static void check_rank_order(const cohort_topology* t, const cohort_rank_order* order, int32_t world) {
    int32_t size = 0;
    uint32_t hosts = 0;
    CHECK_OK(cohort_rank_order_size(order, &size));
    CHECK(size == world);
    CHECK_OK(cohort_rank_order_host_count(order, &hosts));
    if (size != world || world > 64) return;

    cohort_rank_info info[64];
    for (int32_t r = 0; r < world; ++r) {
        memset(&info[r], 0xff, sizeof info[r]);
        CHECK_OK(cohort_rank_order_get(order, r, &info[r]));
        /* rank_of is the inverse of get. */
        const char* id = NULL;
        CHECK_OK(cohort_topology_node_str(t, info[r].node_index, COHORT_FIELD_ID, &id));
        int32_t back = -1;
        CHECK_OK(cohort_rank_order_rank_of(order, id != NULL ? id : "?", &back));
        CHECK(back == r);
    }
    /* Every level's groups are contiguous runs of ranks. */
    for (int32_t level = COHORT_LEVEL_HOST; level <= COHORT_LEVEL_REGION; ++level) {
        for (int32_t r = 1; r < world; ++r) {
            char here[256], before[256], earlier[256];
            group_key(t, info[r].node_index, level, here, sizeof here);
            group_key(t, info[r - 1].node_index, level, before, sizeof before);
            if (strcmp(here, before) == 0) continue;
            for (int32_t e = 0; e + 1 < r; ++e) {
                group_key(t, info[e].node_index, level, earlier, sizeof earlier);
                if (strcmp(here, earlier) == 0) {
                    report_failure(__FILE__, __LINE__, "rank groups are contiguous");
                    fprintf(stderr, "    level %d: group %s at ranks %u and %u, not %u\n",
                            (int)level, here, (unsigned)e, (unsigned)r, (unsigned)(r - 1));
                }
            }
        }
    }
    /* local_rank, local_world_size and node_rank describe the host runs. */
    int32_t run_start = 0, node_rank = 0;
    for (int32_t r = 0; r <= world; ++r) {
        char here[256] = "", first[256];
        if (r < world) group_key(t, info[r].node_index, COHORT_LEVEL_HOST, here, sizeof here);
        group_key(t, info[run_start].node_index, COHORT_LEVEL_HOST, first, sizeof first);
        if (r < world && strcmp(here, first) == 0) continue;
        for (int32_t k = run_start; k < r; ++k) {
            CHECK(info[k].local_rank == k - run_start);
            CHECK(info[k].local_world_size == r - run_start);
            CHECK(info[k].node_rank == node_rank);
        }
        ++node_rank;
        run_start = r;
    }
    CHECK(hosts == (uint32_t)node_rank);
}

static void test_rank_order(void) {
    cohort_topology* t = build_topology();
    cohort_rank_order* order = NULL;
    CHECK_OK(cohort_rank_order_create(t, COHORT_ROLES_TRAINING, &order));
    CHECK(order != NULL);
    if (order == NULL) {
        cohort_topology_destroy(t);
        return;
    }
    /* Training roles, READY only: c0 w1 | w2 w3 | w4 w5 (e0 evaluates, w6 is
     * down, solo is a joining parameter server). */
    check_rank_order(t, order, 6);
    uint32_t hosts = 0;
    int32_t rank = 99;
    CHECK_OK(cohort_rank_order_host_count(order, &hosts));
    CHECK(hosts == 3);
    CHECK_OK(cohort_rank_order_rank_of(order, "c0", &rank));
    CHECK(rank == 0); /* chief first */
    CHECK_OK(cohort_rank_order_rank_of(order, "w1", &rank));
    CHECK(rank == 1);
    /* The chief's rack r0 comes first, so h1 before h2. */
    CHECK_OK(cohort_rank_order_rank_of(order, "w2", &rank));
    CHECK(rank == 2 || rank == 3);
    CHECK_OK(cohort_rank_order_rank_of(order, "w5", &rank));
    CHECK(rank == 4 || rank == 5);
    rank = 99;
    CHECK_ERR(cohort_rank_order_rank_of(order, "e0", &rank), COHORT_ERR_NOT_FOUND);
    CHECK_MESSAGE_HAS("e0");
    CHECK_ERR(cohort_rank_order_rank_of(order, "w6", &rank), COHORT_ERR_NOT_FOUND);
    CHECK_ERR(cohort_rank_order_rank_of(order, "nobody", &rank), COHORT_ERR_NOT_FOUND);
    CHECK(rank == 99);

    /* The ring crosses each boundary once: the minimum. */
    uint32_t crossings = 99;
    CHECK_OK(cohort_rank_order_ring_crossings(order, COHORT_LEVEL_HOST, &crossings));
    CHECK(crossings == 3);
    CHECK_OK(cohort_rank_order_ring_crossings(order, COHORT_LEVEL_SWITCH, &crossings));
    CHECK(crossings == 3);
    CHECK_OK(cohort_rank_order_ring_crossings(order, COHORT_LEVEL_RACK, &crossings));
    CHECK(crossings == 2);
    CHECK_OK(cohort_rank_order_ring_crossings(order, COHORT_LEVEL_ZONE, &crossings));
    CHECK(crossings == 0);
    CHECK_OK(cohort_rank_order_ring_crossings(order, COHORT_LEVEL_REGION, &crossings));
    CHECK(crossings == 0);
    crossings = 99;
    CHECK_ERR(cohort_rank_order_ring_crossings(order, 5, &crossings), COHORT_ERR_INVALID_ARGUMENT);
    CHECK_ERR(cohort_rank_order_ring_crossings(order, -1, &crossings), COHORT_ERR_INVALID_ARGUMENT);
    CHECK(crossings == 99);

    cohort_rank_info info;
    memset(&info, 0x5a, sizeof info);
    CHECK_ERR(cohort_rank_order_get(order, 6, &info), COHORT_ERR_OUT_OF_RANGE);
    CHECK(info.node_index == 0x5a5a5a5au);

    /* The same nodes in another order get the same ranks. */
    cohort_topology* loaded = NULL;
    CHECK_OK(cohort_topology_load_string(kClusterYaml, strlen(kClusterYaml), COHORT_FORMAT_YAML,
                                         "cluster.yaml", &loaded));
    cohort_rank_order* other = NULL;
    if (loaded != NULL) CHECK_OK(cohort_rank_order_create(loaded, 0, &other));
    if (other != NULL) {
        check_rank_order(loaded, other, 6);
        for (int32_t r = 0; r < 6; ++r) {
            cohort_rank_info a, b;
            const char* id_a = NULL;
            const char* id_b = NULL;
            CHECK_OK(cohort_rank_order_get(order, r, &a));
            CHECK_OK(cohort_rank_order_get(other, r, &b));
            CHECK_OK(cohort_topology_node_str(t, a.node_index, COHORT_FIELD_ID, &id_a));
            CHECK_OK(cohort_topology_node_str(loaded, b.node_index, COHORT_FIELD_ID, &id_b));
            CHECK(id_a != NULL && id_b != NULL && strcmp(id_a, id_b) == 0);
        }
    }
    cohort_rank_order_destroy(other);
    cohort_topology_destroy(loaded);

    /* The order keeps its own copy: the topology can go first. */
    cohort_rank_order* all = NULL;
    CHECK_OK(cohort_rank_order_create(t, COHORT_ROLES_ALL, &all));
    if (all != NULL) check_rank_order(t, all, 7);
    CHECK_OK(cohort_rank_order_host_count(all, &hosts));
    CHECK(hosts == 4);
    cohort_topology_destroy(t);
    int32_t size = 0;
    CHECK_OK(cohort_rank_order_size(all, &size));
    CHECK(size == 7);
    CHECK_OK(cohort_rank_order_rank_of(all, "e0", &rank));
    CHECK(rank < 7);
    cohort_rank_order_destroy(all);

    /* Nothing to rank. */
    t = build_topology();
    cohort_rank_order* none = (cohort_rank_order*)&none;
    CHECK_ERR(cohort_rank_order_create(t, 1u << COHORT_ROLE_COORDINATOR, &none),
              COHORT_ERR_UNSATISFIABLE);
    CHECK(none == (cohort_rank_order*)&none);
    cohort_topology* empty = NULL;
    CHECK_OK(cohort_topology_create(&empty));
    CHECK_ERR(cohort_rank_order_create(empty, 0, &none), COHORT_ERR_UNSATISFIABLE);
    cohort_topology_destroy(empty);
    cohort_topology_destroy(t);
    cohort_rank_order_destroy(order);
}

/* ------------------------------------------------------------ dataset */

static void test_dataset(void) {
    cohort_dataset* d = NULL;
    CHECK_OK(cohort_dataset_create(&d));
    if (d == NULL) return;
    uint32_t count = 99;
    uint64_t total = 99;
    CHECK_OK(cohort_dataset_file_count(d, &count));
    CHECK(count == 0);
    CHECK_OK(cohort_dataset_total_bytes(d, &total));
    CHECK(total == 0);

    CHECK_OK(cohort_dataset_add_file(d, "data/a.bin", 1000, 10));
    CHECK_OK(cohort_dataset_add_file(d, "data/b.bin", 2500, COHORT_RECORDS_UNKNOWN));
    CHECK_OK(cohort_dataset_add_file(d, "data/c.bin", 7, 1));
    CHECK_ERR(cohort_dataset_add_file(d, "data/b.bin", 1, 1), COHORT_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("data/b.bin");
    CHECK_ERR(cohort_dataset_add_file(d, "", 1, 1), COHORT_ERR_INVALID_ARGUMENT);
    CHECK_OK(cohort_dataset_file_count(d, &count));
    CHECK(count == 3);
    CHECK_OK(cohort_dataset_total_bytes(d, &total));
    CHECK(total == 3507);

    const char* path = NULL;
    uint64_t bytes = 0, records = 0;
    CHECK_OK(cohort_dataset_file(d, 1, &path, &bytes, &records));
    CHECK_STR(path, "data/b.bin");
    CHECK(bytes == 2500);
    CHECK(records == COHORT_RECORDS_UNKNOWN);
    CHECK_OK(cohort_dataset_file(d, 2, &path, &bytes, &records));
    CHECK_STR(path, "data/c.bin");
    CHECK(bytes == 7 && records == 1);
    path = "untouched";
    CHECK_ERR(cohort_dataset_file(d, 3, &path, &bytes, &records), COHORT_ERR_OUT_OF_RANGE);
    CHECK_STR(path, "untouched");
    cohort_dataset_destroy(d);

    /* A text listing: "PATH BYTES [RECORDS]" per line. */
    static const char listing[] = "data/a.bin 1000 10\ndata/b.bin 2500\ndata/c.bin 7 1\n";
    d = NULL;
    CHECK_OK(cohort_dataset_load_string(listing, strlen(listing), COHORT_FORMAT_LISTING,
                                        "listing.txt", &d));
    if (d != NULL) {
        CHECK_OK(cohort_dataset_file_count(d, &count));
        CHECK(count == 3);
        CHECK_OK(cohort_dataset_total_bytes(d, &total));
        CHECK(total == 3507);
        CHECK_OK(cohort_dataset_file(d, 0, &path, &bytes, &records));
        CHECK_STR(path, "data/a.bin");
        CHECK(bytes == 1000 && records == 10);
        CHECK_OK(cohort_dataset_file(d, 1, &path, &bytes, &records));
        CHECK_STR(path, "data/b.bin");
        CHECK(bytes == 2500 && records == COHORT_RECORDS_UNKNOWN);
    }
    cohort_dataset_destroy(d);

    /* AUTO recognises a listing too. */
    d = NULL;
    CHECK_OK(cohort_dataset_load_string(listing, strlen(listing), COHORT_FORMAT_AUTO, NULL, &d));
    count = 0;
    if (d != NULL) CHECK_OK(cohort_dataset_file_count(d, &count));
    CHECK(count == 3);
    cohort_dataset_destroy(d);

    /* From a file: not .yaml/.yml/.json, so a listing. */
    char file[1024];
    scratch_path(file, sizeof file, "dataset.txt");
    CHECK(write_file(file, listing));
    d = NULL;
    CHECK_OK(cohort_dataset_load_file(file, &d));
    count = 0;
    if (d != NULL) CHECK_OK(cohort_dataset_file_count(d, &count));
    CHECK(count == 3);
    total = 0;
    if (d != NULL) CHECK_OK(cohort_dataset_total_bytes(d, &total));
    CHECK(total == 3507);
    cohort_dataset_destroy(d);

    /* Errors name the source and the line. */
    cohort_dataset* untouched = (cohort_dataset*)&untouched;
    static const char bad[] = "data/a.bin 1000\ndata/b.bin many\n";
    CHECK_ERR(cohort_dataset_load_string(bad, strlen(bad), COHORT_FORMAT_LISTING, "bad-list.txt",
                                         &untouched),
              COHORT_ERR_PARSE);
    CHECK_MESSAGE_HAS("bad-list.txt:2");
    CHECK_MESSAGE_HAS("many");
    static const char dup[] = "x.bin 10\ny.bin 20\nx.bin 30\n";
    CHECK_FAILS(cohort_dataset_load_string(dup, strlen(dup), COHORT_FORMAT_LISTING, "dup.txt",
                                           &untouched));
    CHECK_MESSAGE_HAS("x.bin");
    scratch_path(file, sizeof file, "no-such-dataset.txt");
    CHECK_ERR(cohort_dataset_load_file(file, &untouched), COHORT_ERR_IO);
    CHECK_MESSAGE_HAS("no-such-dataset.txt");
    CHECK_ERR(cohort_dataset_load_string(listing, strlen(listing), 42, NULL, &untouched),
              COHORT_ERR_INVALID_ARGUMENT);
    CHECK(untouched == (cohort_dataset*)&untouched);
}

/* ------------------------------------------------------------- shards */

/* Shards of `d` cover every byte of every file exactly once, in order,
 * segment by segment; returns the number of shards (0 on failure). */
static uint64_t check_coverage(const cohort_dataset* d, const cohort_shards* s,
                               uint64_t max_shard_bytes) {
    uint32_t files = 0;
    uint64_t shards = 0;
    CHECK_OK(cohort_dataset_file_count(d, &files));
    CHECK_OK(cohort_shards_count(s, &shards));
    uint32_t file = 0;
    uint64_t offset = 0, smallest = UINT64_MAX, largest = 0;
    int tiled = 1, sums = 1, capped = 1;
    for (uint64_t shard = 0; shard < shards && tiled; ++shard) {
        uint64_t bytes = 0, records = 0, sum = 0;
        uint32_t segments = 0;
        if (cohort_shards_info(s, shard, &bytes, &records, &segments) != COHORT_OK ||
            bytes == 0 || segments == 0) {
            report_failure(__FILE__, __LINE__, "every shard has bytes and segments");
            fprintf(stderr, "    shard %" PRIu64 ": %" PRIu64 " bytes, %u segments: %s\n", shard,
                    bytes, (unsigned)segments, cohort_last_error());
            tiled = 0;
            break;
        }
        for (uint32_t g = 0; g < segments; ++g) {
            uint32_t seg_file = 0;
            uint64_t begin = 0, end = 0;
            const char* path = NULL;
            uint64_t file_bytes = 0, file_records = 0;
            if (cohort_shards_segment(s, shard, g, &seg_file, &begin, &end) != COHORT_OK ||
                file >= files ||
                cohort_dataset_file(d, file, &path, &file_bytes, &file_records) != COHORT_OK ||
                seg_file != file || begin != offset || end <= begin || end > file_bytes) {
                report_failure(__FILE__, __LINE__, "segments tile the files in order");
                fprintf(stderr,
                        "    shard %" PRIu64 " segment %u: file %u [%" PRIu64 ", %" PRIu64
                        "), expected file %u from %" PRIu64 "\n",
                        shard, (unsigned)g, (unsigned)seg_file, begin, end, (unsigned)file,
                        offset);
                tiled = 0;
                break;
            }
            sum += end - begin;
            offset = end;
            if (offset == file_bytes) {
                ++file;
                offset = 0;
            }
        }
        if (sum != bytes) sums = 0;
        if (max_shard_bytes != 0 && bytes > max_shard_bytes) capped = 0;
        if (bytes < smallest) smallest = bytes;
        if (bytes > largest) largest = bytes;
    }
    CHECK(tiled);
    if (!tiled) return 0;
    CHECK(sums);                         /* a shard's bytes are its segments' */
    CHECK(capped);                       /* none larger than the target */
    CHECK(file == files && offset == 0); /* every byte covered */
    CHECK(largest - smallest <= 1);      /* as even as possible */
    return shards;
}

static void test_shards(void) {
    cohort_dataset* d = NULL;
    CHECK_OK(cohort_dataset_create(&d));
    if (d == NULL) return;
    CHECK_OK(cohort_dataset_add_file(d, "a", 1000, 10));
    CHECK_OK(cohort_dataset_add_file(d, "b", 2500, 25));
    CHECK_OK(cohort_dataset_add_file(d, "c", 7, 7));
    CHECK_OK(cohort_dataset_add_file(d, "d", 4096, 4));

    /* By bytes: 7603 bytes in shards of at most 1000 -> 8 shards. */
    cohort_shards* s = NULL;
    CHECK_OK(cohort_shards_split(d, 1000, 0, &s));
    if (s != NULL) {
        uint64_t n = check_coverage(d, s, 1000);
        CHECK(n == 8);
        /* Record estimates add up exactly when every count is known. */
        uint64_t records = 0;
        for (uint64_t i = 0; i < n; ++i) {
            uint64_t b = 0, r = 0;
            uint32_t g = 0;
            CHECK_OK(cohort_shards_info(s, i, &b, &r, &g));
            CHECK(r != COHORT_RECORDS_UNKNOWN);
            records += r;
        }
        CHECK(records == 46);
        /* Shard 0 is the first 951 or 950 bytes of "a". */
        uint32_t file = 99;
        uint64_t begin = 99, end = 99;
        CHECK_OK(cohort_shards_segment(s, 0, 0, &file, &begin, &end));
        CHECK(file == 0 && begin == 0 && (end == 950 || end == 951));
        /* Out of range, out-parameters untouched. */
        uint64_t bytes = 5;
        uint32_t segments = 5;
        uint64_t recs = 5;
        CHECK_ERR(cohort_shards_info(s, n, &bytes, &recs, &segments), COHORT_ERR_OUT_OF_RANGE);
        CHECK(bytes == 5 && recs == 5 && segments == 5);
        file = 5;
        CHECK_ERR(cohort_shards_segment(s, n, 0, &file, &begin, &end), COHORT_ERR_OUT_OF_RANGE);
        CHECK_ERR(cohort_shards_segment(s, 0, 1000, &file, &begin, &end), COHORT_ERR_OUT_OF_RANGE);
        CHECK(file == 5);
    }
    cohort_shards_destroy(s);

    /* By count. */
    s = NULL;
    CHECK_OK(cohort_shards_split(d, 0, 7, &s));
    if (s != NULL) CHECK(check_coverage(d, s, 0) == 7);
    cohort_shards_destroy(s);
    /* One byte per shard is the finest split. */
    s = NULL;
    CHECK_OK(cohort_shards_split(d, 0, 7603, &s));
    if (s != NULL) CHECK(check_coverage(d, s, 1) == 7603);
    cohort_shards_destroy(s);
    s = NULL;
    CHECK_OK(cohort_shards_split(d, 1, 0, &s));
    if (s != NULL) CHECK(check_coverage(d, s, 1) == 7603);
    cohort_shards_destroy(s);
    /* One shard holding everything, across all four files. */
    s = NULL;
    CHECK_OK(cohort_shards_split(d, 1u << 20, 0, &s));
    if (s != NULL) {
        CHECK(check_coverage(d, s, 0) == 1);
        uint64_t bytes = 0, records = 0;
        uint32_t segments = 0;
        CHECK_OK(cohort_shards_info(s, 0, &bytes, &records, &segments));
        CHECK(bytes == 7603 && records == 46 && segments == 4);
    }
    cohort_shards_destroy(s);

    /* Bad specs. */
    cohort_shards* untouched = (cohort_shards*)&untouched;
    CHECK_ERR(cohort_shards_split(d, 0, 0, &untouched), COHORT_ERR_INVALID_ARGUMENT);
    CHECK_ERR(cohort_shards_split(d, 100, 10, &untouched), COHORT_ERR_INVALID_ARGUMENT);
    CHECK_ERR(cohort_shards_split(d, 0, 7604, &untouched), COHORT_ERR_UNSATISFIABLE);
    CHECK(untouched == (cohort_shards*)&untouched);
    cohort_dataset* empty = NULL;
    CHECK_OK(cohort_dataset_create(&empty));
    CHECK_FAILS(cohort_shards_split(empty, 1000, 0, &untouched));
    CHECK(untouched == (cohort_shards*)&untouched);
    cohort_dataset_destroy(empty);

    /* Unknown record counts; and the shards outlive their dataset. */
    CHECK_OK(cohort_dataset_add_file(d, "e", 93, COHORT_RECORDS_UNKNOWN));
    s = NULL;
    CHECK_OK(cohort_shards_split(d, 0, 4, &s));
    cohort_dataset_destroy(d);
    if (s != NULL) {
        uint64_t n = 0, covered = 0;
        int unknown = 0;
        CHECK_OK(cohort_shards_count(s, &n));
        CHECK(n == 4);
        for (uint64_t i = 0; i < n; ++i) {
            uint64_t bytes = 0, records = 0;
            uint32_t segments = 0;
            CHECK_OK(cohort_shards_info(s, i, &bytes, &records, &segments));
            covered += bytes;
            for (uint32_t g = 0; g < segments; ++g) {
                uint32_t file = 0;
                uint64_t begin = 0, end = 0;
                CHECK_OK(cohort_shards_segment(s, i, g, &file, &begin, &end));
                if (file == 4) unknown = records == COHORT_RECORDS_UNKNOWN;
            }
        }
        CHECK(covered == 7696);
        CHECK(unknown); /* the shard holding "e" cannot estimate its records */
    }
    cohort_shards_destroy(s);
}

/* --------------------------------------------------------- shard plan */

/* m0 m1 on host hA, m2 m3 on hB, m4 down, e9 an evaluator: with the default
 * (training) roles the plan members are m0..m3. */
static cohort_topology* plan_members(int with_m3, int with_newcomer) {
    cohort_topology* t = NULL;
    CHECK_OK(cohort_topology_create(&t));
    if (t == NULL) return NULL;
    CHECK_OK(cohort_topology_add_node(t, "m0", "hA", NULL, COHORT_ROLE_WORKER));
    CHECK_OK(cohort_topology_add_node(t, "m1", "hA", NULL, COHORT_ROLE_WORKER));
    CHECK_OK(cohort_topology_add_node(t, "e9", "hE", NULL, COHORT_ROLE_EVALUATOR));
    CHECK_OK(cohort_topology_add_node(t, "m2", "hB", NULL, COHORT_ROLE_CHIEF));
    CHECK_OK(cohort_topology_add_node(t, "m3", "hB", NULL, COHORT_ROLE_WORKER));
    CHECK_OK(cohort_topology_add_node(t, "m4", "hC", NULL, COHORT_ROLE_WORKER));
    CHECK_OK(cohort_topology_set_status(t, "m4", COHORT_STATUS_DOWN));
    if (!with_m3) CHECK_OK(cohort_topology_set_status(t, "m3", COHORT_STATUS_DOWN));
    if (with_newcomer) CHECK_OK(cohort_topology_add_node(t, "m5", "hD", NULL, COHORT_ROLE_WORKER));
    for (int i = 0; i < 6; ++i) {
        char id[8];
        snprintf(id, sizeof id, "m%d", i);
        uint32_t index = 0;
        if (cohort_topology_find(t, id, &index) == COHORT_OK)
            CHECK_OK(cohort_topology_set_gpus(t, id, 8, GIB80));
    }
    return t;
}

/* `files` files of 4096 bytes, cut into `shards` shards. */
static cohort_shards* plan_shards(uint32_t files, uint64_t shards) {
    cohort_dataset* d = NULL;
    CHECK_OK(cohort_dataset_create(&d));
    if (d == NULL) return NULL;
    for (uint32_t i = 0; i < files; ++i) {
        char path[32];
        snprintf(path, sizeof path, "data/f%u.bin", (unsigned)i);
        CHECK_OK(cohort_dataset_add_file(d, path, 4096, 16));
    }
    cohort_shards* s = NULL;
    CHECK_OK(cohort_shards_split(d, 0, shards, &s));
    cohort_dataset_destroy(d);
    return s;
}

static uint32_t member_index(const cohort_shard_plan* plan, const char* id) {
    uint32_t members = 0;
    cohort_shard_plan_member_count(plan, &members);
    for (uint32_t m = 0; m < members; ++m) {
        const char* name = NULL;
        if (cohort_shard_plan_member_id(plan, m, &name) == COHORT_OK && name != NULL &&
            strcmp(name, id) == 0)
            return m;
    }
    return UINT32_MAX;
}

static const char* owner_id(const cohort_shard_plan* plan, uint64_t shard, uint32_t replica) {
    uint32_t member = UINT32_MAX;
    const char* id = NULL;
    if (cohort_shard_plan_owner(plan, shard, replica, &member) != COHORT_OK) return "?";
    if (cohort_shard_plan_member_id(plan, member, &id) != COHORT_OK || id == NULL) return "?";
    return id;
}

/* What every plan promises: shard count, distinct owners per shard, loads
 * that match the owners, member_shards that match both. */
static void check_plan(const cohort_shard_plan* plan, uint64_t shards, uint32_t replication,
                       uint32_t members) {
    uint64_t n = 0;
    uint32_t r = 0, m = 0;
    CHECK_OK(cohort_shard_plan_shard_count(plan, &n));
    CHECK(n == shards);
    CHECK_OK(cohort_shard_plan_replication(plan, &r));
    CHECK(r == replication);
    CHECK_OK(cohort_shard_plan_member_count(plan, &m));
    CHECK(m == members);
    if (n != shards || r != replication || m != members || members > 16) return;

    uint64_t counted[16] = {0};
    int distinct = 1, in_range = 1;
    for (uint64_t s = 0; s < shards; ++s) {
        uint32_t owners[8];
        for (uint32_t k = 0; k < replication && k < 8; ++k) {
            owners[k] = UINT32_MAX;
            CHECK_OK(cohort_shard_plan_owner(plan, s, k, &owners[k]));
            if (owners[k] >= members) {
                in_range = 0;
                continue;
            }
            ++counted[owners[k]];
            for (uint32_t j = 0; j < k; ++j)
                if (owners[j] == owners[k]) distinct = 0;
        }
    }
    CHECK(in_range);
    CHECK(distinct);
    uint64_t total = 0;
    for (uint32_t k = 0; k < members; ++k) {
        uint64_t load = UINT64_MAX;
        CHECK_OK(cohort_shard_plan_member_load(plan, k, &load));
        CHECK(load == counted[k]);
        total += load;

        /* member_shards lists exactly the shards it owns, ascending. */
        size_t count = 0;
        uint64_t* list = malloc((shards + 1) * sizeof *list);
        CHECK(list != NULL);
        if (list == NULL) continue;
        CHECK_OK(cohort_shard_plan_member_shards(plan, k, list, shards + 1, &count));
        CHECK(count == load);
        for (size_t i = 0; i < count && i <= shards; ++i) {
            if (i > 0) CHECK(list[i] > list[i - 1]);
            int owns = 0;
            for (uint32_t j = 0; j < replication; ++j) {
                uint32_t owner = UINT32_MAX;
                if (cohort_shard_plan_owner(plan, list[i], j, &owner) == COHORT_OK &&
                    owner == k)
                    owns = 1;
            }
            CHECK(owns);
        }
        free(list);
    }
    CHECK(total == shards * replication);
}

static void test_plan_options(void) {
    cohort_plan_options* o = NULL;
    CHECK_OK(cohort_plan_options_create(&o));
    if (o == NULL) return;
    CHECK_ERR(cohort_plan_options_set_strategy(o, 5), COHORT_ERR_INVALID_ARGUMENT);
    CHECK_ERR(cohort_plan_options_set_strategy(o, -1), COHORT_ERR_INVALID_ARGUMENT);
    CHECK_ERR(cohort_plan_options_set_replication(o, 0), COHORT_ERR_INVALID_ARGUMENT);
    CHECK_ERR(cohort_plan_options_set_load_slack(o, -0.5), COHORT_ERR_INVALID_ARGUMENT);
    CHECK_ERR(cohort_plan_options_add_locality(o, "m0", "data/f0.bin", 1.5),
              COHORT_ERR_INVALID_ARGUMENT);
    CHECK_ERR(cohort_plan_options_add_locality(o, "m0", "data/f0.bin", -0.1),
              COHORT_ERR_INVALID_ARGUMENT);
    CHECK_ERR(cohort_plan_options_set_roles(o, 1u << 5), COHORT_ERR_INVALID_ARGUMENT);
    CHECK_OK(cohort_plan_options_set_seed(o, UINT64_MAX));
    CHECK_OK(cohort_plan_options_set_load_slack(o, 0.0));
    CHECK_OK(cohort_plan_options_set_weights(o, 1.0, 0.5, 0.1));

    cohort_topology* t = plan_members(1, 0);
    cohort_shards* s = plan_shards(4, 16);
    cohort_shard_plan* untouched = (cohort_shard_plan*)&untouched;

    /* Roles: training nodes by default, the evaluator only when asked. */
    cohort_shard_plan* plan = NULL;
    uint32_t members = 0;
    CHECK_OK(cohort_shard_plan_create(s, t, o, &plan));
    if (plan != NULL) {
        CHECK_OK(cohort_shard_plan_member_count(plan, &members));
        CHECK(members == 4);
        CHECK(member_index(plan, "e9") == UINT32_MAX);
    }
    cohort_shard_plan_destroy(plan);
    plan = NULL;
    CHECK_OK(cohort_plan_options_set_roles(o, COHORT_ROLES_ALL));
    CHECK_OK(cohort_shard_plan_create(s, t, o, &plan));
    if (plan != NULL) {
        CHECK_OK(cohort_shard_plan_member_count(plan, &members));
        CHECK(members == 5);
        CHECK(member_index(plan, "e9") != UINT32_MAX);
        CHECK(member_index(plan, "m4") == UINT32_MAX); /* still only READY nodes */
    }
    cohort_shard_plan_destroy(plan);
    plan = NULL;
    CHECK_OK(cohort_plan_options_set_roles(o, 1u << COHORT_ROLE_EVALUATOR));
    CHECK_OK(cohort_shard_plan_create(s, t, o, &plan));
    if (plan != NULL) {
        CHECK_OK(cohort_shard_plan_member_count(plan, &members));
        CHECK(members == 1);
        check_plan(plan, 16, 1, 1);
    }
    cohort_shard_plan_destroy(plan);
    CHECK_OK(cohort_plan_options_set_roles(o, 1u << COHORT_ROLE_COORDINATOR));
    CHECK_FAILS(cohort_shard_plan_create(s, t, o, &untouched)); /* nobody to hold shards */
    CHECK(untouched == (cohort_shard_plan*)&untouched);
    CHECK_OK(cohort_plan_options_set_roles(o, 0)); /* back to training roles */

    /* Too much replication for four members. */
    CHECK_OK(cohort_plan_options_set_replication(o, 5));
    CHECK_ERR(cohort_shard_plan_create(s, t, o, &untouched), COHORT_ERR_UNSATISFIABLE);
    /* CUSTOM needs a callback. */
    CHECK_OK(cohort_plan_options_set_replication(o, 1));
    CHECK_OK(cohort_plan_options_set_strategy(o, COHORT_STRATEGY_CUSTOM));
    CHECK_ERR(cohort_shard_plan_create(s, t, o, &untouched), COHORT_ERR_INVALID_ARGUMENT);
    CHECK(untouched == (cohort_shard_plan*)&untouched);
    /* No READY member. */
    cohort_topology* down = NULL;
    CHECK_OK(cohort_topology_create(&down));
    CHECK_OK(cohort_topology_add_node(down, "x", NULL, NULL, COHORT_ROLE_WORKER));
    CHECK_OK(cohort_topology_set_status(down, "x", COHORT_STATUS_DOWN));
    CHECK_OK(cohort_plan_options_set_strategy(o, COHORT_STRATEGY_HASH));
    CHECK_FAILS(cohort_shard_plan_create(s, down, o, &untouched));
    CHECK(untouched == (cohort_shard_plan*)&untouched);
    cohort_topology_destroy(down);
    cohort_shards_destroy(s);
    cohort_topology_destroy(t);
    cohort_plan_options_destroy(o);
}

static void test_plan_round_robin(void) {
    cohort_topology* t = plan_members(1, 0);
    cohort_shards* s = plan_shards(16, 64);
    cohort_plan_options* o = NULL;
    CHECK_OK(cohort_plan_options_create(&o));
    CHECK_OK(cohort_plan_options_set_strategy(o, COHORT_STRATEGY_ROUND_ROBIN));
    cohort_shard_plan* plan = NULL;
    CHECK_OK(cohort_shard_plan_create(s, t, o, &plan));
    /* The plan keeps what it needs. */
    cohort_shards_destroy(s);
    cohort_topology_destroy(t);
    cohort_plan_options_destroy(o);
    if (plan == NULL) return;

    check_plan(plan, 64, 1, 4);
    for (uint32_t m = 0; m < 4; ++m) {
        uint64_t load = 0;
        CHECK_OK(cohort_shard_plan_member_load(plan, m, &load));
        CHECK(load == 16);
    }
    /* Each window of four consecutive shards uses every member once. */
    for (uint64_t shard = 0; shard + 4 < 64; ++shard) {
        uint32_t a = 0, b = 1;
        CHECK_OK(cohort_shard_plan_owner(plan, shard, 0, &a));
        CHECK_OK(cohort_shard_plan_owner(plan, shard + 4, 0, &b));
        CHECK(a == b);
    }
    /* Member ids are the READY nodes only. */
    const char* id = NULL;
    for (uint32_t m = 0; m < 4; ++m) {
        CHECK_OK(cohort_shard_plan_member_id(plan, m, &id));
        CHECK(id != NULL && id[0] == 'm' && id[1] >= '0' && id[1] <= '3' && id[2] == '\0');
    }
    CHECK(member_index(plan, "m4") == UINT32_MAX);
    uint64_t moved = 99;
    CHECK_OK(cohort_shard_plan_moved(plan, &moved));
    CHECK(moved == 0);

    /* member_shards with a short buffer reports the count it needs. */
    uint64_t one[1] = {12345};
    size_t count = 0;
    CHECK_ERR(cohort_shard_plan_member_shards(plan, 0, one, 1, &count),
              COHORT_ERR_BUFFER_TOO_SMALL);
    CHECK(count == 16);
    CHECK(one[0] == 12345); /* filled only when it all fits */
    count = 0;
    /* Capacity 0 (and no buffer) sizes the buffer. */
    CHECK_ERR(cohort_shard_plan_member_shards(plan, 0, NULL, 0, &count),
              COHORT_ERR_BUFFER_TOO_SMALL);
    CHECK(count == 16);
    uint64_t exact[16];
    count = 0;
    CHECK_OK(cohort_shard_plan_member_shards(plan, 0, exact, 16, &count));
    CHECK(count == 16);
    CHECK_ERR(cohort_shard_plan_member_shards(plan, 4, exact, 16, &count),
              COHORT_ERR_OUT_OF_RANGE);

    /* Out of range, out-parameters untouched. */
    uint32_t member = 77;
    CHECK_ERR(cohort_shard_plan_owner(plan, 64, 0, &member), COHORT_ERR_OUT_OF_RANGE);
    CHECK_ERR(cohort_shard_plan_owner(plan, 0, 1, &member), COHORT_ERR_OUT_OF_RANGE);
    CHECK(member == 77);
    id = "untouched";
    CHECK_ERR(cohort_shard_plan_member_id(plan, 4, &id), COHORT_ERR_OUT_OF_RANGE);
    CHECK_STR(id, "untouched");
    uint64_t load = 77;
    CHECK_ERR(cohort_shard_plan_member_load(plan, 4, &load), COHORT_ERR_OUT_OF_RANGE);
    CHECK(load == 77);

    /* JSON, freed with cohort_free. */
    char* json = NULL;
    size_t length = 0;
    CHECK_OK(cohort_shard_plan_to_json(plan, &json, &length));
    CHECK(json != NULL && length == strlen(json));
    CHECK(json != NULL && json[0] == '{' && json[length - 1] == '}');
    CHECK(contains(json, "round_robin"));
    CHECK(contains(json, "\"m0\"") && contains(json, "\"m3\""));
    CHECK(!contains(json, "\"m4\""));
    CHECK(contains(json, "data/f15.bin"));
    cohort_free(json);

    cohort_shard_plan_destroy(plan);
}

static void test_plan_hash(void) {
    cohort_topology* t = plan_members(1, 0);
    cohort_shards* s = plan_shards(16, 64);
    cohort_plan_options* o = NULL;
    CHECK_OK(cohort_plan_options_create(&o)); /* HASH is the default */
    CHECK_OK(cohort_plan_options_set_replication(o, 2));
    CHECK_OK(cohort_plan_options_set_seed(o, 7));
    CHECK_OK(cohort_plan_options_set_load_slack(o, 0.03));
    cohort_shard_plan* a = NULL;
    cohort_shard_plan* b = NULL;
    CHECK_OK(cohort_shard_plan_create(s, t, o, &a));
    CHECK_OK(cohort_shard_plan_create(s, t, o, &b));
    if (a != NULL && b != NULL) {
        check_plan(a, 64, 2, 4);
        int same = 1, spread = 1;
        for (uint64_t shard = 0; shard < 64; ++shard) {
            for (uint32_t k = 0; k < 2; ++k) {
                uint32_t x = 0, y = 1;
                CHECK_OK(cohort_shard_plan_owner(a, shard, k, &x));
                CHECK_OK(cohort_shard_plan_owner(b, shard, k, &y));
                if (x != y) same = 0;
            }
            /* Two replicas on two hosts: m0,m1 on hA, m2,m3 on hB. */
            const char* first = owner_id(a, shard, 0);
            const char* second = owner_id(a, shard, 1);
            int host_first = first[1] == '0' || first[1] == '1';
            int host_second = second[1] == '0' || second[1] == '1';
            if (host_first == host_second) spread = 0;
        }
        CHECK(same); /* deterministic */
        CHECK(spread);
        /* Cap: ceil(128 / 4 * 1.03) = 33. */
        for (uint32_t m = 0; m < 4; ++m) {
            uint64_t load = 0;
            CHECK_OK(cohort_shard_plan_member_load(a, m, &load));
            CHECK(load <= 33);
        }
        char* json = NULL;
        size_t length = 0;
        CHECK_OK(cohort_shard_plan_to_json(a, &json, &length));
        CHECK(contains(json, "hash"));
        cohort_free(json);
    }
    cohort_shard_plan_destroy(b);
    cohort_shard_plan_destroy(a);
    cohort_plan_options_destroy(o);
    cohort_shards_destroy(s);
    cohort_topology_destroy(t);
}

/* Shard s (= file s) is on m(s % 4)'s disk, and less so on its neighbour's. */
static void check_locality_plan(const cohort_shards* s, const cohort_topology* t,
                                const cohort_plan_options* o, const char* what) {
    cohort_shard_plan* plan = NULL;
    CHECK_OK(cohort_shard_plan_create(s, t, o, &plan));
    if (plan == NULL) return;
    check_plan(plan, 8, 1, 4);
    for (uint64_t shard = 0; shard < 8; ++shard) {
        char expected[8];
        snprintf(expected, sizeof expected, "m%u", (unsigned)(shard % 4));
        const char* owner = owner_id(plan, shard, 0);
        if (strcmp(owner, expected) == 0) {
            ++g_passed;
        } else {
            report_failure(__FILE__, __LINE__, "locality puts each shard on its data");
            fprintf(stderr, "    %s: shard %" PRIu64 " on %s, expected %s\n", what, shard, owner,
                    expected);
        }
    }
    char* json = NULL;
    size_t length = 0;
    CHECK_OK(cohort_shard_plan_to_json(plan, &json, &length));
    CHECK(contains(json, "locality"));
    cohort_free(json);
    cohort_shard_plan_destroy(plan);
}

static void test_plan_locality(void) {
    cohort_topology* t = plan_members(1, 0);
    cohort_shards* s = plan_shards(8, 8); /* one file per shard */
    for (uint64_t shard = 0; s != NULL && shard < 8; ++shard) {
        uint32_t file = 99, segments = 0;
        uint64_t begin = 0, end = 0;
        CHECK_OK(cohort_shards_info(s, shard, NULL, NULL, &segments));
        CHECK_OK(cohort_shards_segment(s, shard, 0, &file, &begin, &end));
        CHECK(segments == 1 && file == shard && begin == 0 && end == 4096);
    }

    /* Entries one by one... */
    cohort_plan_options* o = NULL;
    CHECK_OK(cohort_plan_options_create(&o));
    CHECK_OK(cohort_plan_options_set_strategy(o, COHORT_STRATEGY_LOCALITY));
    CHECK_OK(cohort_plan_options_set_weights(o, 1.0, 0.5, 0.1));
    for (unsigned i = 0; i < 8; ++i) {
        char node[8], next[8], path[32];
        snprintf(node, sizeof node, "m%u", i % 4);
        snprintf(next, sizeof next, "m%u", (i + 1) % 4);
        snprintf(path, sizeof path, "data/f%u.bin", i);
        CHECK_OK(cohort_plan_options_add_locality(o, node, path, 1.0));
        CHECK_OK(cohort_plan_options_add_locality(o, next, path, 0.25));
    }
    check_locality_plan(s, t, o, "add_locality");
    cohort_plan_options_destroy(o);

    /* ... or from a file {NODE_ID: {FILE_PATH: SCORE}}. */
    char text[1024] = "", file[1024];
    for (unsigned m = 0; m < 4; ++m) {
        size_t used = strlen(text);
        snprintf(text + used, sizeof text - used,
                 "m%u: {data/f%u.bin: 1.0, data/f%u.bin: 1, data/f%u.bin: 0.25, data/f%u.bin: 0.25}\n",
                 m, m, m + 4, (m + 3) % 4, (m + 3) % 4 + 4);
    }
    scratch_path(file, sizeof file, "locality.yaml");
    CHECK(write_file(file, text));
    o = NULL;
    CHECK_OK(cohort_plan_options_create(&o));
    CHECK_OK(cohort_plan_options_set_strategy(o, COHORT_STRATEGY_LOCALITY));
    CHECK_OK(cohort_plan_options_add_locality_file(o, file));
    check_locality_plan(s, t, o, "load_locality");

    /* Errors name the file. */
    scratch_path(file, sizeof file, "no-such-locality.yaml");
    CHECK_ERR(cohort_plan_options_add_locality_file(o, file), COHORT_ERR_IO);
    CHECK_MESSAGE_HAS("no-such-locality.yaml");
    scratch_path(file, sizeof file, "bad-locality.yaml");
    CHECK(write_file(file, "m0:\n  data/f0.bin: 2.5\n"));
    CHECK_ERR(cohort_plan_options_add_locality_file(o, file), COHORT_ERR_PARSE);
    CHECK_MESSAGE_HAS("bad-locality.yaml:2");
    CHECK(write_file(file, "m0: [data/f0.bin]\n"));
    CHECK_ERR(cohort_plan_options_add_locality_file(o, file), COHORT_ERR_PARSE);
    CHECK_MESSAGE_HAS("bad-locality.yaml");
    /* Failed loads added nothing: the plan is unchanged. */
    check_locality_plan(s, t, o, "after failed loads");
    cohort_plan_options_destroy(o);

    cohort_shards_destroy(s);
    cohort_topology_destroy(t);
}

static void test_plan_random(void) {
    cohort_topology* t = plan_members(1, 0);
    cohort_shards* s = plan_shards(16, 64);
    cohort_plan_options* o = NULL;
    CHECK_OK(cohort_plan_options_create(&o));
    CHECK_OK(cohort_plan_options_set_strategy(o, COHORT_STRATEGY_RANDOM));
    CHECK_OK(cohort_plan_options_set_replication(o, 3));
    CHECK_OK(cohort_plan_options_set_seed(o, 42));
    cohort_shard_plan* a = NULL;
    cohort_shard_plan* b = NULL;
    CHECK_OK(cohort_shard_plan_create(s, t, o, &a));
    CHECK_OK(cohort_shard_plan_create(s, t, o, &b));
    if (a != NULL && b != NULL) {
        check_plan(a, 64, 3, 4);
        int same = 1;
        for (uint64_t shard = 0; shard < 64; ++shard) {
            for (uint32_t k = 0; k < 3; ++k) {
                uint32_t x = 0, y = 1;
                CHECK_OK(cohort_shard_plan_owner(a, shard, k, &x));
                CHECK_OK(cohort_shard_plan_owner(b, shard, k, &y));
                if (x != y) same = 0;
            }
        }
        CHECK(same); /* the same seed gives the same plan */
    }
    cohort_shard_plan_destroy(b);
    cohort_shard_plan_destroy(a);
    cohort_plan_options_destroy(o);
    cohort_shards_destroy(s);
    cohort_topology_destroy(t);
}

/* What the custom callback saw. */
typedef struct assign_counter {
    uint32_t calls;
    uint32_t bad_arguments; /* calls whose arguments broke the contract */
    uint64_t last_shard;
    int64_t fail_at_call; /* return -1 on this call (0-based); -1: never */
    int64_t fixed_answer; /* return this instead; -1: (shard + replica) % members */
} assign_counter;

static int64_t assign_next(void* user_data, uint64_t shard, uint32_t replica,
                           const uint32_t* taken, uint32_t taken_count, uint32_t member_count) {
    assign_counter* c = user_data;
    uint32_t call = c->calls++;
    if (shard < c->last_shard || taken_count != replica || member_count != 4 ||
        (taken_count > 0 && taken == NULL))
        ++c->bad_arguments;
    for (uint32_t i = 0; i < taken_count && taken != NULL; ++i)
        if (taken[i] != (shard + i) % member_count) ++c->bad_arguments;
    c->last_shard = shard;
    if (c->fail_at_call >= 0 && (int64_t)call == c->fail_at_call) return -1;
    if (c->fixed_answer >= 0) return c->fixed_answer;
    return (int64_t)((shard + replica) % member_count);
}

static void test_plan_custom(void) {
    cohort_topology* t = plan_members(1, 0);
    cohort_shards* s = plan_shards(16, 64);
    cohort_plan_options* o = NULL;
    CHECK_OK(cohort_plan_options_create(&o));
    CHECK_OK(cohort_plan_options_set_strategy(o, COHORT_STRATEGY_CUSTOM));
    CHECK_OK(cohort_plan_options_set_replication(o, 2));
    assign_counter counter = {0, 0, 0, -1, -1};
    CHECK_OK(cohort_plan_options_set_custom(o, assign_next, &counter));

    cohort_shard_plan* plan = NULL;
    CHECK_OK(cohort_shard_plan_create(s, t, o, &plan));
    CHECK(counter.calls == 64 * 2);
    CHECK(counter.bad_arguments == 0);
    CHECK(counter.last_shard == 63);
    if (plan != NULL) {
        check_plan(plan, 64, 2, 4);
        for (uint64_t shard = 0; shard < 64; ++shard) {
            for (uint32_t k = 0; k < 2; ++k) {
                uint32_t member = 99;
                CHECK_OK(cohort_shard_plan_owner(plan, shard, k, &member));
                CHECK(member == (shard + k) % 4);
            }
        }
        char* json = NULL;
        size_t length = 0;
        CHECK_OK(cohort_shard_plan_to_json(plan, &json, &length));
        CHECK(contains(json, "custom"));
        cohort_free(json);
    }
    cohort_shard_plan_destroy(plan);

    /* A callback that reports failure aborts planning. */
    cohort_shard_plan* untouched = (cohort_shard_plan*)&untouched;
    counter = (assign_counter){0, 0, 0, 37, -1};
    CHECK_ERR(cohort_shard_plan_create(s, t, o, &untouched), COHORT_ERR_CALLBACK);
    CHECK(counter.calls == 38); /* stopped at the failing call */
    CHECK(untouched == (cohort_shard_plan*)&untouched);
    /* Answers that break the rules are rejected: a member already taken, a
     * member past the end. */
    counter = (assign_counter){0, 0, 0, -1, 0};
    CHECK_FAILS(cohort_shard_plan_create(s, t, o, &untouched));
    counter = (assign_counter){0, 0, 0, -1, 4};
    CHECK_FAILS(cohort_shard_plan_create(s, t, o, &untouched));
    CHECK(untouched == (cohort_shard_plan*)&untouched);

    /* Without a callback (cleared with NULL, or refused) CUSTOM cannot plan. */
    cohort_plan_options* bare = NULL;
    CHECK_OK(cohort_plan_options_create(&bare));
    CHECK_OK(cohort_plan_options_set_strategy(bare, COHORT_STRATEGY_CUSTOM));
    int rc = cohort_plan_options_set_custom(bare, NULL, NULL);
    CHECK(rc == COHORT_OK || rc == COHORT_ERR_INVALID_ARGUMENT);
    CHECK_ERR(cohort_shard_plan_create(s, t, bare, &untouched), COHORT_ERR_INVALID_ARGUMENT);
    CHECK(untouched == (cohort_shard_plan*)&untouched);
    cohort_plan_options_destroy(bare);

    cohort_plan_options_destroy(o);
    cohort_shards_destroy(s);
    cohort_topology_destroy(t);
}

/* Removing m3 moves exactly m3's placements; adding m5 moves only what m5
 * takes. */
static void check_replan(uint32_t replication) {
    cohort_topology* t = plan_members(1, 0);
    cohort_shards* s = plan_shards(16, 64);
    cohort_plan_options* o = NULL;
    CHECK_OK(cohort_plan_options_create(&o));
    CHECK_OK(cohort_plan_options_set_replication(o, replication));
    cohort_shard_plan* plan = NULL;
    CHECK_OK(cohort_shard_plan_create(s, t, o, &plan));
    cohort_topology_destroy(t);
    cohort_shards_destroy(s);
    if (plan == NULL) {
        cohort_plan_options_destroy(o);
        return;
    }
    /* The default load slack is 0: every member holds exactly its share. */
    for (uint32_t m = 0; m < 4; ++m) {
        uint64_t load = 0;
        CHECK_OK(cohort_shard_plan_member_load(plan, m, &load));
        CHECK(load == 16 * replication);
    }
    uint64_t m3_load = 0;
    CHECK_OK(cohort_shard_plan_member_load(plan, member_index(plan, "m3"), &m3_load));
    CHECK(m3_load > 0);

    cohort_topology* fewer = plan_members(0, 0);
    cohort_shard_plan* after = NULL;
    CHECK_OK(cohort_shard_plan_replan(plan, fewer, NULL, &after));
    cohort_topology_destroy(fewer);
    if (after != NULL) {
        check_plan(after, 64, replication, 3);
        CHECK(member_index(after, "m3") == UINT32_MAX);
        uint64_t moved = 0;
        CHECK_OK(cohort_shard_plan_moved(after, &moved));
        CHECK(moved == m3_load);
        /* Every placement not on m3 stayed where it was. */
        int kept = 1;
        for (uint64_t shard = 0; shard < 64; ++shard) {
            for (uint32_t k = 0; k < replication; ++k) {
                const char* old_owner = owner_id(plan, shard, k);
                if (strcmp(old_owner, "m3") == 0) continue;
                int found = 0;
                for (uint32_t j = 0; j < replication; ++j)
                    if (strcmp(owner_id(after, shard, j), old_owner) == 0) found = 1;
                if (!found) kept = 0;
            }
        }
        CHECK(kept);
    }
    cohort_shard_plan_destroy(after);

    /* A newcomer takes an even share, and only that moves. */
    cohort_topology* more = plan_members(1, 1);
    after = NULL;
    CHECK_OK(cohort_shard_plan_replan(plan, more, o, &after));
    cohort_topology_destroy(more);
    if (after != NULL) {
        check_plan(after, 64, replication, 5);
        uint64_t moved = 0, newcomer = 0;
        CHECK_OK(cohort_shard_plan_moved(after, &moved));
        CHECK_OK(cohort_shard_plan_member_load(after, member_index(after, "m5"), &newcomer));
        CHECK(moved == newcomer);
        CHECK(newcomer >= (64 * replication) / 5 && newcomer <= (64 * replication + 4) / 5);
        uint64_t changed = 0;
        for (uint64_t shard = 0; shard < 64; ++shard) {
            for (uint32_t k = 0; k < replication; ++k) {
                const char* new_owner = owner_id(after, shard, k);
                int was_there = 0;
                for (uint32_t j = 0; j < replication; ++j)
                    if (strcmp(owner_id(plan, shard, j), new_owner) == 0) was_there = 1;
                if (!was_there) {
                    ++changed;
                    CHECK_STR(new_owner, "m5");
                }
            }
        }
        CHECK(changed == moved);
    }
    cohort_shard_plan_destroy(after);

    /* Replanning needs a READY member left. */
    cohort_topology* nobody = NULL;
    CHECK_OK(cohort_topology_create(&nobody));
    cohort_shard_plan* untouched = (cohort_shard_plan*)&untouched;
    CHECK_FAILS(cohort_shard_plan_replan(plan, nobody, NULL, &untouched));
    CHECK(untouched == (cohort_shard_plan*)&untouched);
    cohort_topology_destroy(nobody);

    cohort_shard_plan_destroy(plan);
    cohort_plan_options_destroy(o);
}

static void test_replan(void) {
    check_replan(1);
    check_replan(2);
}

/* -------------------------------------------------------- epoch order */

static void test_epoch_order(void) {
    uint64_t idx[16];
    size_t count = 0;
    /* No shuffle: 0..9 padded with 0, 1 to 12, every 3rd from the rank. */
    CHECK_OK(cohort_epoch_order(10, 0, 0, 0, 3, 0, idx, 16, &count));
    CHECK(count == 4 && idx[0] == 0 && idx[1] == 3 && idx[2] == 6 && idx[3] == 9);
    CHECK_OK(cohort_epoch_order(10, 0, 0, 1, 3, 0, idx, 16, &count));
    CHECK(count == 4 && idx[0] == 1 && idx[1] == 4 && idx[2] == 7 && idx[3] == 0);
    CHECK_OK(cohort_epoch_order(10, 0, 0, 2, 3, 0, idx, 16, &count));
    CHECK(count == 4 && idx[0] == 2 && idx[1] == 5 && idx[2] == 8 && idx[3] == 1);
    /* DROP_LAST trims to 9. */
    CHECK_OK(cohort_epoch_order(10, 0, 0, 2, 3, COHORT_EPOCH_DROP_LAST, idx, 16, &count));
    CHECK(count == 3 && idx[0] == 2 && idx[1] == 5 && idx[2] == 8);

    /* Shuffled: the ranks together visit a permutation of 0..n-1. */
    enum { N = 96, WORLD = 4 };
    uint64_t seen[N] = {0};
    uint64_t first[N / WORLD];
    for (int32_t rank = 0; rank < WORLD; ++rank) {
        uint64_t part[N / WORLD];
        count = 0;
        CHECK_OK(cohort_epoch_order(N, 1234, 3, rank, WORLD, COHORT_EPOCH_SHUFFLE, part,
                                    N / WORLD, &count));
        CHECK(count == N / WORLD);
        for (size_t i = 0; i < count && i < N / WORLD; ++i)
            if (part[i] < N) ++seen[part[i]];
        if (rank == 0) memcpy(first, part, sizeof first);
    }
    int permutation = 1;
    for (int i = 0; i < N; ++i)
        if (seen[i] != 1) permutation = 0;
    CHECK(permutation);
    /* Deterministic in (seed, epoch); another epoch reshuffles. */
    uint64_t again[N / WORLD], next_epoch[N / WORLD];
    CHECK_OK(cohort_epoch_order(N, 1234, 3, 0, WORLD, COHORT_EPOCH_SHUFFLE, again, N / WORLD,
                                &count));
    CHECK(memcmp(first, again, sizeof first) == 0);
    CHECK_OK(cohort_epoch_order(N, 1234, 4, 0, WORLD, COHORT_EPOCH_SHUFFLE, next_epoch,
                                N / WORLD, &count));
    CHECK(memcmp(first, next_epoch, sizeof first) != 0);
    int sorted = 1;
    for (int i = 1; i < N / WORLD; ++i)
        if (first[i] != first[i - 1] + WORLD) sorted = 0;
    CHECK(!sorted);

    /* Buffer too small: the count still comes back. */
    count = 0;
    idx[0] = 12345;
    CHECK_ERR(cohort_epoch_order(10, 0, 0, 0, 3, 0, idx, 2, &count), COHORT_ERR_BUFFER_TOO_SMALL);
    CHECK(count == 4);
    CHECK(idx[0] == 12345); /* filled only when it all fits */
    count = 0;
    CHECK_ERR(cohort_epoch_order(10, 0, 0, 0, 3, 0, NULL, 0, &count),
              COHORT_ERR_BUFFER_TOO_SMALL);
    CHECK(count == 4);
    /* n == 0 is an empty epoch. */
    count = 99;
    CHECK_OK(cohort_epoch_order(0, 0, 0, 0, 1, COHORT_EPOCH_SHUFFLE, idx, 16, &count));
    CHECK(count == 0);
    /* Bad rank or world size. */
    count = 99;
    CHECK_ERR(cohort_epoch_order(10, 0, 0, 3, 3, 0, idx, 16, &count), COHORT_ERR_INVALID_ARGUMENT);
    CHECK_ERR(cohort_epoch_order(10, 0, 0, 0, 0, 0, idx, 16, &count), COHORT_ERR_INVALID_ARGUMENT);
    CHECK(count == 99);
}

/* ---------------------------------------------------------- NULL args */

static void test_null_arguments(void) {
    cohort_topology* t = build_topology();
    cohort_dataset* d = NULL;
    CHECK_OK(cohort_dataset_create(&d));
    CHECK_OK(cohort_dataset_add_file(d, "x", 100, 1));
    cohort_shards* s = NULL;
    CHECK_OK(cohort_shards_split(d, 0, 4, &s));
    cohort_rank_order* order = NULL;
    CHECK_OK(cohort_rank_order_create(t, 0, &order));
    cohort_plan_options* o = NULL;
    CHECK_OK(cohort_plan_options_create(&o));
    cohort_shard_plan* plan = NULL;
    CHECK_OK(cohort_shard_plan_create(s, t, o, &plan));

    const int E = COHORT_ERR_INVALID_ARGUMENT;
    const char* str = NULL;
    char* json = NULL;
    size_t length = 0, count = 0;
    uint32_t u32 = 0;
    uint64_t u64 = 0, buffer[4];
    int32_t i32 = 0;
    cohort_rank_info info;
    cohort_topology* t_out = NULL;
    cohort_dataset* d_out = NULL;
    cohort_shards* s_out = NULL;
    cohort_plan_options* o_out = NULL;
    cohort_shard_plan* p_out = NULL;
    cohort_rank_order* r_out = NULL;

    /* Out-parameters. */
    CHECK_ERR(cohort_topology_create(NULL), E);
    CHECK_ERR(cohort_topology_load_file("x.yaml", NULL), E);
    CHECK_ERR(cohort_topology_load_string("nodes: []", 9, 0, NULL, NULL), E);
    CHECK_ERR(cohort_topology_node_count(t, NULL), E);
    CHECK_ERR(cohort_topology_find(t, "c0", NULL), E);
    CHECK_ERR(cohort_topology_node_str(t, 0, COHORT_FIELD_ID, NULL), E);
    CHECK_ERR(cohort_topology_to_json(t, NULL, &length), E);
    CHECK_ERR(cohort_rank_order_create(t, 0, NULL), E);
    CHECK_ERR(cohort_rank_order_size(order, NULL), E);
    CHECK_ERR(cohort_rank_order_host_count(order, NULL), E);
    CHECK_ERR(cohort_rank_order_get(order, 0, NULL), E);
    CHECK_ERR(cohort_rank_order_rank_of(order, "c0", NULL), E);
    CHECK_ERR(cohort_rank_order_ring_crossings(order, COHORT_LEVEL_HOST, NULL), E);
    CHECK_ERR(cohort_dataset_create(NULL), E);
    CHECK_ERR(cohort_dataset_load_file("x.txt", NULL), E);
    CHECK_ERR(cohort_dataset_load_string("x 1\n", 4, 0, NULL, NULL), E);
    CHECK_ERR(cohort_dataset_file_count(d, NULL), E);
    CHECK_ERR(cohort_dataset_total_bytes(d, NULL), E);
    CHECK_ERR(cohort_shards_split(d, 0, 4, NULL), E);
    CHECK_ERR(cohort_shards_count(s, NULL), E);
    CHECK_ERR(cohort_plan_options_create(NULL), E);
    CHECK_ERR(cohort_shard_plan_create(s, t, o, NULL), E);
    CHECK_ERR(cohort_shard_plan_replan(plan, t, NULL, NULL), E);
    CHECK_ERR(cohort_shard_plan_shard_count(plan, NULL), E);
    CHECK_ERR(cohort_shard_plan_replication(plan, NULL), E);
    CHECK_ERR(cohort_shard_plan_member_count(plan, NULL), E);
    CHECK_ERR(cohort_shard_plan_member_id(plan, 0, NULL), E);
    CHECK_ERR(cohort_shard_plan_owner(plan, 0, 0, NULL), E);
    CHECK_ERR(cohort_shard_plan_member_load(plan, 0, NULL), E);
    uint32_t busy = 0; /* a member with shards, so a buffer is needed */
    for (uint64_t load = 0; cohort_shard_plan_member_load(plan, busy, &load) == COHORT_OK && load == 0;) ++busy;
    CHECK_ERR(cohort_shard_plan_member_shards(plan, busy, buffer, 4, NULL), E);
    CHECK_ERR(cohort_shard_plan_member_shards(plan, busy, NULL, 4, &count), E);
    CHECK_ERR(cohort_shard_plan_moved(plan, NULL), E);
    CHECK_ERR(cohort_shard_plan_to_json(plan, NULL, &length), E);
    CHECK_ERR(cohort_epoch_order(10, 0, 0, 0, 1, 0, buffer, 4, NULL), E);
    CHECK_ERR(cohort_epoch_order(10, 0, 0, 0, 1, 0, NULL, 4, &count), E);

    /* Handles. */
    CHECK_ERR(cohort_topology_add_node(NULL, "z", NULL, NULL, 0), E);
    CHECK_ERR(cohort_topology_set_locality(NULL, "c0", COHORT_LEVEL_RACK, "r"), E);
    CHECK_ERR(cohort_topology_set_gpus(NULL, "c0", 1, 1), E);
    CHECK_ERR(cohort_topology_set_status(NULL, "c0", 0), E);
    CHECK_ERR(cohort_topology_node_count(NULL, &u32), E);
    CHECK_ERR(cohort_topology_find(NULL, "c0", &u32), E);
    CHECK_ERR(cohort_topology_node_str(NULL, 0, 0, &str), E);
    CHECK_ERR(cohort_topology_node_info(NULL, 0, &i32, &i32, &u32, &u64), E);
    CHECK_ERR(cohort_topology_to_json(NULL, &json, &length), E);
    CHECK_ERR(cohort_rank_order_create(NULL, 0, &r_out), E);
    CHECK_ERR(cohort_rank_order_size(NULL, &i32), E);
    CHECK_ERR(cohort_rank_order_host_count(NULL, &u32), E);
    CHECK_ERR(cohort_rank_order_get(NULL, 0, &info), E);
    CHECK_ERR(cohort_rank_order_rank_of(NULL, "c0", &i32), E);
    CHECK_ERR(cohort_rank_order_ring_crossings(NULL, 0, &u32), E);
    CHECK_ERR(cohort_dataset_add_file(NULL, "p", 1, 1), E);
    CHECK_ERR(cohort_dataset_file_count(NULL, &u32), E);
    CHECK_ERR(cohort_dataset_file(NULL, 0, &str, &u64, &u64), E);
    CHECK_ERR(cohort_dataset_total_bytes(NULL, &u64), E);
    CHECK_ERR(cohort_shards_split(NULL, 0, 4, &s_out), E);
    CHECK_ERR(cohort_shards_count(NULL, &u64), E);
    CHECK_ERR(cohort_shards_info(NULL, 0, &u64, &u64, &u32), E);
    CHECK_ERR(cohort_shards_segment(NULL, 0, 0, &u32, &u64, &u64), E);
    CHECK_ERR(cohort_plan_options_set_strategy(NULL, 0), E);
    CHECK_ERR(cohort_plan_options_set_replication(NULL, 1), E);
    CHECK_ERR(cohort_plan_options_set_seed(NULL, 1), E);
    CHECK_ERR(cohort_plan_options_set_roles(NULL, 0), E);
    CHECK_ERR(cohort_plan_options_set_load_slack(NULL, 0.1), E);
    CHECK_ERR(cohort_plan_options_set_weights(NULL, 1, 1, 1), E);
    CHECK_ERR(cohort_plan_options_add_locality(NULL, "c0", "x", 1.0), E);
    CHECK_ERR(cohort_plan_options_set_custom(NULL, assign_next, NULL), E);
    CHECK_ERR(cohort_shard_plan_create(NULL, t, o, &p_out), E);
    CHECK_ERR(cohort_shard_plan_create(s, NULL, o, &p_out), E);
    CHECK_ERR(cohort_shard_plan_replan(NULL, t, o, &p_out), E);
    CHECK_ERR(cohort_shard_plan_replan(plan, NULL, o, &p_out), E);
    CHECK_ERR(cohort_shard_plan_shard_count(NULL, &u64), E);
    CHECK_ERR(cohort_shard_plan_replication(NULL, &u32), E);
    CHECK_ERR(cohort_shard_plan_member_count(NULL, &u32), E);
    CHECK_ERR(cohort_shard_plan_member_id(NULL, 0, &str), E);
    CHECK_ERR(cohort_shard_plan_owner(NULL, 0, 0, &u32), E);
    CHECK_ERR(cohort_shard_plan_member_load(NULL, 0, &u64), E);
    CHECK_ERR(cohort_shard_plan_member_shards(NULL, 0, buffer, 4, &count), E);
    CHECK_ERR(cohort_shard_plan_moved(NULL, &u64), E);
    CHECK_ERR(cohort_shard_plan_to_json(NULL, &json, &length), E);

    /* Strings. */
    CHECK_ERR(cohort_topology_load_file(NULL, &t_out), E);
    CHECK_ERR(cohort_topology_load_string(NULL, 5, 0, NULL, &t_out), E);
    CHECK_ERR(cohort_topology_add_node(t, NULL, NULL, NULL, 0), E);
    CHECK_ERR(cohort_topology_set_locality(t, NULL, COHORT_LEVEL_RACK, "r"), E);
    CHECK_ERR(cohort_topology_set_gpus(t, NULL, 1, 1), E);
    CHECK_ERR(cohort_topology_set_status(t, NULL, 0), E);
    CHECK_ERR(cohort_topology_find(t, NULL, &u32), E);
    CHECK_ERR(cohort_rank_order_rank_of(order, NULL, &i32), E);
    CHECK_ERR(cohort_dataset_load_file(NULL, &d_out), E);
    CHECK_ERR(cohort_dataset_load_string(NULL, 4, 0, NULL, &d_out), E);
    CHECK_ERR(cohort_dataset_add_file(d, NULL, 1, 1), E);
    CHECK_ERR(cohort_plan_options_add_locality(o, NULL, "x", 1.0), E);
    CHECK_ERR(cohort_plan_options_add_locality(o, "c0", NULL, 1.0), E);
    CHECK_ERR(cohort_plan_options_add_locality_file(NULL, "x.yaml"), E);
    CHECK_ERR(cohort_plan_options_add_locality_file(o, NULL), E);
    CHECK(t_out == NULL && d_out == NULL && s_out == NULL && o_out == NULL && p_out == NULL &&
          r_out == NULL);

    /* The message says which function and which argument. */
    CHECK_ERR(cohort_topology_find(t, NULL, &u32), E);
    CHECK_MESSAGE_HAS("cohort_topology_find");
    CHECK_MESSAGE_HAS("id");
    CHECK_ERR(cohort_shards_count(s, NULL), E);
    CHECK_MESSAGE_HAS("cohort_shards_count");
    CHECK_ERR(cohort_shard_plan_owner(plan, 99, 0, &u32), COHORT_ERR_OUT_OF_RANGE);
    CHECK_MESSAGE_HAS("cohort_shard_plan_owner");
    CHECK_MESSAGE_HAS("99");

    /* Destroying NULL is a no-op. */
    cohort_topology_destroy(NULL);
    cohort_rank_order_destroy(NULL);
    cohort_dataset_destroy(NULL);
    cohort_shards_destroy(NULL);
    cohort_plan_options_destroy(NULL);
    cohort_shard_plan_destroy(NULL);
    cohort_free(NULL);
    ++g_passed;

    cohort_shard_plan_destroy(plan);
    cohort_plan_options_destroy(o);
    cohort_rank_order_destroy(order);
    cohort_shards_destroy(s);
    cohort_dataset_destroy(d);
    cohort_topology_destroy(t);
}

/* --------------------------------------------------------------- main */

int run_rules_tests(const char* scratch); /* c_test_rules.c; returns its failures */
int run_gpu_tests(void);                   /* c_test_gpu.c; returns its failures */
int run_comm_tests(const char* scratch);   /* c_test_comm.c; returns its failures */
int run_env_tests(void);                   /* c_test_env.c; returns its failures */
int run_coordinator_tests(void);           /* c_test_coordinator.c; returns its failures */
int run_membership_tests(void);            /* c_test_membership.c; returns its failures */
int run_data_tests(const char* scratch);   /* c_test_data.c; returns its failures */
int run_advisor_tests(void);               /* c_test_advisor.c; returns its failures */
int run_autotune_tests(const char* scratch); /* c_test_autotune.c; returns its failures */
int run_shard_reader_tests(const char* scratch); /* c_test_shard_reader.c; returns its failures */

int main(int argc, char** argv) {
    /* The test writes cluster.yaml, dataset.txt, ...: never into the
     * current directory by default, where they end up committed. */
    if (argc != 2) {
        fprintf(stderr, "usage: %s SCRATCH_DIR (an existing directory for the test's files)\n", argv[0]);
        return 2;
    }
    g_scratch = argv[1];
    setvbuf(stdout, NULL, _IONBF, 0);

    struct {
        const char* name;
        void (*run)(void);
    } tests[] = {
        {"status", test_status},
        {"topology_build", test_topology_build},
        {"topology_load", test_topology_load},
        {"rank_order", test_rank_order},
        {"dataset", test_dataset},
        {"shards", test_shards},
        {"plan_options", test_plan_options},
        {"plan_round_robin", test_plan_round_robin},
        {"plan_hash", test_plan_hash},
        {"plan_locality", test_plan_locality},
        {"plan_random", test_plan_random},
        {"plan_custom", test_plan_custom},
        {"replan", test_replan},
        {"epoch_order", test_epoch_order},
        {"null_arguments", test_null_arguments},
    };
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; ++i) {
        int failed_before = g_failed;
        tests[i].run();
        printf("%-18s %s\n", tests[i].name, g_failed == failed_before ? "ok" : "FAILED");
    }
    g_failed += run_rules_tests(g_scratch);
    g_failed += run_gpu_tests();
    g_failed += run_comm_tests(g_scratch);
    g_failed += run_env_tests();
    g_failed += run_coordinator_tests();
    g_failed += run_membership_tests();
    g_failed += run_data_tests(g_scratch);
    g_failed += run_advisor_tests();
    g_failed += run_autotune_tests(g_scratch);
    g_failed += run_shard_reader_tests(g_scratch);
    printf("%d passed, %d failed\n", g_passed, g_failed);
    return g_failed == 0 ? 0 : 1;
}
