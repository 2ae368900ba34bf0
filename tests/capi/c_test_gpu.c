/*
 * c_test_gpu.c: GPU probes and monitors through the C ABI, from plain C11,
 * on the simulated backend (the files of tests/data/gpu/capi, whose folder
 * comes in as COHORT_GPU_TEST_DATA). Includes nothing from cohort but
 * cohort.h; c_test.c's main() runs it.
 */
#include "cohort.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#ifndef COHORT_GPU_TEST_DATA
#error "COHORT_GPU_TEST_DATA must name tests/data/gpu/capi"
#endif

static int gpu_passed;
static int gpu_failed;

static void gpu_fail(const char* file, int line, const char* what) {
    ++gpu_failed;
    fprintf(stderr, "%s:%d: FAILED: %s\n", file, line, what);
}

/* status must be `code`; unless it is COHORT_OK, the last error must contain `needle`. */
static void check_status(const char* file, int line, const char* call, int status, int code, const char* needle) {
    const char* message = cohort_last_error();
    if (status == code && (code == COHORT_OK || strstr(message, needle) != NULL)) {
        ++gpu_passed;
        return;
    }
    gpu_fail(file, line, call);
    fprintf(stderr, "    returned %d (expected %d), last error: \"%s\"\n", status, code, message);
    if (code != COHORT_OK) fprintf(stderr, "    expected it to contain \"%s\"\n", needle);
}

static void check_has(const char* file, int line, const char* what, const char* text, const char* needle) {
    if (text != NULL && strstr(text, needle) != NULL) {
        ++gpu_passed;
        return;
    }
    gpu_fail(file, line, what);
    fprintf(stderr, "    got \"%s\"\n    lacks \"%s\"\n", text ? text : "(null)", needle);
}

#define CHECK(cond) ((cond) ? (void)++gpu_passed : gpu_fail(__FILE__, __LINE__, #cond))
#define CHECK_OK(call) check_status(__FILE__, __LINE__, #call, (call), COHORT_OK, "")
#define CHECK_ERR(call, code, needle) check_status(__FILE__, __LINE__, #call, (call), (code), (needle))
#define CHECK_HAS(text, needle) check_has(__FILE__, __LINE__, #text, (text), (needle))
#define BAD_ARGUMENT COHORT_ERR_INVALID_ARGUMENT
#define GIB 1073741824ull

static const char* data_file(char* out, size_t size, const char* prefix, const char* name) {
    snprintf(out, size, "%s%s/%s", prefix, COHORT_GPU_TEST_DATA, name);
    return out;
}

static double seconds_now(void) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static cohort_gpu_probe* open_file_probe(const char* name, double deadline) {
    char spec[1024];
    cohort_gpu_probe* probe = NULL;
    CHECK_OK(cohort_gpu_probe_open(data_file(spec, sizeof spec, "file:", name), deadline, &probe));
    return probe;
}

/* ------------------------------------------------------------- backends */

static void test_backends(void) {
    char* json = NULL;
    size_t length = 0;
    CHECK_OK(cohort_gpu_backends(2.0, &json, &length));
    CHECK(json != NULL && length == strlen(json));
    CHECK_HAS(json, "{\"backend\":\"nvml\",\"available\":");
    CHECK_HAS(json, "{\"backend\":\"nvidia-smi\",\"available\":");
    CHECK_HAS(json, "{\"backend\":\"file\",\"available\":true,\"reason\":\"\"}");
    CHECK_HAS(json, "{\"backend\":\"none\",\"available\":true,\"reason\":\"\"}");
    /* Where NVML is missing, the reason names the library. */
    if (json != NULL && strstr(json, "\"nvml\",\"available\":false") != NULL) CHECK_HAS(json, "libnvidia-ml.so.1");
    cohort_free(json);

    json = NULL;
    CHECK_OK(cohort_gpu_backends(0.5, &json, NULL));
    CHECK(json != NULL);
    cohort_free(json);
    json = NULL;
    CHECK_ERR(cohort_gpu_backends(0, &json, &length), BAD_ARGUMENT,
              "cohort_gpu_backends: deadline_seconds must be a positive number of seconds, got 0");
    CHECK_ERR(cohort_gpu_backends(NAN, &json, &length), BAD_ARGUMENT, "deadline_seconds");
    CHECK_ERR(cohort_gpu_backends(INFINITY, &json, &length), BAD_ARGUMENT, "deadline_seconds");
    CHECK(json == NULL);
    CHECK_ERR(cohort_gpu_backends(2.0, NULL, &length), BAD_ARGUMENT, "cohort_gpu_backends: json must not be NULL");
}

