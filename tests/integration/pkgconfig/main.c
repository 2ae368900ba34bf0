/* Built with `cc main.c $(pkg-config --cflags --libs cohort)` against the
 * installed cohort.pc: the C ABI as a C user meets it. */
#include <cohort.h>

#include <stdio.h>
#include <string.h>

static int failures;

static void expect(int ok, const char* what) {
    if (!ok) {
        fprintf(stderr, "pkg-config consumer: FAILED: %s (last error: %s)\n", what,
                cohort_last_error());
        ++failures;
    }
}

int main(void) {
    char version[32];
    snprintf(version, sizeof version, "%d.%d.%d", COHORT_VERSION_MAJOR, COHORT_VERSION_MINOR,
             COHORT_VERSION_PATCH);
    expect(strcmp(cohort_version(), version) == 0, "cohort_version() matches cohort.h");

    static const char listing[] = "a.bin 1000 10\nb.bin 3000\n";
    cohort_dataset* dataset = NULL;
    expect(cohort_dataset_load_string(listing, strlen(listing), COHORT_FORMAT_LISTING, "list.txt",
                                      &dataset) == COHORT_OK,
           "dataset_load_string");
    cohort_shards* shards = NULL;
    uint64_t count = 0;
    expect(cohort_shards_split(dataset, 1000, 0, &shards) == COHORT_OK, "shards_split");
    expect(cohort_shards_count(shards, &count) == COHORT_OK && count == 4, "4 shards of 1000 bytes");

    cohort_topology* topology = NULL;
    expect(cohort_topology_create(&topology) == COHORT_OK, "topology_create");
    expect(cohort_topology_add_node(topology, "n0", NULL, NULL, COHORT_ROLE_WORKER) == COHORT_OK, "add n0");
    expect(cohort_topology_add_node(topology, "n1", NULL, NULL, COHORT_ROLE_WORKER) == COHORT_OK, "add n1");
    cohort_plan_options* options = NULL;
    cohort_shard_plan* plan = NULL;
    expect(cohort_plan_options_create(&options) == COHORT_OK, "plan_options_create");
    expect(cohort_plan_options_set_strategy(options, COHORT_STRATEGY_ROUND_ROBIN) == COHORT_OK,
           "set_strategy");
    expect(cohort_shard_plan_create(shards, topology, options, &plan) == COHORT_OK, "plan_create");
    uint64_t load = 0;
    expect(cohort_shard_plan_member_load(plan, 1, &load) == COHORT_OK && load == 2, "2 shards each");
    char* json = NULL;
    size_t length = 0;
    expect(cohort_shard_plan_to_json(plan, &json, &length) == COHORT_OK && json != NULL &&
               strlen(json) == length,
           "plan_to_json");
    cohort_free(json);

    expect(cohort_shards_split(dataset, 0, 0, &shards) == COHORT_ERR_INVALID_ARGUMENT,
           "a bad split fails");
    expect(cohort_last_error()[0] != '\0', "with a message");

    cohort_shard_plan_destroy(plan);
    cohort_plan_options_destroy(options);
    cohort_topology_destroy(topology);
    cohort_shards_destroy(shards);
    cohort_dataset_destroy(dataset);
    if (failures != 0) return 1;
    printf("pkg-config consumer (cohort %s): ok\n", cohort_version());
    return 0;
}
