// The searches an Autotuner runs: each is told the score of the point it
// proposed last and proposes the next, until it is done. A point holds an
// index into every parameter's candidates; fixed parameters never move.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace cohort::autotune {

using Point = std::vector<std::size_t>;

struct Space {
    std::vector<std::size_t> sizes;  // candidates per parameter
    std::vector<bool> tunable;       // false: fixed, never moved
};

class Search {
public:
    virtual ~Search() = default;
    // `score` is the median throughput measured at `measured` (the start
    // first, then each point this returned). The next point to measure, or
    // nothing: the search is over.
    virtual std::optional<Point> next(const Point& measured, double score) = 0;
    // The point to freeze on and its score (the start's before any score).
    virtual Point best() const = 0;
    virtual double best_score() const = 0;
    // The most points it measures, the start included.
    virtual int64_t bound() const = 0;
};

// One parameter at a time, every other candidate of its grid with the rest
// held at the incumbent; the sweep's best replaces the incumbent when it
// beats it by `min_gain`. A point already scored is not measured again. At
// most `passes` sweeps; a sweep that moves nothing ends the search.
std::unique_ptr<Search> coordinate_descent(Space space, Point start, int passes, double min_gain);

// Bayesian optimisation as Horovod's autotuner does it: a Gaussian process
// (RBF kernel, its length scale chosen by marginal likelihood, noise 0.2)
// over the grid indices scaled to [0, 1], the next point the unmeasured one
// of highest expected improvement; the start and three spread points first;
// at most `samples` points.
std::unique_ptr<Search> bayesian(Space space, Point start, int samples);

}  // namespace cohort::autotune
