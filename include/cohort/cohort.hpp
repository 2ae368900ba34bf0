// The whole C++ API of cohort.
#pragma once

#include <cohort/dataset.hpp>
#include <cohort/epoch.hpp>
#include <cohort/error.hpp>
#include <cohort/expression.hpp>
#include <cohort/format.hpp>
#include <cohort/gpu.hpp>
#include <cohort/gpu_monitor.hpp>
#include <cohort/gpu_probe.hpp>
#include <cohort/node.hpp>
#include <cohort/rank_order.hpp>
#include <cohort/rules.hpp>
#include <cohort/sharding.hpp>
#include <cohort/shards.hpp>
#include <cohort/topology.hpp>
#include <cohort/units.hpp>
#include <cohort/version.hpp>
