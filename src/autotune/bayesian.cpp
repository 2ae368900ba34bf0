// Bayesian optimisation over the joint grid, the anchor (Horovod's
// autotuner: a Gaussian process and expected improvement). Each proposal
// costs O(n^3 + G n^2) for n points measured and G grid points looked at
// (at most 20000: a larger grid is sampled), microseconds to milliseconds.
#include "autotune/search.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>

namespace cohort::autotune {
namespace {

constexpr double kNoise = 0.2;  // Horovod's GAUSSIAN_PROCESS_NOISE, on standardised scores
constexpr double kXi = 0.01;    // exploration of the expected improvement
constexpr std::size_t kMaxGrid = 20000;
constexpr double kLengths[] = {0.1, 0.2, 0.35, 0.5, 0.75, 1.0};

// In-place Cholesky of a symmetric positive definite n x n matrix (row
// major); false if it is not.
bool cholesky(std::vector<double>& a, std::size_t n) {
    for (std::size_t j = 0; j < n; ++j) {
        double d = a[j * n + j];
        for (std::size_t k = 0; k < j; ++k) d -= a[j * n + k] * a[j * n + k];
        if (d <= 0) return false;
        d = std::sqrt(d);
        a[j * n + j] = d;
        for (std::size_t i = j + 1; i < n; ++i) {
            double s = a[i * n + j];
            for (std::size_t k = 0; k < j; ++k) s -= a[i * n + k] * a[j * n + k];
            a[i * n + j] = s / d;
        }
        for (std::size_t k = j + 1; k < n; ++k) a[j * n + k] = 0;
    }
    return true;
}

// Solves L y = b then L^T x = y.
std::vector<double> solve(const std::vector<double>& l, std::size_t n, std::vector<double> b) {
    for (std::size_t i = 0; i < n; ++i) {
        for (std::size_t k = 0; k < i; ++k) b[i] -= l[i * n + k] * b[k];
        b[i] /= l[i * n + i];
    }
    for (std::size_t i = n; i-- > 0;) {
        for (std::size_t k = i + 1; k < n; ++k) b[i] -= l[k * n + i] * b[k];
        b[i] /= l[i * n + i];
    }
    return b;
}

class Bayesian final : public Search {
public:
    Bayesian(Space space, Point start, int samples)
        : space_(std::move(space)), start_(std::move(start)), samples_(samples) {
        for (std::size_t d = 0; d < space_.sizes.size(); ++d)
            if (space_.tunable[d] && space_.sizes[d] > 1) dims_.push_back(d);
        // Three spread points after the start, a Latin square over the
        // tunable parameters, as Horovod seeds its search with fixed points.
        for (std::size_t k = 1; k <= 3 && !dims_.empty(); ++k) {
            Point p = start_;
            for (std::size_t t = 0; t < dims_.size(); ++t) {
                const std::size_t n = space_.sizes[dims_[t]];
                const double at = (double((k + t) % 4) + 0.5) / 4.0;
                p[dims_[t]] = std::min(n - 1, static_cast<std::size_t>(at * double(n)));
            }
            design_.push_back(p);
        }
        std::size_t grid = 1;
        for (std::size_t d : dims_) grid = std::min(grid * space_.sizes[d], kMaxGrid + 1);
        grid_total_ = grid;
    }

    std::optional<Point> next(const Point& measured, double score) override {
        xs_.push_back(measured);
        ys_.push_back(score);
        seen_.insert(measured);
        if (dims_.empty() || int(xs_.size()) >= samples_) return std::nullopt;
        while (!design_.empty()) {
            Point p = design_.front();
            design_.erase(design_.begin());
            if (!seen_.count(p)) return p;
        }
        return propose();
    }

    Point best() const override {
        if (ys_.empty()) return start_;
        return xs_[std::size_t(std::max_element(ys_.begin(), ys_.end()) - ys_.begin())];
    }
    double best_score() const override { return ys_.empty() ? 0 : *std::max_element(ys_.begin(), ys_.end()); }
    int64_t bound() const override {
        return dims_.empty() ? 1 : std::min<int64_t>(samples_, int64_t(grid_total_));
    }

private:
    std::vector<double> features(const Point& p) const {
        std::vector<double> x;
        for (std::size_t d : dims_) x.push_back(double(p[d]) / double(space_.sizes[d] - 1));
        return x;
    }
    static double kernel(const std::vector<double>& a, const std::vector<double>& b, double length) {
        double s = 0;
        for (std::size_t i = 0; i < a.size(); ++i) s += (a[i] - b[i]) * (a[i] - b[i]);
        return std::exp(-s / (2 * length * length));
    }

