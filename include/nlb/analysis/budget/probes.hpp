// Token identity against context (PAPERS §A4): the gate trained on the embedding e, on the
// context part c = x − e and on x, and the per-token "no-fly" lists compared across corpora.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <span>
#include <vector>

#include "nlb/analysis/budget/gate_training.hpp"
#include "nlb/core.hpp"

namespace nlb {

/// Held-out AUCs of the same gate on three feature sets of one layer (PAPERS §A4).
struct ProbeAucs {
  double embedding = std::numeric_limits<double>::quiet_NaN();  // features e (token + position)
  double context = std::numeric_limits<double>::quiet_NaN();    // features c = x − e
  double full = std::numeric_limits<double>::quiet_NaN();       // features x (the gate itself)
};

/// Trains the gate of train_gate (same labels, same split) on e and on c = x − e and returns
/// the three held-out AUCs; `full_auc` is the x gate's, already trained by the caller.
/// x, e [N, d]; delta [N]; with `rows` split, x and e hold the rows of train_gate's `rows`
/// only. Cost: two gate fits.
template <class T>
ProbeAucs probe_aucs(const Activations<T>& x, const Activations<T>& e,
                     std::span<const double> delta, Index n_train, double full_auc,
                     const LabelRows& rows = {}) {
  check_dim("probe_aucs: e rows (x rows)", x.rows(), e.rows());
  ProbeAucs out;
  out.full = full_auc;
  out.embedding = train_gate<T>(e, delta, n_train, rows).holdout_auc;
  const Activations<T> c = x - e;
  out.context = train_gate<T>(c, delta, n_train, rows).holdout_auc;
  return out;
}

/// Mean δ of one token id over its occurrences.
struct TokenDelta {
  std::int32_t token = 0;
  double mean = 0;
  Index count = 0;
};

/// Per token id, the mean δ over the positions where it is the *input* token (the token whose
/// MLP row the gate scores). Positions are window-major predicted positions: position
/// w (context − 1) + r is row r of window w, token tokens[w · context + r]. delta holds
/// windows · (context − 1) values. Sorted by token id. O(N log V).
inline std::vector<TokenDelta> token_delta_means(std::span<const std::int32_t> tokens,
                                                 std::span<const double> delta, Index context) {
  const Index per_window = context - 1;
  const auto windows = static_cast<Index>(delta.size()) / per_window;
  check_dim("token_delta_means: δ values (whole windows of context − 1)", windows * per_window,
            static_cast<long long>(delta.size()));
  if (static_cast<Index>(tokens.size()) < windows * context) {
    throw ShapeError(detail::expected_found("token_delta_means: tokens",
                                            "at least " + std::to_string(windows * context),
                                            tokens.size()));
  }
  std::map<std::int32_t, std::pair<double, Index>> acc;
  for (Index w = 0; w < windows; ++w) {
    for (Index r = 0; r < per_window; ++r) {
      auto& a = acc[tokens[static_cast<std::size_t>(w * context + r)]];
      a.first += delta[static_cast<std::size_t>(w * per_window + r)];
      ++a.second;
    }
  }
  std::vector<TokenDelta> out;
  out.reserve(acc.size());
  for (const auto& [token, a] : acc)
    out.push_back({token, a.first / static_cast<double>(a.second), a.second});
  return out;
}

/// The no-fly comparison of two corpora for one layer (PAPERS §A4).
struct NoFlyComparison {
  Index common_tokens = 0;  // tokens with ≥ min_count occurrences in both
  double correlation = std::numeric_limits<double>::quiet_NaN();  // Pearson r of their means
  std::vector<TokenDelta> no_fly_a;  // tokens (≥ min_count in a) with mean δ > threshold, in a
  std::vector<TokenDelta> no_fly_b;  // the same in b
  Index overlap = 0;                 // tokens on both no-fly lists
};

/// Compares per-token mean δ of corpus a and b: no-fly lists (mean δ > threshold over
/// ≥ min_count occurrences, sorted by mean δ descending, ties by token id), their overlap, and
/// the Pearson correlation of the means over the tokens with ≥ min_count occurrences in both
/// (NaN when fewer than 3 such tokens or a constant side). a, b sorted by token (as
/// token_delta_means returns them). O(V).
inline NoFlyComparison compare_no_fly(std::span<const TokenDelta> a, std::span<const TokenDelta> b,
                                      double threshold, Index min_count) {
  NoFlyComparison out;
  auto no_fly = [&](std::span<const TokenDelta> s) {
    std::vector<TokenDelta> list;
    for (const auto& t : s)
      if (t.count >= min_count && t.mean > threshold)
        list.push_back(t);
    std::sort(list.begin(), list.end(), [](const TokenDelta& p, const TokenDelta& q) {
      return p.mean != q.mean ? p.mean > q.mean : p.token < q.token;
    });
    return list;
  };
  out.no_fly_a = no_fly(a);
  out.no_fly_b = no_fly(b);
  for (const auto& p : out.no_fly_a)
    for (const auto& q : out.no_fly_b)
      if (p.token == q.token)
        ++out.overlap;
  std::vector<double> xa, xb;
  std::size_t j = 0;
  for (const auto& p : a) {
    while (j < b.size() && b[j].token < p.token)
      ++j;
    if (j < b.size() && b[j].token == p.token && p.count >= min_count && b[j].count >= min_count) {
      xa.push_back(p.mean);
      xb.push_back(b[j].mean);
    }
  }
  out.common_tokens = static_cast<Index>(xa.size());
  if (xa.size() >= 3) {
    const double n = static_cast<double>(xa.size());
    double ma = 0, mb = 0;
    for (std::size_t i = 0; i < xa.size(); ++i) {
      ma += xa[i];
      mb += xb[i];
    }
    ma /= n;
    mb /= n;
    double sab = 0, saa = 0, sbb = 0;
    for (std::size_t i = 0; i < xa.size(); ++i) {
      sab += (xa[i] - ma) * (xb[i] - mb);
      saa += (xa[i] - ma) * (xa[i] - ma);
      sbb += (xb[i] - mb) * (xb[i] - mb);
    }
    if (saa > 0 && sbb > 0)
      out.correlation = sab / std::sqrt(saa * sbb);
  }
  return out;
}

}  // namespace nlb