/* ---------------------------------------------------------------- probe */

static void test_probe_sample(void) {
    char spec[1024];
    cohort_gpu_probe* probe = open_file_probe("gpus.yaml", 2.0);
    if (probe == NULL) return;

    const char* backend = NULL;
    CHECK_OK(cohort_gpu_probe_backend(probe, &backend));
    CHECK(backend != NULL && strcmp(backend, data_file(spec, sizeof spec, "file:", "gpus.yaml")) == 0);

    char* json = NULL;
    size_t length = 0;
    CHECK_OK(cohort_gpu_probe_selection(probe, &json, &length));
    CHECK_HAS(json, "[{\"backend\":\"file:");
    CHECK_HAS(json, "gpus.yaml\",\"chosen\":true,\"reason\":\"\"}]");
    CHECK(json != NULL && length == strlen(json));
    cohort_free(json);

    json = NULL;
    CHECK_OK(cohort_gpu_probe_sample(probe, &json, &length));
    CHECK(json != NULL && length == strlen(json));
    CHECK_HAS(json, "\"health\":\"ok\",\"stale\":false,\"error\":\"\"");
    CHECK_HAS(json, "\"index\":0,");
    CHECK_HAS(json, "\"index\":1,");
    CHECK_HAS(json, "\"name\":\"Sim A100\"");
    CHECK_HAS(json, "\"memory_total_bytes\":85899345920,\"memory_used_bytes\":77309411328");
    /* Not a zero: a state. */
    CHECK_HAS(json, "\"power_draw_watts\":{\"state\":\"not_available\"}");
    CHECK_HAS(json, "\"fan_percent\":{\"state\":\"not_supported\"}");
    CHECK_HAS(json, "{\"pid\":4242,\"name\":\"python\",\"memory_bytes\":75161927680}");
    cohort_free(json);

    cohort_gpu_summary summary;
    memset(&summary, 0, sizeof summary);
    CHECK_OK(cohort_gpu_probe_sample_summary(probe, &summary));
    CHECK(summary.gpu_count == 2);
    CHECK(summary.health == COHORT_GPU_HEALTH_OK);
    CHECK(summary.stale == 0);
    CHECK(summary.process_count == 1);
    CHECK(summary.memory_used_bytes == 80 * GIB);
    CHECK(summary.memory_total_bytes == 160 * GIB);
    CHECK(summary.max_memory_used_percent == 90.0);
    CHECK(summary.max_memory_busy_percent == 40.0);
    CHECK(summary.max_utilization_percent == 97.0);
    CHECK(summary.max_temperature_celsius == 91.0);
    CHECK(summary.max_power_watts == 300.5); /* GPU 1 has none: GPU 0's */
    CHECK(summary.time > 1.5e9 && fabs(summary.time - seconds_now()) < 60);
    CHECK(summary.latency_seconds >= 0 && summary.latency_seconds < 2.0);

    /* Argument errors leave the out-parameters alone. */
    CHECK_ERR(cohort_gpu_probe_backend(NULL, &backend), BAD_ARGUMENT,
              "cohort_gpu_probe_backend: probe must not be NULL");
    CHECK_ERR(cohort_gpu_probe_backend(probe, NULL), BAD_ARGUMENT, "backend must not be NULL");
    CHECK_ERR(cohort_gpu_probe_selection(probe, NULL, NULL), BAD_ARGUMENT,
              "cohort_gpu_probe_selection: json must not be NULL");
    CHECK_ERR(cohort_gpu_probe_selection(NULL, &json, NULL), BAD_ARGUMENT, "probe must not be NULL");
    CHECK_ERR(cohort_gpu_probe_sample(probe, NULL, NULL), BAD_ARGUMENT,
              "cohort_gpu_probe_sample: json must not be NULL");
    CHECK_ERR(cohort_gpu_probe_sample(NULL, &json, NULL), BAD_ARGUMENT, "probe must not be NULL");
    CHECK_ERR(cohort_gpu_probe_sample_summary(probe, NULL), BAD_ARGUMENT,
              "cohort_gpu_probe_sample_summary: out must not be NULL");
    CHECK_ERR(cohort_gpu_probe_sample_summary(NULL, &summary), BAD_ARGUMENT, "probe must not be NULL");
    cohort_gpu_probe_destroy(probe);
    cohort_gpu_probe_destroy(NULL);
}