    std::optional<Point> propose() {
        const std::size_t n = xs_.size();
        const double mean = std::accumulate(ys_.begin(), ys_.end(), 0.0) / double(n);
        double var = 0;
        for (double y : ys_) var += (y - mean) * (y - mean);
        const double sd = var > 0 ? std::sqrt(var / double(n)) : 1.0;
        std::vector<double> y(n);
        for (std::size_t i = 0; i < n; ++i) y[i] = (ys_[i] - mean) / sd;
        std::vector<std::vector<double>> x(n);
        for (std::size_t i = 0; i < n; ++i) x[i] = features(xs_[i]);

        // The length scale of highest marginal likelihood.
        double length = kLengths[0], best_ll = -std::numeric_limits<double>::infinity();
        std::vector<double> chol, alpha;
        for (double l : kLengths) {
            std::vector<double> k(n * n);
            for (std::size_t i = 0; i < n; ++i)
                for (std::size_t j = 0; j < n; ++j) k[i * n + j] = kernel(x[i], x[j], l) + (i == j ? kNoise : 0);
            if (!cholesky(k, n)) continue;
            const auto a = solve(k, n, y);
            double ll = 0;
            for (std::size_t i = 0; i < n; ++i) ll -= 0.5 * y[i] * a[i] + std::log(k[i * n + i]);
            if (ll > best_ll) best_ll = ll, length = l, chol = k, alpha = a;
        }
        if (chol.empty()) return std::nullopt;
        auto predict = [&](const std::vector<double>& at, double& sigma) {
            std::vector<double> ks(n);
            for (std::size_t i = 0; i < n; ++i) ks[i] = kernel(at, x[i], length);
            double mu = 0;
            for (std::size_t i = 0; i < n; ++i) mu += ks[i] * alpha[i];
            const auto v = solve(chol, n, ks);
            double s2 = 1.0;
            for (std::size_t i = 0; i < n; ++i) s2 -= ks[i] * v[i];
            sigma = std::sqrt(std::max(s2, 1e-12));
            return mu;
        };
        // As Horovod: the incumbent is the best posterior mean at a sample.
        double incumbent = -std::numeric_limits<double>::infinity();
        for (std::size_t i = 0; i < n; ++i) {
            double s;
            incumbent = std::max(incumbent, predict(x[i], s));
        }
        std::optional<Point> chosen;
        double best_ei = -1;
        auto look = [&](const Point& p) {
            if (seen_.count(p)) return;
            double sigma;
            const double mu = predict(features(p), sigma);
            const double imp = mu - incumbent - kXi, z = imp / sigma;
            const double ei = imp * 0.5 * std::erfc(-z / std::sqrt(2.0)) +
                              sigma * std::exp(-z * z / 2) / std::sqrt(2 * M_PI);
            if (ei > best_ei) best_ei = ei, chosen = p;
        };
        if (grid_total_ <= kMaxGrid) {
            Point p = start_;
            for (std::size_t d : dims_) p[d] = 0;
            for (;;) {
                look(p);
                std::size_t t = 0;
                for (; t < dims_.size(); ++t) {
                    if (++p[dims_[t]] < space_.sizes[dims_[t]]) break;
                    p[dims_[t]] = 0;
                }
                if (t == dims_.size()) break;
            }
        } else {
            for (std::size_t i = 0; i < kMaxGrid; ++i) {
                Point p = start_;
                for (std::size_t d : dims_) p[d] = std::uniform_int_distribution<std::size_t>(0, space_.sizes[d] - 1)(rng_);
                look(p);
            }
        }
        return chosen;
    }

    Space space_;
    Point start_;
    int samples_;
    std::vector<std::size_t> dims_;
    std::vector<Point> design_;
    std::size_t grid_total_ = 1;
    std::vector<Point> xs_;
    std::vector<double> ys_;
    std::set<Point> seen_;
    std::mt19937_64 rng_{20};
};

}  // namespace

std::unique_ptr<Search> bayesian(Space space, Point start, int samples) {
    return std::make_unique<Bayesian>(std::move(space), std::move(start), samples);
}

}  // namespace cohort::autotune
