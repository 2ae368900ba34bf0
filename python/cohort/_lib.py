"""Finds libcohort, declares the prototype of every function in cohort.h and
turns the status codes it returns into exceptions (see errors.py).

The library is loaded on first use, so that ``import cohort`` and
``python -m cohort --help`` work even where it is missing.
"""

import ctypes
import ctypes.util
import os
import threading
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char, c_char_p, c_double, c_int,
                    c_int32, c_int64, c_size_t, c_uint8, c_uint16, c_uint32, c_uint64, c_void_p)

from .errors import LibraryNotFound, error_for

# The ABI major version this binding is written against (COHORT_VERSION_MAJOR).
ABI_MAJOR = 0

RECORDS_UNKNOWN = 2**64 - 1


def _opaque(name):
    return POINTER(type(name, (Structure,), {}))


topology_p = _opaque("cohort_topology")
rank_order_p = _opaque("cohort_rank_order")
dataset_p = _opaque("cohort_dataset")
shards_p = _opaque("cohort_shards")
plan_options_p = _opaque("cohort_plan_options")
shard_plan_p = _opaque("cohort_shard_plan")
symbols_p = _opaque("cohort_symbols")
expr_p = _opaque("cohort_expr")
context_p = _opaque("cohort_context")
rules_p = _opaque("cohort_rules")
gpu_probe_p = _opaque("cohort_gpu_probe")
gpu_monitor_p = _opaque("cohort_gpu_monitor")
comm_options_p = _opaque("cohort_comm_options")
comm_p = _opaque("cohort_comm")
work_p = _opaque("cohort_work")
launch_env_p = _opaque("cohort_launch_env")
coordinator_p = _opaque("cohort_coordinator")
coordinator_client_p = _opaque("cohort_coordinator_client")
membership_p = _opaque("cohort_membership")
workload_registry_p = _opaque("cohort_workload_registry")
transfer_scheduler_p = _opaque("cohort_transfer_scheduler")
transfer_p = _opaque("cohort_transfer")
transfer_actions_p = _opaque("cohort_transfer_actions")
autotune_options_p = _opaque("cohort_autotune_options")
autotuner_p = _opaque("cohort_autotuner")
shard_reader_p = _opaque("cohort_shard_reader")


class gpu_summary(Structure):
    _fields_ = [("time", c_double), ("latency_seconds", c_double), ("gpu_count", c_uint32),
                ("health", c_int32), ("stale", c_int32), ("process_count", c_uint32),
                ("memory_used_bytes", c_uint64), ("memory_total_bytes", c_uint64),
                ("max_memory_used_percent", c_double), ("max_memory_busy_percent", c_double),
                ("max_utilization_percent", c_double), ("max_temperature_celsius", c_double),
                ("max_power_watts", c_double)]


class reader_stats(Structure):
    _fields_ = [("data_wait_seconds", c_double), ("shards", c_uint64), ("bytes", c_uint64),
                ("prefetch_hits", c_uint64), ("prefetch_misses", c_uint64), ("failed", c_uint64),
                ("reported", c_uint64), ("ahead", c_uint32), ("max_ahead", c_uint32),
                ("depth", c_uint32), ("finished", c_int32)]


class rank_info(Structure):
    _fields_ = [("node_index", c_uint32), ("local_rank", c_int32),
                ("local_world_size", c_int32), ("node_rank", c_int32)]


# int64_t (*)(void* user_data, uint64_t shard, uint32_t replica,
#             const uint32_t* taken, uint32_t taken_count, uint32_t member_count)
assign_fn = CFUNCTYPE(c_int64, c_void_p, c_uint64, c_uint32, POINTER(c_uint32), c_uint32,
                      c_uint32)

# int32_t (*)(void* user_data, const char* rule, int64_t priority, const char* action_type,
#             const char* target, const char* parameters_json)
action_fn = CFUNCTYPE(c_int32, c_void_p, c_char_p, c_int64, c_char_p, c_char_p, c_char_p)


class transfer_stats(Structure):
    _fields_ = [(name, c_uint64) for name in (
        "queued", "held", "running", "submitted", "completed", "failed", "dropped", "delayed",
        "prioritized", "staged", "prefetch_waits", "misses", "bytes", "memory_pressure_events",
        "temperature_events", "prefetch_depth")] + [
        ("total_delay_seconds", c_double), ("bytes_per_second", c_double),
        ("prefetch_factor", c_double)]


# int32_t (*)(void* user_data, int64_t pid)
pid_alive_fn = CFUNCTYPE(c_int32, c_void_p, c_int64)
# int32_t (*)(void* user_data, const char* id, const char* workload, const char* kind,
#             uint64_t bytes, int64_t priority, int32_t prefetch, cohort_transfer_actions*)
transfer_policy_fn = CFUNCTYPE(c_int32, c_void_p, c_char_p, c_char_p, c_char_p, c_uint64, c_int64,
                               c_int32, transfer_actions_p)
# void (*)(void* user_data, const char* id, int32_t status, const char* result_json, size_t length)
transfer_done_fn = CFUNCTYPE(None, c_void_p, c_char_p, c_int32, c_char_p, c_size_t)
# int (*)(const char* name, double value, void* user_data)
tune_apply_fn = CFUNCTYPE(c_int, c_char_p, c_double, c_void_p)