static void test_probe_open(void) {
    char spec[1024];
    cohort_gpu_probe* probe = NULL;
    cohort_gpu_probe* untouched = (cohort_gpu_probe*)&probe;

    /* auto (and NULL, which means auto) never fails for a missing backend. */
    CHECK_OK(cohort_gpu_probe_open("auto", 1.0, &probe));
    char* json = NULL;
    CHECK_OK(cohort_gpu_probe_selection(probe, &json, NULL));
    CHECK_HAS(json, "{\"backend\":\"nvml\",\"chosen\":");
    CHECK_HAS(json, "\"chosen\":true");
    cohort_free(json);
    cohort_gpu_probe_destroy(probe);
    probe = NULL;
    CHECK_OK(cohort_gpu_probe_open(NULL, 1.0, &probe));
    cohort_gpu_probe_destroy(probe);

    /* none: no GPUs, a healthy sample. */
    probe = NULL;
    CHECK_OK(cohort_gpu_probe_open("none", 1.0, &probe));
    cohort_gpu_summary summary;
    CHECK_OK(cohort_gpu_probe_sample_summary(probe, &summary));
    CHECK(summary.gpu_count == 0 && summary.health == COHORT_GPU_HEALTH_OK);
    CHECK(isnan(summary.max_temperature_celsius) && isnan(summary.max_memory_used_percent));
    const char* backend = NULL;
    CHECK_OK(cohort_gpu_probe_backend(probe, &backend));
    CHECK(backend != NULL && strcmp(backend, "none") == 0);
    cohort_gpu_probe_destroy(probe);

    /* A named backend that is missing says why; on a GPU machine it opens. */
    probe = NULL;
    int status = cohort_gpu_probe_open("nvml", 1.0, &probe);
    if (status == COHORT_OK) {
        cohort_gpu_probe_destroy(probe);
    } else {
        CHECK_ERR(status, COHORT_ERR_UNAVAILABLE, "libnvidia-ml.so.1");
        CHECK(probe == NULL);
    }

    probe = untouched;
    CHECK_ERR(cohort_gpu_probe_open("cuda", 1.0, &probe), BAD_ARGUMENT, "unknown GPU backend 'cuda'");
    CHECK_ERR(cohort_gpu_probe_open("file:", 1.0, &probe), BAD_ARGUMENT, "file:PATH");
    CHECK_ERR(cohort_gpu_probe_open("file:/nonexistent/gpus.yaml", 1.0, &probe), COHORT_ERR_IO,
              "/nonexistent/gpus.yaml");
    CHECK_ERR(cohort_gpu_probe_open(data_file(spec, sizeof spec, "file:", "bad.yaml"), 1.0, &probe), COHORT_ERR_PARSE,
              "bad.yaml:5:");
    CHECK_HAS(cohort_last_error(), "is more than memory_total");
    CHECK_ERR(cohort_gpu_probe_open("none", 0, &probe), BAD_ARGUMENT,
              "cohort_gpu_probe_open: deadline_seconds must be a positive number of seconds, got 0");
    CHECK_ERR(cohort_gpu_probe_open("none", -1, &probe), BAD_ARGUMENT, "got -1");
    CHECK_ERR(cohort_gpu_probe_open("none", NAN, &probe), BAD_ARGUMENT, "deadline_seconds");
    CHECK(probe == untouched);
    CHECK_ERR(cohort_gpu_probe_open("none", 1.0, NULL), BAD_ARGUMENT, "cohort_gpu_probe_open: out must not be NULL");
}

