// The whole C++ API of cohort: every public header but export.hpp (the export
// macro, which each header includes itself). tests/api/check_umbrella.py
// checks that none is left out.
#pragma once

#include <cohort/autotune.hpp>
#include <cohort/communicator.hpp>
#include <cohort/coordinator.hpp>
#include <cohort/coordinator_client.hpp>
#include <cohort/coordinator_protocol.hpp>
#include <cohort/data_advisor.hpp>
#include <cohort/dataset.hpp>
#include <cohort/dtype.hpp>
#include <cohort/epoch.hpp>
#include <cohort/error.hpp>
#include <cohort/exit_cause.hpp>
#include <cohort/expression.hpp>
#include <cohort/format.hpp>
#include <cohort/gpu.hpp>
#include <cohort/gpu_monitor.hpp>
#include <cohort/gpu_probe.hpp>
#include <cohort/kubernetes.hpp>
#include <cohort/launch_env.hpp>
#include <cohort/membership.hpp>
#include <cohort/node.hpp>
#include <cohort/rank_order.hpp>
#include <cohort/reduce_op.hpp>
#include <cohort/role_group.hpp>
#include <cohort/rules.hpp>
#include <cohort/scaling.hpp>
#include <cohort/scheduler.hpp>
#include <cohort/sharding.hpp>
#include <cohort/shard_reader.hpp>
#include <cohort/shards.hpp>
#include <cohort/slurm_scheduler.hpp>
#include <cohort/store.hpp>
#include <cohort/topology.hpp>
#include <cohort/transfers.hpp>
#include <cohort/units.hpp>
#include <cohort/version.hpp>
#include <cohort/work.hpp>
#include <cohort/workloads.hpp>
