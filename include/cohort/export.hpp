// COHORT_API marks what the shared library exports; everything else is
// hidden (-fvisibility=hidden). capi/cohort.h defines the same macro for C.
#pragma once

#ifndef COHORT_API
#if defined(COHORT_BUILDING_LIBRARY)
#define COHORT_API __attribute__((visibility("default")))
#else
#define COHORT_API
#endif
#endif
