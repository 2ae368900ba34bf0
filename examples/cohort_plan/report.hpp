// cohort-plan's output: tables for people, JSON for programs.
#pragma once

#include <cohort/cohort.hpp>

#include <optional>
#include <string>

namespace cohort_plan {

struct Report {
    const cohort::RankOrder& order;
    const cohort::ShardPlan& plan;
    const cohort::ShardPlan* replanned;  // after --remove, else null
    std::vector<std::string> removed;
    uint64_t limit;
    const cohort::DataAdvice* advice;  // after --advise, else null
};

void print_tables(const Report& report);
void print_json(const Report& report);
// advice.cpp: the --advise tables.
void print_advice(const cohort::DataAdvice& advice, uint64_t limit);

}  // namespace cohort_plan
