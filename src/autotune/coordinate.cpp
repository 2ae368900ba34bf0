// Coordinate descent over discrete grids: cost at most
// 1 + passes * sum(|grid| - 1) measured points, each a window of steps.
#include "autotune/search.hpp"

#include <map>

namespace cohort::autotune {
namespace {

class CoordinateDescent final : public Search {
public:
    CoordinateDescent(Space space, Point start, int passes, double min_gain)
        : space_(std::move(space)), incumbent_(std::move(start)), passes_(passes), min_gain_(min_gain) {
        for (std::size_t d = 0; d < space_.sizes.size(); ++d)
            if (space_.tunable[d] && space_.sizes[d] > 1) dims_.push_back(d);
    }

    std::optional<Point> next(const Point& measured, double score) override {
        scored_[measured] = score;
        if (!started_) {
            started_ = true;
            incumbent_score_ = score;
            if (dims_.empty()) return std::nullopt;
            start_sweep();
        } else {
            consider(measured[dims_[dim_]], score);
        }
        return advance();
    }

    Point best() const override { return incumbent_; }
    double best_score() const override { return incumbent_score_; }

    int64_t bound() const override {
        int64_t per_pass = 0;
        for (std::size_t d : dims_) per_pass += int64_t(space_.sizes[d]) - 1;
        return 1 + int64_t(passes_) * per_pass;
    }

private:
    void start_sweep() {
        const std::size_t d = dims_[dim_];
        queue_.clear();
        for (std::size_t i = 0; i < space_.sizes[d]; ++i)
            if (i != incumbent_[d]) queue_.push_back(i);
        sweep_best_ = incumbent_[d];
        sweep_best_score_ = incumbent_score_;
    }

    void consider(std::size_t index, double score) {
        if (score > sweep_best_score_) {
            sweep_best_ = index;
            sweep_best_score_ = score;
        }
    }

    std::optional<Point> advance() {
        for (;;) {
            while (!queue_.empty()) {
                Point p = incumbent_;
                p[dims_[dim_]] = queue_.front();
                queue_.erase(queue_.begin());
                if (auto it = scored_.find(p); it != scored_.end()) {
                    consider(p[dims_[dim_]], it->second);
                    continue;
                }
                return p;
            }
            const std::size_t d = dims_[dim_];
            if (sweep_best_ != incumbent_[d] && sweep_best_score_ > incumbent_score_ * (1 + min_gain_)) {
                incumbent_[d] = sweep_best_;
                incumbent_score_ = sweep_best_score_;
                moved_ = true;
            }
            if (++dim_ == dims_.size()) {
                if (!moved_ || ++pass_ >= passes_) return std::nullopt;
                dim_ = 0;
                moved_ = false;
            }
            start_sweep();
        }
    }

    Space space_;
    Point incumbent_;
    double incumbent_score_ = 0;
    int passes_;
    double min_gain_;
    std::vector<std::size_t> dims_;  // the parameters that move
    bool started_ = false;
    std::size_t dim_ = 0;  // into dims_
    int pass_ = 0;
    bool moved_ = false;   // this pass moved the incumbent
    std::vector<std::size_t> queue_;  // candidates of dims_[dim_] still to try
    std::size_t sweep_best_ = 0;
    double sweep_best_score_ = 0;
    std::map<Point, double> scored_;
};

}  // namespace

std::unique_ptr<Search> coordinate_descent(Space space, Point start, int passes, double min_gain) {
    return std::make_unique<CoordinateDescent>(std::move(space), std::move(start), passes, min_gain);
}

}  // namespace cohort::autotune
