// What a cohort_membership holds: shared by the membership's C functions and
// the shard reader's, which takes one.
#pragma once

#include "cohort.h"

#include <cohort/membership.hpp>

struct cohort_membership {
    cohort::Membership impl;  // synchronises its own calls
};
