// Helpers shared by the coordinator state tests.
#pragma once

#include "coordinator/state/json_parse.hpp"
#include "coordinator/state/state.hpp"
#include "core/json_text.hpp"

#include <cohort/error.hpp>

#include <gtest/gtest.h>

#include <string>
#include <string_view>

namespace cohort::coord::testing {

// Runs f and expects an Error of `code` whose message contains `text`.
template <class F>
void expect_error(F&& f, Errc code, std::string_view text) {
    try {
        f();
        ADD_FAILURE() << "expected an error containing: " << text;
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), code) << e.what();
        EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
}

// Replaying the events through their JSON text, and reloading the snapshot
// through its text, both give the state back exactly.
inline void expect_replays(CoordinatorState& state) {
    CoordinatorState replayed;
    for (const Event& e : state.take_events()) replayed.apply(event_from_json(parse_json(detail::to_text(to_json(e)))));
    const auto original = state.snapshot();
    EXPECT_EQ(replayed.snapshot(), original);
    EXPECT_EQ(CoordinatorState::from_snapshot(parse_json(detail::to_text(original))).snapshot(), original);
}

}  // namespace cohort::coord::testing