/* A failing or hanging backend: the call still succeeds, and says so. */
static void test_probe_failures(void) {
    cohort_gpu_probe* probe = open_file_probe("failing.yaml", 1.0);
    if (probe != NULL) {
        char* json = NULL;
        CHECK_OK(cohort_gpu_probe_sample(probe, &json, NULL));
        CHECK_HAS(json, "\"health\":\"failed\",\"stale\":true");
        CHECK_HAS(json, "simulated driver failure");
        CHECK_HAS(json, "\"gpus\":[]"); /* no good readings yet */
        cohort_free(json);
        cohort_gpu_summary summary;
        CHECK_OK(cohort_gpu_probe_sample_summary(probe, &summary));
        CHECK(summary.health == COHORT_GPU_HEALTH_FAILED && summary.stale == 1 && summary.gpu_count == 0);
        CHECK(isnan(summary.max_power_watts));
        cohort_gpu_probe_destroy(probe);
    }

    probe = open_file_probe("hanging.yaml", 0.2);
    if (probe == NULL) return;
    double begin = seconds_now();
    char* json = NULL;
    CHECK_OK(cohort_gpu_probe_sample(probe, &json, NULL));
    CHECK(seconds_now() - begin < 2.0); /* the backend hangs for 3 s */
    CHECK_HAS(json, "\"health\":\"unresponsive\",\"stale\":true");
    CHECK_HAS(json, "did not answer within 0.2s");
    cohort_free(json);
    /* Still stuck: the next caller is answered at once. */
    begin = seconds_now();
    cohort_gpu_summary summary;
    CHECK_OK(cohort_gpu_probe_sample_summary(probe, &summary));
    CHECK(summary.health == COHORT_GPU_HEALTH_UNRESPONSIVE && summary.stale == 1);
    CHECK(seconds_now() - begin < 1.0);
    /* Destroying it does not wait for the stuck query either. */
    begin = seconds_now();
    cohort_gpu_probe_destroy(probe);
    CHECK(seconds_now() - begin < 1.0);
}

/* -------------------------------------------------------------- monitor */

static cohort_gpu_monitor* make_monitor(const char* rules, cohort_gpu_probe** probe_out) {
    char path[1024];
    cohort_gpu_probe* probe = open_file_probe("gpus.yaml", 2.0);
    cohort_gpu_monitor* monitor = NULL;
    if (probe == NULL) return NULL;
    CHECK_OK(
        cohort_gpu_monitor_create(probe, 0.02, 4, rules ? data_file(path, sizeof path, "", rules) : NULL, &monitor));
    if (probe_out)
        *probe_out = probe;
    else
        cohort_gpu_probe_destroy(probe);
    return monitor;
}

