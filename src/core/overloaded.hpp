// Overloaded{lambdas...}: one visitor for std::visit out of several lambdas,
// one per alternative. The deduction guide is spelled out because clang 14
// (the sanitizer builds' compiler) does not deduce aggregates' bases yet.
#pragma once

namespace cohort::detail {

template <class... Fs>
struct Overloaded : Fs... {
    using Fs::operator()...;
};
template <class... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

}  // namespace cohort::detail