_P = POINTER
_cstr_out = _P(c_char_p)          # const char** (borrowed)
_owned_out = _P(_P(c_char))       # char** (free with cohort_free)
_STATUS = c_int

# name: (restype, argtypes). _STATUS functions get an errcheck that raises.
PROTOTYPES = {
    "cohort_version": (c_char_p, []),
    "cohort_last_error": (c_char_p, []),
    "cohort_strerror": (c_char_p, [c_int]),
    "cohort_free": (None, [c_void_p]),
    # topology
    "cohort_topology_create": (_STATUS, [_P(topology_p)]),
    "cohort_topology_load_file": (_STATUS, [c_char_p, _P(topology_p)]),
    "cohort_topology_load_string": (_STATUS, [c_char_p, c_size_t, c_int32, c_char_p,
                                              _P(topology_p)]),
    "cohort_topology_destroy": (None, [topology_p]),
    "cohort_topology_add_node": (_STATUS, [topology_p, c_char_p, c_char_p, c_char_p, c_int32]),
    "cohort_topology_set_locality": (_STATUS, [topology_p, c_char_p, c_int32, c_char_p]),
    "cohort_topology_set_gpus": (_STATUS, [topology_p, c_char_p, c_uint32, c_uint64]),
    "cohort_topology_set_status": (_STATUS, [topology_p, c_char_p, c_int32]),
    "cohort_topology_node_count": (_STATUS, [topology_p, _P(c_uint32)]),
    "cohort_topology_find": (_STATUS, [topology_p, c_char_p, _P(c_uint32)]),
    "cohort_topology_node_str": (_STATUS, [topology_p, c_uint32, c_int32, _cstr_out]),
    "cohort_topology_node_info": (_STATUS, [topology_p, c_uint32, _P(c_int32), _P(c_int32),
                                            _P(c_uint32), _P(c_uint64)]),
    "cohort_topology_to_json": (_STATUS, [topology_p, _owned_out, _P(c_size_t)]),
    # rank order
    "cohort_rank_order_create": (_STATUS, [topology_p, c_uint32, _P(rank_order_p)]),
    "cohort_rank_order_destroy": (None, [rank_order_p]),
    "cohort_rank_order_size": (_STATUS, [rank_order_p, _P(c_int32)]),
    "cohort_rank_order_host_count": (_STATUS, [rank_order_p, _P(c_uint32)]),
    "cohort_rank_order_get": (_STATUS, [rank_order_p, c_int32, _P(rank_info)]),
    "cohort_rank_order_rank_of": (_STATUS, [rank_order_p, c_char_p, _P(c_int32)]),
    "cohort_rank_order_ring_crossings": (_STATUS, [rank_order_p, c_int32, _P(c_uint32)]),
    # dataset
    "cohort_dataset_create": (_STATUS, [_P(dataset_p)]),
    "cohort_dataset_load_file": (_STATUS, [c_char_p, _P(dataset_p)]),
    "cohort_dataset_load_string": (_STATUS, [c_char_p, c_size_t, c_int32, c_char_p,
                                             _P(dataset_p)]),
    "cohort_dataset_destroy": (None, [dataset_p]),
    "cohort_dataset_add_file": (_STATUS, [dataset_p, c_char_p, c_uint64, c_uint64]),
    "cohort_dataset_file_count": (_STATUS, [dataset_p, _P(c_uint32)]),
    "cohort_dataset_file": (_STATUS, [dataset_p, c_uint32, _cstr_out, _P(c_uint64),
                                      _P(c_uint64)]),
    "cohort_dataset_total_bytes": (_STATUS, [dataset_p, _P(c_uint64)]),
    # shards
    "cohort_shards_split": (_STATUS, [dataset_p, c_uint64, c_uint64, _P(shards_p)]),
    "cohort_shards_destroy": (None, [shards_p]),
    "cohort_shards_count": (_STATUS, [shards_p, _P(c_uint64)]),
    "cohort_shards_info": (_STATUS, [shards_p, c_uint64, _P(c_uint64), _P(c_uint64),
                                     _P(c_uint32)]),
    "cohort_shards_segment": (_STATUS, [shards_p, c_uint64, c_uint32, _P(c_uint32),
                                        _P(c_uint64), _P(c_uint64)]),
    # plan options
    "cohort_plan_options_create": (_STATUS, [_P(plan_options_p)]),
    "cohort_plan_options_destroy": (None, [plan_options_p]),
    "cohort_plan_options_set_strategy": (_STATUS, [plan_options_p, c_int32]),
    "cohort_plan_options_set_replication": (_STATUS, [plan_options_p, c_uint32]),
    "cohort_plan_options_set_seed": (_STATUS, [plan_options_p, c_uint64]),
    "cohort_plan_options_set_roles": (_STATUS, [plan_options_p, c_uint32]),
    "cohort_plan_options_set_load_slack": (_STATUS, [plan_options_p, c_double]),
    "cohort_plan_options_set_weights": (_STATUS, [plan_options_p, c_double, c_double,
                                                  c_double]),
    "cohort_plan_options_add_locality": (_STATUS, [plan_options_p, c_char_p, c_char_p,
                                                   c_double]),
    "cohort_plan_options_add_locality_file": (_STATUS, [plan_options_p, c_char_p]),
    "cohort_plan_options_set_custom": (_STATUS, [plan_options_p, assign_fn, c_void_p]),
    # shard plan
    "cohort_shard_plan_create": (_STATUS, [shards_p, topology_p, plan_options_p,
                                           _P(shard_plan_p)]),
    "cohort_shard_plan_replan": (_STATUS, [shard_plan_p, topology_p, plan_options_p,
                                           _P(shard_plan_p)]),
    "cohort_shard_plan_destroy": (None, [shard_plan_p]),
    "cohort_shard_plan_shard_count": (_STATUS, [shard_plan_p, _P(c_uint64)]),
    "cohort_shard_plan_replication": (_STATUS, [shard_plan_p, _P(c_uint32)]),
    "cohort_shard_plan_member_count": (_STATUS, [shard_plan_p, _P(c_uint32)]),
    "cohort_shard_plan_member_id": (_STATUS, [shard_plan_p, c_uint32, _cstr_out]),
    "cohort_shard_plan_owner": (_STATUS, [shard_plan_p, c_uint64, c_uint32, _P(c_uint32)]),
    "cohort_shard_plan_member_load": (_STATUS, [shard_plan_p, c_uint32, _P(c_uint64)]),
    "cohort_shard_plan_member_shards": (_STATUS, [shard_plan_p, c_uint32, _P(c_uint64),
                                                  c_size_t, _P(c_size_t)]),
    "cohort_shard_plan_moved": (_STATUS, [shard_plan_p, _P(c_uint64)]),
    "cohort_shard_plan_to_json": (_STATUS, [shard_plan_p, _owned_out, _P(c_size_t)]),
    # the data path's advisor
    "cohort_shard_plan_advise": (_STATUS, [shard_plan_p, c_char_p, _owned_out, _P(c_size_t)]),
    # epoch order
    "cohort_epoch_order": (_STATUS, [c_uint64, c_uint64, c_uint64, c_int32, c_int32,
                                     c_uint32, _P(c_uint64), c_size_t, _P(c_size_t)]),
    # symbols
    "cohort_symbols_create": (_STATUS, [_P(symbols_p)]),
    "cohort_symbols_destroy": (None, [symbols_p]),
    "cohort_symbols_declare": (_STATUS, [symbols_p, c_char_p, c_int32]),
    "cohort_symbols_count": (_STATUS, [symbols_p, _P(c_uint32)]),
    "cohort_symbols_find": (_STATUS, [symbols_p, c_char_p, _P(c_uint32)]),
    "cohort_symbols_name": (_STATUS, [symbols_p, c_uint32, _cstr_out, _P(c_int32)]),
    # expressions
    "cohort_expr_compile": (_STATUS, [c_char_p, c_size_t, symbols_p, _P(expr_p)]),
    "cohort_expr_destroy": (None, [expr_p]),
    "cohort_expr_text": (_STATUS, [expr_p, _cstr_out]),
    "cohort_expr_type": (_STATUS, [expr_p, _P(c_int32)]),
    "cohort_expr_variable_count": (_STATUS, [expr_p, _P(c_uint32)]),
    "cohort_expr_variable": (_STATUS, [expr_p, c_uint32, _cstr_out]),
    "cohort_expr_test": (_STATUS, [expr_p, context_p, _P(c_int32)]),
    "cohort_expr_evaluate": (_STATUS, [expr_p, context_p, _P(c_int32), _owned_out,
                                       _P(c_size_t)]),
    "cohort_expr_value": (_STATUS, [expr_p, context_p, _P(c_int32), _owned_out,
                                    _P(c_size_t)]),
    "cohort_expr_explain": (_STATUS, [expr_p, context_p, _owned_out, _P(c_size_t)]),
    # contexts
    "cohort_context_create": (_STATUS, [symbols_p, _P(context_p)]),
    "cohort_context_from_expr": (_STATUS, [expr_p, _P(context_p)]),
    "cohort_context_from_rules": (_STATUS, [rules_p, _P(context_p)]),
    "cohort_context_destroy": (None, [context_p]),
    "cohort_context_set_bool": (_STATUS, [context_p, c_char_p, c_int32]),
    "cohort_context_set_int": (_STATUS, [context_p, c_char_p, c_int64]),
    "cohort_context_set_number": (_STATUS, [context_p, c_char_p, c_double]),
    "cohort_context_set_string": (_STATUS, [context_p, c_char_p, c_char_p, c_size_t]),
    "cohort_context_set_text": (_STATUS, [context_p, c_char_p, c_char_p]),
    "cohort_context_slot": (_STATUS, [context_p, c_char_p, _P(c_uint32)]),
    "cohort_context_set_bool_at": (_STATUS, [context_p, c_uint32, c_int32]),
    "cohort_context_set_int_at": (_STATUS, [context_p, c_uint32, c_int64]),
    "cohort_context_set_number_at": (_STATUS, [context_p, c_uint32, c_double]),
    "cohort_context_set_string_at": (_STATUS, [context_p, c_uint32, c_char_p, c_size_t]),
    "cohort_context_unset": (_STATUS, [context_p, c_char_p]),
    "cohort_context_clear": (_STATUS, [context_p]),
    "cohort_context_get": (_STATUS, [context_p, c_char_p, _P(c_int32), _owned_out,
                                     _P(c_size_t)]),
    # rule engine
    "cohort_rules_create": (_STATUS, [c_uint32, _P(rules_p)]),
    "cohort_rules_destroy": (None, [rules_p]),
    "cohort_rules_on": (_STATUS, [rules_p, c_char_p, action_fn, c_void_p]),
    "cohort_rules_reload_file": (_STATUS, [rules_p, c_char_p]),
    "cohort_rules_reload_string": (_STATUS, [rules_p, c_char_p, c_size_t, c_int32, c_char_p]),
    "cohort_rules_evaluate": (_STATUS, [rules_p, context_p, c_double, _owned_out,
                                        _P(c_size_t)]),
    "cohort_rules_explain": (_STATUS, [rules_p, c_char_p, context_p, _owned_out,
                                       _P(c_size_t)]),
    "cohort_rules_state": (_STATUS, [rules_p, c_char_p, _P(c_int32)]),
    "cohort_rules_count": (_STATUS, [rules_p, _P(c_uint32)]),
    "cohort_rules_rule_id": (_STATUS, [rules_p, c_uint32, _cstr_out]),
    "cohort_rules_describe": (_STATUS, [rules_p, _owned_out, _P(c_size_t)]),
    "cohort_rules_check_file": (_STATUS, [c_char_p, _owned_out, _P(c_size_t)]),
    "cohort_rules_check_string": (_STATUS, [c_char_p, c_size_t, c_int32, c_char_p, _owned_out,
                                            _P(c_size_t)]),
    # gpu probe
    "cohort_gpu_backends": (_STATUS, [c_double, _owned_out, _P(c_size_t)]),
    "cohort_gpu_probe_open": (_STATUS, [c_char_p, c_double, _P(gpu_probe_p)]),
    "cohort_gpu_probe_destroy": (None, [gpu_probe_p]),
    "cohort_gpu_probe_backend": (_STATUS, [gpu_probe_p, _cstr_out]),
    "cohort_gpu_probe_selection": (_STATUS, [gpu_probe_p, _owned_out, _P(c_size_t)]),
    "cohort_gpu_probe_sample": (_STATUS, [gpu_probe_p, _owned_out, _P(c_size_t)]),
    "cohort_gpu_probe_sample_summary": (_STATUS, [gpu_probe_p, _P(gpu_summary)]),
    # gpu monitor
    "cohort_gpu_monitor_create": (_STATUS, [gpu_probe_p, c_double, c_uint32, c_char_p,
                                            _P(gpu_monitor_p)]),
    "cohort_gpu_monitor_destroy": (None, [gpu_monitor_p]),
    "cohort_gpu_monitor_start": (_STATUS, [gpu_monitor_p]),
    "cohort_gpu_monitor_stop": (_STATUS, [gpu_monitor_p]),
    "cohort_gpu_monitor_running": (_STATUS, [gpu_monitor_p, _P(c_int32)]),
    "cohort_gpu_monitor_sample_now": (_STATUS, [gpu_monitor_p, _owned_out, _P(c_size_t)]),
    "cohort_gpu_monitor_latest": (_STATUS, [gpu_monitor_p, _owned_out, _P(c_size_t)]),
    "cohort_gpu_monitor_latest_summary": (_STATUS, [gpu_monitor_p, _P(gpu_summary)]),
    "cohort_gpu_monitor_history": (_STATUS, [gpu_monitor_p, c_uint32, _owned_out,
                                             _P(c_size_t)]),
    "cohort_gpu_monitor_stats": (_STATUS, [gpu_monitor_p, c_uint32, c_int32, c_double,
                                           _P(c_uint64), _P(c_double), _P(c_double),
                                           _P(c_double)]),
    "cohort_gpu_monitor_publish": (_STATUS, [gpu_monitor_p, context_p]),
    "cohort_gpu_monitor_prefetch_factor": (_STATUS, [gpu_monitor_p, _P(c_double)]),
    "cohort_gpu_monitor_transfer_delay_for": (_STATUS, [gpu_monitor_p, c_uint64, c_char_p, c_int32,
                                                        c_int32, _P(c_double)]),
    "cohort_gpu_monitor_transfer_delay": (_STATUS, [gpu_monitor_p, c_uint64, c_char_p,
                                                    _P(c_double)]),
    # collectives: names
    "cohort_dtype_name": (c_char_p, [c_int32]),
    "cohort_reduce_op_name": (c_char_p, [c_int32]),
    "cohort_algorithm_name": (c_char_p, [c_int32]),
    "cohort_transport_name": (c_char_p, [c_int32]),
    "cohort_dtype_size": (c_size_t, [c_int32]),
    "cohort_dtype_parse": (_STATUS, [c_char_p, _P(c_int32)]),
    "cohort_reduce_op_parse": (_STATUS, [c_char_p, _P(c_int32)]),
    "cohort_algorithm_parse": (_STATUS, [c_char_p, _P(c_int32)]),
    # communicator options
    "cohort_comm_options_create": (_STATUS, [_P(comm_options_p)]),
    "cohort_comm_options_destroy": (None, [comm_options_p]),
    "cohort_comm_options_set_store": (_STATUS, [comm_options_p, c_char_p]),
    "cohort_comm_options_set_job_id": (_STATUS, [comm_options_p, c_char_p]),
    "cohort_comm_options_set_generation": (_STATUS, [comm_options_p, c_uint64]),
    "cohort_comm_options_set_timeout": (_STATUS, [comm_options_p, c_double]),
    "cohort_comm_options_set_connect_timeout": (_STATUS, [comm_options_p, c_double]),
    "cohort_comm_options_set_secret": (_STATUS, [comm_options_p, c_char_p, c_size_t]),
    "cohort_comm_options_set_tls": (_STATUS, [comm_options_p, c_char_p, c_char_p, c_char_p]),
    "cohort_comm_options_set_address": (_STATUS, [comm_options_p, c_char_p]),
    "cohort_comm_options_set_ifname": (_STATUS, [comm_options_p, c_char_p]),
    "cohort_comm_options_set_host_label": (_STATUS, [comm_options_p, c_char_p]),
    "cohort_comm_options_set_fusion_threshold": (_STATUS, [comm_options_p, c_uint64]),
    "cohort_comm_options_set_socket_buffer": (_STATUS, [comm_options_p, c_uint64]),
    "cohort_comm_options_set_max_frame": (_STATUS, [comm_options_p, c_uint64]),
    "cohort_comm_options_set_shm_size": (_STATUS, [comm_options_p, c_uint64]),
    # communicator
    "cohort_comm_create": (_STATUS, [c_int32, c_int32, comm_options_p, _P(comm_p)]),
    "cohort_comm_destroy": (None, [comm_p]),
    "cohort_comm_close": (_STATUS, [comm_p]),
    "cohort_comm_rank": (_STATUS, [comm_p, _P(c_int32)]),
    "cohort_comm_size": (_STATUS, [comm_p, _P(c_int32)]),
    "cohort_comm_is_broken": (_STATUS, [comm_p, _P(c_int32)]),
    "cohort_comm_abort": (_STATUS, [comm_p, c_char_p]),
    "cohort_comm_broken_reason": (_STATUS, [comm_p, _owned_out, _P(c_size_t)]),
    "cohort_comm_host": (_STATUS, [comm_p, c_int32, _cstr_out]),
    "cohort_comm_dead_ranks": (_STATUS, [comm_p, _P(c_int32), c_size_t, _P(c_size_t)]),
    "cohort_comm_choose": (_STATUS, [comm_p, c_uint64, _P(c_int32)]),
    "cohort_comm_transport": (_STATUS, [comm_p, c_int32, _P(c_int32)]),
    "cohort_comm_describe": (_STATUS, [comm_p, _owned_out, _P(c_size_t)]),
    # collectives (buffers as c_void_p: addresses of the caller's memory)
    "cohort_comm_allreduce": (_STATUS, [comm_p, c_void_p, c_void_p, c_uint64, c_int32, c_int32,
                                        c_int32, c_double]),
    "cohort_comm_broadcast": (_STATUS, [comm_p, c_void_p, c_uint64, c_int32, c_double]),
    "cohort_comm_barrier": (_STATUS, [comm_p, c_double]),
    "cohort_comm_allgather": (_STATUS, [comm_p, c_void_p, c_void_p, c_uint64, c_double]),
    "cohort_comm_reduce_scatter": (_STATUS, [comm_p, c_void_p, c_void_p, c_uint64, c_int32,
                                             c_int32, c_double]),
    "cohort_comm_allreduce_named": (_STATUS, [comm_p, c_size_t, _P(c_char_p), _P(c_void_p),
                                              _P(c_uint64), _P(c_int32), c_int32, c_double]),
    "cohort_comm_allreduce_async": (_STATUS, [comm_p, c_void_p, c_void_p, c_uint64, c_int32,
                                              c_int32, c_int32, c_double, _P(work_p)]),
    "cohort_comm_broadcast_async": (_STATUS, [comm_p, c_void_p, c_uint64, c_int32, c_double,
                                              _P(work_p)]),
    "cohort_comm_barrier_async": (_STATUS, [comm_p, c_double, _P(work_p)]),
    "cohort_comm_allgather_async": (_STATUS, [comm_p, c_void_p, c_void_p, c_uint64, c_double,
                                              _P(work_p)]),
    "cohort_comm_reduce_scatter_async": (_STATUS, [comm_p, c_void_p, c_void_p, c_uint64,
                                                   c_int32, c_int32, c_double, _P(work_p)]),
    # work
    "cohort_work_test": (_STATUS, [work_p, _P(c_int32)]),
    "cohort_work_wait": (_STATUS, [work_p, c_double]),
    "cohort_work_destroy": (None, [work_p]),
    # launch environment
    "cohort_launch_env_from_env": (_STATUS, [_P(launch_env_p)]),
    "cohort_launch_env_destroy": (None, [launch_env_p]),
    "cohort_launch_env_rank": (_STATUS, [launch_env_p, _P(c_int32)]),
    "cohort_launch_env_world_size": (_STATUS, [launch_env_p, _P(c_int32)]),
    "cohort_launch_env_local_rank": (_STATUS, [launch_env_p, _P(c_int32)]),
    "cohort_launch_env_local_world_size": (_STATUS, [launch_env_p, _P(c_int32)]),
    "cohort_launch_env_node_rank": (_STATUS, [launch_env_p, _P(c_int32)]),
    "cohort_launch_env_store": (_STATUS, [launch_env_p, _cstr_out]),
    "cohort_launch_env_source": (_STATUS, [launch_env_p, _cstr_out]),
    "cohort_launch_env_note_count": (_STATUS, [launch_env_p, _P(c_uint32)]),
    "cohort_launch_env_note": (_STATUS, [launch_env_p, c_uint32, _cstr_out]),
    "cohort_comm_from_env": (_STATUS, [comm_options_p, _cstr_out, _P(comm_p)]),
    # coordinator: hosted in-process
    "cohort_coordinator_create": (_STATUS, [c_char_p, c_uint16, c_char_p, c_char_p,
                                            _P(coordinator_p)]),
    "cohort_coordinator_from_json": (_STATUS, [c_char_p, _P(coordinator_p)]),
    "cohort_coordinator_destroy": (None, [coordinator_p]),
    "cohort_coordinator_port": (_STATUS, [coordinator_p, _P(c_uint16)]),
    "cohort_coordinator_url": (_STATUS, [coordinator_p, _cstr_out]),
    # coordinator client
    "cohort_coordinator_client_create": (_STATUS, [c_char_p, c_char_p, c_double, c_double,
                                             _P(coordinator_client_p)]),
    "cohort_coordinator_client_destroy": (None, [coordinator_client_p]),
    "cohort_coordinator_client_ensure_job": (_STATUS, [coordinator_client_p, c_char_p, c_char_p]),
    "cohort_coordinator_client_job_state": (_STATUS, [coordinator_client_p, c_char_p, _owned_out,
                                                _P(c_size_t)]),
    "cohort_coordinator_client_join": (_STATUS, [coordinator_client_p, c_char_p, c_char_p, c_char_p, c_char_p,
                                           _P(c_uint64), _P(c_int32), _P(c_int32)]),
    "cohort_coordinator_client_heartbeat": (_STATUS, [coordinator_client_p, c_char_p, c_char_p, c_uint64,
                                                c_int64, c_double, c_double, _P(c_uint64),
                                                _P(c_int32), _P(c_int32)]),
    "cohort_coordinator_client_leave": (_STATUS, [coordinator_client_p, c_char_p, c_char_p]),
    "cohort_coordinator_client_leave_failed": (_STATUS, [coordinator_client_p, c_char_p, c_char_p, c_char_p]),
    "cohort_coordinator_client_world": (_STATUS, [coordinator_client_p, c_char_p, c_char_p, _owned_out,
                                            _P(c_size_t)]),
    "cohort_coordinator_client_wait_for_world": (_STATUS, [coordinator_client_p, c_char_p, c_char_p, c_double,
                                                     _owned_out, _P(c_size_t)]),
    "cohort_coordinator_client_store_set": (_STATUS, [coordinator_client_p, c_char_p, c_uint64, c_char_p,
                                                c_char_p, c_size_t]),
    "cohort_coordinator_client_store_get": (_STATUS, [coordinator_client_p, c_char_p, c_uint64, c_char_p,
                                                c_double, _owned_out, _P(c_size_t)]),
    "cohort_coordinator_client_store_add": (_STATUS, [coordinator_client_p, c_char_p, c_uint64, c_char_p, c_int64,
                                                _P(c_int64)]),
    "cohort_coordinator_client_store_compare_and_set": (_STATUS, [coordinator_client_p, c_char_p, c_uint64, c_char_p,
                                                            c_void_p, c_size_t, c_void_p, c_size_t,
                                                            _P(c_int32), _owned_out, _P(c_size_t)]),
    "cohort_coordinator_client_store_wait": (_STATUS, [coordinator_client_p, c_char_p, c_uint64, _P(c_char_p),
                                                 c_size_t, c_double]),
    "cohort_coordinator_client_store_delete": (_STATUS, [coordinator_client_p, c_char_p, c_uint64, c_char_p,
                                                   _P(c_int32)]),
    "cohort_coordinator_client_heartbeat_json": (_STATUS, [coordinator_client_p, c_char_p, c_char_p, c_uint64,
                                                     c_char_p, _owned_out, _P(c_size_t)]),
    "cohort_coordinator_client_register_dataset": (_STATUS, [coordinator_client_p, c_char_p, c_char_p]),
    "cohort_coordinator_client_next_shard": (_STATUS, [coordinator_client_p, c_char_p, c_char_p, _owned_out,
                                                 _P(c_size_t)]),
    "cohort_coordinator_client_shard_done": (_STATUS, [coordinator_client_p, c_char_p, c_char_p,
                                                       c_uint64, _P(c_int32)]),
    "cohort_coordinator_client_shard_release": (_STATUS, [coordinator_client_p, c_char_p, c_char_p,
                                                          c_uint64, _P(c_int32)]),
    # membership
    "cohort_membership_create": (_STATUS, [c_char_p, c_char_p, c_char_p, c_char_p,
                                           _P(membership_p)]),
    "cohort_membership_from_env": (_STATUS, [_P(membership_p)]),
    "cohort_membership_destroy": (None, [membership_p]),
    "cohort_membership_member": (_STATUS, [membership_p, _cstr_out]),
    "cohort_membership_job": (_STATUS, [membership_p, _cstr_out]),
    "cohort_membership_next_world": (_STATUS, [membership_p, c_double, _owned_out, _P(c_size_t)]),
    "cohort_membership_round_pending": (_STATUS, [membership_p, _P(c_int32)]),
    "cohort_membership_request_round": (_STATUS, [membership_p, _P(c_int32)]),
    "cohort_membership_report_dead": (_STATUS, [membership_p, comm_p, _P(c_int32), _P(c_int32)]),
    "cohort_comm_from_membership": (_STATUS, [membership_p, _P(comm_p)]),
    "cohort_membership_record_step": (_STATUS, [membership_p, c_uint64, c_double, c_double,
                                                c_double, c_double]),
    "cohort_membership_set_collective": (_STATUS, [membership_p, c_uint64, c_int32]),
    "cohort_membership_set_gpu_json": (_STATUS, [membership_p, c_char_p]),
    "cohort_membership_next_shard": (_STATUS, [membership_p, _owned_out, _P(c_size_t)]),
    "cohort_membership_shard_done": (_STATUS, [membership_p, c_uint64, _P(c_int32)]),
    "cohort_membership_shard_release": (_STATUS, [membership_p, c_uint64, _P(c_int32)]),
    "cohort_membership_leave": (_STATUS, [membership_p]),
    # data path: workloads and transfers
    "cohort_workload_registry_create": (_STATUS, [pid_alive_fn, c_void_p,
                                                  _P(workload_registry_p)]),
    "cohort_workload_registry_destroy": (None, [workload_registry_p]),
    "cohort_workload_registry_add": (_STATUS, [workload_registry_p, c_char_p]),
    "cohort_workload_registry_remove": (_STATUS, [workload_registry_p, c_char_p]),
    "cohort_workload_registry_update": (_STATUS, [workload_registry_p, c_char_p, c_double,
                                                  c_uint64, c_double]),
    "cohort_workload_registry_observe_monitor": (_STATUS, [workload_registry_p, gpu_monitor_p]),
    "cohort_workload_registry_observe_memory": (_STATUS, [workload_registry_p, _P(c_int64),
                                                          _P(c_uint64), c_size_t]),
    "cohort_workload_registry_find": (_STATUS, [workload_registry_p, c_char_p, _owned_out,
                                                _P(c_size_t)]),
    "cohort_workload_registry_list": (_STATUS, [workload_registry_p, _owned_out, _P(c_size_t)]),
    "cohort_workload_registry_prune": (_STATUS, [workload_registry_p, _owned_out, _P(c_size_t)]),
    "cohort_workload_registry_size": (_STATUS, [workload_registry_p, _P(c_uint64)]),
    "cohort_transfer_actions_add": (_STATUS, [transfer_actions_p, c_char_p, c_char_p, c_char_p,
                                              c_double, c_double, _P(c_int32)]),
    "cohort_transfer_actions_add_value": (_STATUS, [transfer_actions_p, c_char_p, c_double]),
    "cohort_transfer_actions_set_error": (_STATUS, [transfer_actions_p, c_char_p]),
    "cohort_transfer_scheduler_create": (_STATUS, [c_char_p, workload_registry_p, gpu_monitor_p,
                                                   transfer_policy_fn, c_void_p,
                                                   _P(transfer_scheduler_p)]),
    "cohort_transfer_scheduler_destroy": (None, [transfer_scheduler_p]),
    "cohort_transfer_submit": (_STATUS, [transfer_scheduler_p, c_char_p, c_void_p, c_uint64,
                                         transfer_done_fn, c_void_p, _P(transfer_p)]),
    "cohort_transfer_destroy": (None, [transfer_p]),
    "cohort_transfer_id": (_STATUS, [transfer_p, _cstr_out]),
    "cohort_transfer_test": (_STATUS, [transfer_p, _P(c_int32)]),
    "cohort_transfer_wait": (_STATUS, [transfer_p, c_double]),
    "cohort_transfer_result": (_STATUS, [transfer_p, _owned_out, _P(c_size_t)]),
    "cohort_transfer_scheduler_explain": (_STATUS, [transfer_scheduler_p, c_char_p, _owned_out,
                                                    _P(c_size_t)]),
    "cohort_transfer_scheduler_stats": (_STATUS, [transfer_scheduler_p, _P(transfer_stats)]),

    # role groups
    "cohort_role_job": (_STATUS, [c_char_p, c_char_p, _owned_out, _P(c_size_t)]),
    "cohort_membership_from_role": (_STATUS, [c_char_p, c_char_p, c_char_p, c_char_p, c_char_p,
                                              _P(membership_p)]),
    "cohort_membership_role": (_STATUS, [membership_p, _cstr_out]),

    # autotuning
    "cohort_comm_tuning": (_STATUS, [comm_p, c_char_p, _P(c_uint64)]),
    "cohort_comm_set_tuning": (_STATUS, [comm_p, c_char_p, c_uint64]),
    "cohort_autotune_options_create": (_STATUS, [_P(autotune_options_p)]),
    "cohort_autotune_options_destroy": (None, [autotune_options_p]),
    "cohort_autotune_options_set_job_id": (_STATUS, [autotune_options_p, c_char_p]),
    "cohort_autotune_options_set_search": (_STATUS, [autotune_options_p, c_int32]),
    "cohort_autotune_options_set_steps": (_STATUS, [autotune_options_p, c_int32, c_int32, c_int32,
                                                    c_int32]),
    "cohort_autotune_options_set_max_seconds": (_STATUS, [autotune_options_p, c_double]),
    "cohort_autotune_options_set_state_file": (_STATUS, [autotune_options_p, c_char_p]),
    "cohort_autotune_options_fix": (_STATUS, [autotune_options_p, c_char_p, c_double]),
    "cohort_autotune_options_add_parameter": (_STATUS, [autotune_options_p, c_char_p, _P(c_double),
                                                        c_size_t, c_double, c_int32, tune_apply_fn,
                                                        c_void_p]),
    "cohort_autotuner_create": (_STATUS, [comm_p, autotune_options_p, _P(autotuner_p)]),
    "cohort_autotuner_destroy": (None, [autotuner_p]),
    "cohort_autotuner_step": (_STATUS, [autotuner_p, c_double, _P(c_int32), _P(c_int32)]),
    "cohort_autotuner_value": (_STATUS, [autotuner_p, c_char_p, _P(c_double)]),
    "cohort_autotuner_step_bound": (_STATUS, [autotuner_p, _P(c_int64)]),
    "cohort_autotuner_report": (_STATUS, [autotuner_p, _owned_out, _P(c_size_t)]),

    # data path: the shard reader
    "cohort_shard_reader_from_membership": (_STATUS, [membership_p, shards_p, transfer_scheduler_p, c_char_p,
                                                      _P(shard_reader_p)]),
    "cohort_shard_reader_create": (_STATUS, [coordinator_client_p, c_char_p, c_char_p, shards_p,
                                             transfer_scheduler_p, c_char_p, _P(shard_reader_p)]),
    "cohort_shard_reader_destroy": (None, [shard_reader_p]),
    "cohort_shard_reader_next": (_STATUS, [shard_reader_p, c_double, _P(c_int32), _P(c_uint64), _P(c_uint64),
                                           _P(c_uint32), _cstr_out, _P(_P(c_uint8)), _P(c_uint64)]),
    "cohort_shard_reader_done": (_STATUS, [shard_reader_p, c_uint64, _P(c_int32)]),
    "cohort_shard_reader_stats": (_STATUS, [shard_reader_p, _P(reader_stats)]),
    "cohort_shards_plan_json": (_STATUS, [shards_p, c_uint32, _owned_out, _P(c_size_t)]),
    "cohort_membership_add_data_wait": (_STATUS, [membership_p, c_double]),
}