static void test_monitor_history(void) {
    cohort_gpu_probe* probe = NULL;
    cohort_gpu_monitor* monitor = make_monitor("io_rules.yaml", &probe);
    if (monitor == NULL) return;

    /* The probe's backend moved; what it was stays readable. */
    const char* backend = NULL;
    CHECK_OK(cohort_gpu_probe_backend(probe, &backend));
    CHECK_HAS(backend, "gpus.yaml");
    char* json = NULL;
    CHECK_OK(cohort_gpu_probe_selection(probe, &json, NULL));
    cohort_free(json);
    json = NULL;
    CHECK_ERR(cohort_gpu_probe_sample(probe, &json, NULL), BAD_ARGUMENT,
              "cohort_gpu_probe_sample: the probe was moved into a monitor by cohort_gpu_monitor_create");
    cohort_gpu_monitor* again = NULL;
    CHECK_ERR(cohort_gpu_monitor_create(probe, 1.0, 10, NULL, &again), BAD_ARGUMENT, "moved into a monitor");
    cohort_gpu_probe_destroy(probe);

    /* Before the first sample. */
    int32_t running = -1;
    CHECK_OK(cohort_gpu_monitor_running(monitor, &running));
    CHECK(running == 0);
    CHECK_ERR(cohort_gpu_monitor_latest(monitor, &json, NULL), COHORT_ERR_NOT_FOUND,
              "cohort_gpu_monitor_latest: no sample yet");
    cohort_gpu_summary summary;
    CHECK_ERR(cohort_gpu_monitor_latest_summary(monitor, &summary), COHORT_ERR_NOT_FOUND, "no sample yet");
    CHECK_OK(cohort_gpu_monitor_history(monitor, 0, &json, NULL));
    CHECK(json != NULL && strcmp(json, "[]") == 0);
    cohort_free(json);
    uint64_t count = 99;
    double min = -1, mean = -1, max = -1;
    CHECK_OK(cohort_gpu_monitor_stats(monitor, 0, COHORT_GPU_METRIC_MEMORY_USED, INFINITY, &count, &min, &mean, &max));
    CHECK(count == 0 && min == 0 && mean == 0 && max == 0);

    /* Six samples, four kept. */
    size_t length = 0;
    json = NULL;
    CHECK_OK(cohort_gpu_monitor_sample_now(monitor, &json, &length));
    CHECK_HAS(json, "\"health\":\"ok\"");
    CHECK(json != NULL && length == strlen(json));
    cohort_free(json);
    for (int i = 0; i < 5; ++i) CHECK_OK(cohort_gpu_monitor_sample_now(monitor, NULL, NULL));
    CHECK_OK(cohort_gpu_monitor_latest(monitor, &json, &length));
    CHECK_HAS(json, "\"name\":\"Sim A100\"");
    cohort_free(json);
    CHECK_OK(cohort_gpu_monitor_latest_summary(monitor, &summary));
    CHECK(summary.gpu_count == 2 && summary.max_temperature_celsius == 91.0);
    CHECK_OK(cohort_gpu_monitor_history(monitor, 1, &json, &length));
    CHECK_HAS(json, "[{\"time\":");
    CHECK_HAS(json, ",\"gpu\":{\"index\":1,");
    CHECK_HAS(json, "\"temperature_celsius\":");
    cohort_free(json);
    CHECK_OK(cohort_gpu_monitor_stats(monitor, 0, COHORT_GPU_METRIC_MEMORY_USED, INFINITY, &count, &min, &mean, &max));
    CHECK(count == 4 && min == 90.0 && mean == 90.0 && max == 90.0);
    CHECK_OK(cohort_gpu_monitor_stats(monitor, 1, COHORT_GPU_METRIC_TEMPERATURE, 3600, &count, NULL, NULL, &max));
    CHECK(count == 4 && max == 91.0);
    CHECK_OK(cohort_gpu_monitor_stats(monitor, 1, COHORT_GPU_METRIC_POWER, 3600, &count, &min, NULL, NULL));
    CHECK(count == 0 && min == 0); /* GPU 1 cannot say its power draw */

    /* The sampler. */
    CHECK_OK(cohort_gpu_monitor_start(monitor));
    CHECK_OK(cohort_gpu_monitor_start(monitor)); /* already running: no-op */
    CHECK_OK(cohort_gpu_monitor_running(monitor, &running));
    CHECK(running == 1);
    const double last = summary.time;
    const double give_up = seconds_now() + 10;
    while (summary.time == last && seconds_now() < give_up) {
        if (cohort_gpu_monitor_latest_summary(monitor, &summary) != COHORT_OK) break;
    }
    CHECK(summary.time > last);
    CHECK_OK(cohort_gpu_monitor_stop(monitor));
    CHECK_OK(cohort_gpu_monitor_stop(monitor));
    CHECK_OK(cohort_gpu_monitor_running(monitor, &running));
    CHECK(running == 0);

    /* Errors. */
    CHECK_ERR(cohort_gpu_monitor_history(monitor, 7, &json, NULL), COHORT_ERR_NOT_FOUND,
              "cohort_gpu_monitor_history: no GPU with index 7 in the latest sample (GPUs 0, 1)");
    CHECK_ERR(cohort_gpu_monitor_stats(monitor, 7, COHORT_GPU_METRIC_POWER, 1, &count, NULL, NULL, NULL),
              COHORT_ERR_NOT_FOUND, "cohort_gpu_monitor_stats: no GPU with index 7");
    CHECK_ERR(cohort_gpu_monitor_stats(monitor, 0, 9, 1, &count, NULL, NULL, NULL), BAD_ARGUMENT,
              "cohort_gpu_monitor_stats: unknown metric 9");
    CHECK_ERR(cohort_gpu_monitor_stats(monitor, 0, -1, 1, &count, NULL, NULL, NULL), BAD_ARGUMENT, "metric -1");
    CHECK_ERR(cohort_gpu_monitor_stats(monitor, 0, COHORT_GPU_METRIC_POWER, -1, &count, NULL, NULL, NULL), BAD_ARGUMENT,
              "window_seconds must be 0 or more");
    CHECK_ERR(cohort_gpu_monitor_stats(monitor, 0, COHORT_GPU_METRIC_POWER, NAN, &count, NULL, NULL, NULL),
              BAD_ARGUMENT, "window_seconds");
    CHECK_ERR(cohort_gpu_monitor_stats(monitor, 0, COHORT_GPU_METRIC_POWER, 1, NULL, NULL, NULL, NULL), BAD_ARGUMENT,
              "count must not be NULL");
    CHECK_ERR(cohort_gpu_monitor_history(monitor, 0, NULL, NULL), BAD_ARGUMENT, "json must not be NULL");
    CHECK_ERR(cohort_gpu_monitor_latest(monitor, NULL, NULL), BAD_ARGUMENT, "json must not be NULL");
    CHECK_ERR(cohort_gpu_monitor_latest_summary(monitor, NULL), BAD_ARGUMENT, "out must not be NULL");
    CHECK_ERR(cohort_gpu_monitor_running(monitor, NULL), BAD_ARGUMENT, "running must not be NULL");
    CHECK_ERR(cohort_gpu_monitor_start(NULL), BAD_ARGUMENT, "cohort_gpu_monitor_start: monitor must not be NULL");
    CHECK_ERR(cohort_gpu_monitor_stop(NULL), BAD_ARGUMENT, "cohort_gpu_monitor_stop: monitor must not be NULL");
    CHECK_ERR(cohort_gpu_monitor_sample_now(NULL, NULL, NULL), BAD_ARGUMENT, "monitor must not be NULL");
    CHECK_ERR(cohort_gpu_monitor_latest(NULL, &json, NULL), BAD_ARGUMENT, "monitor must not be NULL");
    CHECK_ERR(cohort_gpu_monitor_history(NULL, 0, &json, NULL), BAD_ARGUMENT, "monitor must not be NULL");

    cohort_gpu_monitor_destroy(monitor);
    cohort_gpu_monitor_destroy(NULL);
}

