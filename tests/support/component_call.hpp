// Calling a component through the one contract, forward(ctx, X, Y, ws), from a test with a fresh
// context and workspace, and the output-scale error the MLP tolerances (tol::mlp_*) are stated in.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <utility>

#include "nlb/core/context.hpp"
#include "nlb/mlp/route_counts.hpp"

namespace nlb::test {

/// component(X) into Y; returns the rows per path.
template <class C, class XT, class YT>
RouteCounts forward_into(const C& component, const XT& X, YT&& Y) {
  Context<typename C::backend_type> ctx;
  typename C::Workspace ws;
  return component.forward(ctx, X, std::forward<YT>(Y), ws);
}

/// component(X) into a new [T, features()] matrix.
template <class C, class XT>
typename C::Output forward_of(const C& component, const XT& X) {
  typename C::Output Y(X.rows(), component.features());
  forward_into(component, X, Y);
  return Y;
}

/// max |a − b| / max(1, max |b|): the output-scale relative error of tol::mlp_*.
template <class A, class B>
double scaled_error(const A& a, const B& b) {
  const Eigen::MatrixXd bd = b.template cast<double>();
  const double scale = std::max(1.0, bd.cwiseAbs().maxCoeff());
  return (a.template cast<double>() - bd).cwiseAbs().maxCoeff() / scale;
}

}  // namespace nlb::test