_lock = threading.Lock()
_lib = None
_path = None


def _check(status, func, args):
    """errcheck for status-returning functions: raise on anything but COHORT_OK."""
    if status != 0:
        message = _lib.cohort_last_error()
        text = message.decode("utf-8", "replace") if message else ""
        raise error_for(status, text or f"{func.__name__} failed")
    return status


def _declare(lib):
    for name, (restype, argtypes) in PROTOTYPES.items():
        try:
            func = getattr(lib, name)
        except AttributeError:
            raise AttributeError(f"it lacks {name}: it was built from an older cohort.h; "
                                 "rebuild it") from None
        func.restype = restype
        func.argtypes = argtypes
        if restype is _STATUS:
            func.errcheck = _check


def _candidates():
    """Paths (or, last, names for the dynamic loader) to try, in lookup order."""
    names = ("libcohort.so.0", "libcohort.so")
    here = os.path.dirname(os.path.abspath(__file__))
    dirs = [here]
    if os.environ.get("COHORT_BUILD_DIR"):
        dirs.append(os.environ["COHORT_BUILD_DIR"])
    dirs.append(os.path.normpath(os.path.join(here, "..", "..", "build")))
    # Installed layout: PREFIX/share/cohort/python/cohort next to PREFIX/lib*.
    parts = here.split(os.sep)
    if parts[-4:-1] == ["share", "cohort", "python"]:
        prefix = os.sep.join(parts[:-4]) or os.sep
        for libdir in ("lib", "lib64", os.path.join("lib", "x86_64-linux-gnu"),
                       os.path.join("lib", "aarch64-linux-gnu")):
            dirs.append(os.path.join(prefix, libdir))
    for d in dirs:
        for name in names:
            yield os.path.join(d, name)
    found = ctypes.util.find_library("cohort")
    if found:
        yield found
    yield "libcohort.so.0"