static void test_monitor_rules(void) {
    cohort_gpu_monitor* monitor = make_monitor("io_rules.yaml", NULL);
    if (monitor == NULL) return;
    /* The first answer takes a sample itself. */
    double factor = -1;
    CHECK_OK(cohort_gpu_monitor_prefetch_factor(monitor, &factor));
    CHECK(factor == 0.25); /* GPU 0 is 90 % full */
    double delay = -1;
    CHECK_OK(cohort_gpu_monitor_transfer_delay(monitor, 2 * GIB, "dataset", &delay));
    CHECK(delay == 12.0); /* GPU 1 is hot, and the largest delay wins */
    CHECK_OK(cohort_gpu_monitor_transfer_delay(monitor, 2 * GIB, "model", &delay));
    CHECK(delay == 3.0);
    CHECK_OK(cohort_gpu_monitor_transfer_delay(monitor, 100, "model", &delay));
    CHECK(delay == 0.0);
    CHECK_ERR(cohort_gpu_monitor_transfer_delay(monitor, 100, NULL, &delay), BAD_ARGUMENT,
              "cohort_gpu_monitor_transfer_delay: kind must not be NULL");
    CHECK_ERR(cohort_gpu_monitor_transfer_delay(monitor, 100, "model", NULL), BAD_ARGUMENT, "seconds must not be NULL");
    CHECK_ERR(cohort_gpu_monitor_prefetch_factor(monitor, NULL), BAD_ARGUMENT,
              "cohort_gpu_monitor_prefetch_factor: factor must not be NULL");
    CHECK_ERR(cohort_gpu_monitor_prefetch_factor(NULL, &factor), BAD_ARGUMENT, "monitor must not be NULL");

    /* Publishing into a context of the caller's own rules. */
    static const char kCondition[] = "gpu_memory > 85 AND gpu1.temperature > 90 AND gpu_util > 95";
    cohort_expr* expr = NULL;
    cohort_context* context = NULL;
    CHECK_OK(cohort_expr_compile(kCondition, strlen(kCondition), NULL, &expr));
    CHECK_OK(cohort_context_from_expr(expr, &context));
    int32_t truth = -1;
    CHECK_OK(cohort_expr_test(expr, context, &truth));
    CHECK(truth == COHORT_TRUTH_UNKNOWN);
    CHECK_OK(cohort_gpu_monitor_publish(monitor, context));
    CHECK_OK(cohort_expr_test(expr, context, &truth));
    CHECK(truth == COHORT_TRUTH_YES);
    int32_t type = -1;
    char* text = NULL;
    CHECK_OK(cohort_context_get(context, "gpu_memory", &type, &text, NULL));
    CHECK(type == COHORT_TYPE_NUMBER && text != NULL && strcmp(text, "90") == 0);
    cohort_free(text);
    CHECK_ERR(cohort_gpu_monitor_publish(monitor, NULL), BAD_ARGUMENT,
              "cohort_gpu_monitor_publish: context must not be NULL");
    CHECK_ERR(cohort_gpu_monitor_publish(NULL, context), BAD_ARGUMENT, "monitor must not be NULL");
    cohort_context_destroy(context);
    cohort_expr_destroy(expr);
    cohort_gpu_monitor_destroy(monitor);

    /* NULL rules: the shipped rules/gpu_io.yaml. */
    monitor = make_monitor(NULL, NULL);
    if (monitor == NULL) return;
    CHECK_OK(cohort_gpu_monitor_prefetch_factor(monitor, &factor));
    CHECK(factor == 0.5);
    CHECK_OK(cohort_gpu_monitor_transfer_delay(monitor, GIB, "model", &delay));
    CHECK(delay == 30.0); /* GPU 1 is above 87 °C */
    /* The shipped hold is for transfers of priority below 10 only. */
    CHECK_OK(cohort_gpu_monitor_transfer_delay_for(monitor, GIB, "model", 9, 0, &delay));
    CHECK(delay == 30.0);
    CHECK_OK(cohort_gpu_monitor_transfer_delay_for(monitor, GIB, "model", 10, 1, &delay));
    CHECK(delay == 0.0);
    CHECK_OK(cohort_gpu_monitor_transfer_delay_for(monitor, GIB, "dataset", -5, 1, &delay));
    CHECK(delay == 30.0);
    CHECK_ERR(cohort_gpu_monitor_transfer_delay_for(monitor, GIB, "model", 0, 2, &delay), BAD_ARGUMENT,
              "cohort_gpu_monitor_transfer_delay_for: prefetch must be 0 or 1, not 2");
    CHECK_ERR(cohort_gpu_monitor_transfer_delay_for(monitor, GIB, NULL, 0, 0, &delay), BAD_ARGUMENT,
              "kind must not be NULL");
    CHECK_ERR(cohort_gpu_monitor_transfer_delay_for(monitor, GIB, "model", 0, 0, NULL), BAD_ARGUMENT,
              "seconds must not be NULL");
    CHECK_ERR(cohort_gpu_monitor_transfer_delay_for(NULL, GIB, "model", 0, 0, &delay), BAD_ARGUMENT,
              "monitor must not be NULL");
    cohort_gpu_monitor_destroy(monitor);
}

