// cohort-run's terminal status row: what it says at each width, and the
// step rate it shows.
#include "status_bar.hpp"

#include <gtest/gtest.h>

#include <string>

namespace cohort_run {
namespace {

StatusView running() {
    StatusView v;
    v.phase = "running";
    v.generation = 3;
    v.world_size = 4;
    v.epoch = 2;
    v.epochs = 5;
    v.shards_done = 16;
    v.shards_total = 64;
    v.steps_per_sec = 9.75;
    v.samples_per_sec = 12840;
    v.failures = 1;
    v.elapsed = 83;
    return v;
}

TEST(StatusText, SaysEverythingWithABarWhenThereIsRoom) {
    const std::string line = status_text(running(), 120);
    EXPECT_EQ(line,
              "01:23 running gen 3 world 4 epoch 2/5 [#######------------------------] 25% 16/64 9.8 steps/s "
              "12.8k samples/s failures 1")
        << line;
    EXPECT_EQ(line.size(), 120u);  // the bar takes what the rest leaves
}

TEST(StatusText, ANarrowTerminalDropsTheBarThenCuts) {
    const std::string mid = status_text(running(), 80);
    EXPECT_EQ(mid.find('['), std::string::npos) << mid;  // no room for 10 cells
    EXPECT_NE(mid.find(" epoch 2/5 25% 16/64 9.8 steps/s"), std::string::npos) << mid;
    EXPECT_LE(mid.size(), 80u);
    const std::string narrow = status_text(running(), 30);
    EXPECT_EQ(narrow, "01:23 running gen 3 world 4 ep");
}

TEST(StatusText, BeforeTheDataAndTheFirstRate) {
    StatusView v;
    v.elapsed = 3725;
    const std::string line = status_text(v, 100);
    EXPECT_EQ(line, "1:02:05 starting gen 0 world 0 - steps/s 0.0 samples/s") << line;
}

TEST(StatusText, ADoneEpochFillsTheBar) {
    StatusView v = running();
    v.shards_done = 64;
    v.failures = 0;
    const std::string line = status_text(v, 100);
    const std::size_t open = line.find('['), close = line.find("] 100% 64/64");
    ASSERT_NE(open, std::string::npos) << line;
    ASSERT_NE(close, std::string::npos) << line;
    EXPECT_EQ(line.substr(open + 1, close - open - 1), std::string(close - open - 1, '#')) << line;
    EXPECT_EQ(line.find("failures"), std::string::npos) << line;
}

TEST(StepRate, CountsStepsOverItsWindowAndStartsAgainWhenTheStepGoesBack) {
    StepRate rate(2.0);
    EXPECT_FALSE(rate.update(0.0, 100).has_value());
    EXPECT_FALSE(rate.update(0.5, 105).has_value());  // under half the window
    EXPECT_DOUBLE_EQ(*rate.update(1.0, 110), 10.0);
    EXPECT_DOUBLE_EQ(*rate.update(2.0, 130), 15.0);  // 30 steps in 2 s; the window starts again here
    EXPECT_DOUBLE_EQ(*rate.update(2.5, 131), 15.0);  // too soon to say
    EXPECT_DOUBLE_EQ(*rate.update(3.0, 134), 4.0);
    EXPECT_FALSE(rate.update(3.5, 20).has_value());  // a restart from a checkpoint
    EXPECT_DOUBLE_EQ(*rate.update(4.5, 40), 20.0);
}

}  // namespace
}  // namespace cohort_run