def _try(path, tried):
    """Loads one candidate; returns the CDLL or None, noting why in `tried`."""
    if os.sep in path and not os.path.exists(path):
        tried.append(f"{path} (no such file)")
        return None
    try:
        lib = ctypes.CDLL(path)
        _declare(lib)
    except (OSError, AttributeError) as exc:
        tried.append(f"{path} ({exc})")
        return None
    version = lib.cohort_version().decode()
    if version.split(".")[0] != str(ABI_MAJOR):
        tried.append(f"{path} (version {version}; this binding needs {ABI_MAJOR}.x)")
        return None
    return lib


def load():
    """The loaded library (a ctypes.CDLL); raises LibraryNotFound."""
    global _lib, _path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        explicit = os.environ.get("COHORT_LIBRARY")
        candidates = [explicit] if explicit else _candidates()
        for path in candidates:
            lib = _try(path, tried)
            if lib is not None:
                _path = path
                _lib = lib
                return lib
        where = "COHORT_LIBRARY" if explicit else "the package folder, COHORT_BUILD_DIR, " \
            "the build tree and the system"
        raise LibraryNotFound(
            f"cannot load libcohort (looked in {where}):\n  " + "\n  ".join(tried) +
            "\nBuild it (cmake --build build) or set COHORT_LIBRARY to the path of "
            "libcohort.so.")


def path():
    """Where the loaded library came from."""
    load()
    return _path