static void test_monitor_create_errors(void) {
    char path[1024];
    cohort_gpu_probe* probe = open_file_probe("gpus.yaml", 2.0);
    if (probe == NULL) return;
    cohort_gpu_monitor* monitor = NULL;
    cohort_gpu_monitor* untouched = (cohort_gpu_monitor*)&monitor;
    monitor = untouched;
    CHECK_ERR(cohort_gpu_monitor_create(NULL, 1.0, 10, NULL, &monitor), BAD_ARGUMENT,
              "cohort_gpu_monitor_create: probe must not be NULL");
    CHECK_ERR(cohort_gpu_monitor_create(probe, 1.0, 10, NULL, NULL), BAD_ARGUMENT, "out must not be NULL");
    CHECK_ERR(cohort_gpu_monitor_create(probe, 0, 10, NULL, &monitor), BAD_ARGUMENT,
              "cohort_gpu_monitor_create: interval_seconds must be a positive number of seconds, got 0");
    CHECK_ERR(cohort_gpu_monitor_create(probe, INFINITY, 10, NULL, &monitor), BAD_ARGUMENT, "interval_seconds");
    CHECK_ERR(cohort_gpu_monitor_create(probe, 1.0, 0, NULL, &monitor), BAD_ARGUMENT, "history must be at least 1");
    CHECK_ERR(cohort_gpu_monitor_create(probe, 1.0, 10, "/nonexistent/rules.yaml", &monitor), COHORT_ERR_IO,
              "/nonexistent/rules.yaml");
    CHECK_ERR(cohort_gpu_monitor_create(probe, 1.0, 10, data_file(path, sizeof path, "", "no_factor.yaml"), &monitor),
              COHORT_ERR_PARSE, "needs a parameter 'factor'");
    /* Past the C++ monitor's own one-day limit: refused before the probe moves. */
    CHECK_ERR(cohort_gpu_monitor_create(probe, 100000.0, 10, NULL, &monitor), BAD_ARGUMENT, "interval");
    CHECK(monitor == untouched);
    /* A monitor that failed to start leaves the probe usable. */
    char* json = NULL;
    CHECK_OK(cohort_gpu_probe_sample(probe, &json, NULL));
    CHECK_HAS(json, "\"health\":\"ok\"");
    cohort_free(json);
    cohort_gpu_probe_destroy(probe);

    /* A monitor over a failing GPU: samples say so, history stays empty. */
    probe = open_file_probe("failing.yaml", 1.0);
    if (probe == NULL) return;
    monitor = NULL;
    CHECK_OK(cohort_gpu_monitor_create(probe, 1.0, 10, NULL, &monitor));
    cohort_gpu_probe_destroy(probe); /* the monitor keeps the backend */
    json = NULL;
    CHECK_OK(cohort_gpu_monitor_sample_now(monitor, &json, NULL));
    CHECK_HAS(json, "\"health\":\"failed\"");
    cohort_free(json);
    CHECK_ERR(cohort_gpu_monitor_history(monitor, 0, &json, NULL), COHORT_ERR_NOT_FOUND, "it has no GPUs");
    cohort_gpu_monitor_destroy(monitor);
}

/* Runs every GPU test; returns the number of failures. */
int run_gpu_tests(void) {
    struct {
        const char* name;
        void (*run)(void);
    } tests[] = {
        {"gpu_backends", test_backends},
        {"gpu_probe_sample", test_probe_sample},
        {"gpu_probe_open", test_probe_open},
        {"gpu_probe_failures", test_probe_failures},
        {"gpu_monitor", test_monitor_history},
        {"gpu_monitor_rules", test_monitor_rules},
        {"gpu_monitor_create", test_monitor_create_errors},
    };
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; ++i) {
        int failed_before = gpu_failed;
        tests[i].run();
        printf("%-18s %s\n", tests[i].name, gpu_failed == failed_before ? "ok" : "FAILED");
    }
    printf("gpu: %d passed, %d failed\n", gpu_passed, gpu_failed);
    return gpu_failed;
}
