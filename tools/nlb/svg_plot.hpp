// Small, dependency-free SVG charts for nlb's reports: lines/points with optional error bars,
// grouped bars, histograms. The output is deterministic text (fixed number formatting), so a
// report made twice from the same inputs is byte-identical.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace nlb::cli::svg {

/// One data series. y_low / y_high: optional error bars (empty, or the size of y).
/// Non-finite points are skipped (and break a line).
struct Series {
  std::string label;
  std::vector<double> x, y;
  std::vector<double> y_low, y_high;
  bool lines = true;
  bool points = true;
};

struct Chart {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  bool bars = false;                       // draw every series as bars centred at its x
  std::vector<std::string> x_tick_labels;  // categorical ticks at x = 0, 1, 2, ... when set
  std::optional<double> y_reference;       // a dashed horizontal line, e.g. at 0
};

namespace detail {

inline constexpr double width = 720, height = 420;
inline constexpr double left = 72, right = 24, top = 44, bottom = 64;
inline constexpr const char* palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                          "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

inline std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

inline std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A tick label: short, without trailing zeros.
inline std::string tick_text(double v) {
  char buf[32];
  if (v != 0 && (std::fabs(v) >= 1e5 || std::fabs(v) < 1e-3)) {
    std::snprintf(buf, sizeof buf, "%.2g", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.4f", v);
    std::string s = buf;
    while (s.back() == '0')
      s.pop_back();
    if (s.back() == '.')
      s.pop_back();
    return s == "-0" ? "0" : s;
  }
  return buf;
}

// "Nice" tick positions covering [lo, hi] (steps of 1, 2 or 5 times a power of ten).
inline std::vector<double> nice_ticks(double& lo, double& hi, int target = 6) {
  if (!(hi > lo)) {
    const double pad = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / target;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = power;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * power;
    if (step >= raw)
      break;
  }
  lo = std::floor(lo / step) * step;
  hi = std::ceil(hi / step) * step;
  std::vector<double> ticks;
  for (double t = lo; t <= hi + step * 1e-9; t += step)
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  return ticks;
}

inline void extend(double v, double& lo, double& hi) {
  if (std::isfinite(v)) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
}

}  // namespace detail

/// The chart as a complete SVG document: 420 px high, 720 px wide plus, when some series has a
/// label, a column on the right for the legend. The legend sits outside the plotting area, so it
/// never covers a point, bar, line or error bar, wherever the data lie.
inline std::string render(const Chart& chart) {
  using namespace detail;
  std::size_t labels = 0, longest_label = 0;
  for (const auto& s : chart.series) {
    if (!s.label.empty()) {
      ++labels;
      longest_label = std::max(longest_label, s.label.size());
    }
  }
  // About 7 px per character at font size 12 (bytes: generous for non-ASCII labels).
  const double legend_w = labels > 0 ? 38 + 7.0 * static_cast<double>(longest_label) : 0;
  const double canvas_w = width + (labels > 0 ? legend_w + 12 : 0);
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo;
  double y_lo = x_lo, y_hi = -x_lo;
  for (const auto& s : chart.series) {
    for (std::size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i]))
        continue;
      extend(s.x[i], x_lo, x_hi);
      extend(s.y[i], y_lo, y_hi);
      if (i < s.y_low.size())
        extend(s.y_low[i], y_lo, y_hi);
      if (i < s.y_high.size())
        extend(s.y_high[i], y_lo, y_hi);
    }
  }
  if (!std::isfinite(x_lo)) {  // no data at all
    x_lo = 0;
    x_hi = 1;
    y_lo = 0;
    y_hi = 1;
  }
  if (chart.bars || chart.y_reference) {
    const double ref = chart.y_reference.value_or(0.0);
    extend(ref, y_lo, y_hi);
  }
  if (!chart.x_tick_labels.empty()) {
    x_lo = std::min(x_lo, 0.0);
    x_hi = std::max(x_hi, static_cast<double>(chart.x_tick_labels.size()) - 1);
  }
  // Bars and categories need half a slot of room on each side.
  double slot = 1;
  if (chart.bars || !chart.x_tick_labels.empty()) {
    std::vector<double> xs;
    for (const auto& s : chart.series)
      xs.insert(xs.end(), s.x.begin(), s.x.end());
    std::sort(xs.begin(), xs.end());
    double gap = std::numeric_limits<double>::infinity();
    for (std::size_t i = 1; i < xs.size(); ++i)
      if (xs[i] > xs[i - 1])
        gap = std::min(gap, xs[i] - xs[i - 1]);
    slot = std::isfinite(gap) ? gap : 1.0;
    x_lo -= slot / 2;
    x_hi += slot / 2;
  }
  std::vector<double> x_ticks;
  if (chart.x_tick_labels.empty()) {
    x_ticks = nice_ticks(x_lo, x_hi);
  } else if (!(x_hi > x_lo)) {
    x_hi = x_lo + 1;
  }
  const std::vector<double> y_ticks = nice_ticks(y_lo, y_hi);

  const double plot_w = width - left - right, plot_h = height - top - bottom;
  auto px = [&](double x) { return left + (x - x_lo) / (x_hi - x_lo) * plot_w; };
  auto py = [&](double y) { return top + (y_hi - y) / (y_hi - y_lo) * plot_h; };

  std::string out;
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(canvas_w) + "\" height=\"" +
         num(height) + "\" viewBox=\"0 0 " + num(canvas_w) + " " + num(height) +
         "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  out += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  out += "<text x=\"" + num(left + plot_w / 2) +
         "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">" + escape(chart.title) + "</text>\n";
  // Grid and y ticks.
  for (double t : y_ticks) {
    out += "<line x1=\"" + num(left) + "\" y1=\"" + num(py(t)) + "\" x2=\"" + num(left + plot_w) +
           "\" y2=\"" + num(py(t)) + "\" stroke=\"#e0e0e0\"/>\n";
    out += "<text x=\"" + num(left - 6) + "\" y=\"" + num(py(t) + 4) + "\" text-anchor=\"end\">" +
           escape(tick_text(t)) + "</text>\n";
  }
  // X ticks.
  if (chart.x_tick_labels.empty()) {
    for (double t : x_ticks) {
      out += "<text x=\"" + num(px(t)) + "\" y=\"" + num(top + plot_h + 18) +
             "\" text-anchor=\"middle\">" + escape(tick_text(t)) + "</text>\n";
    }
  } else {
    for (std::size_t i = 0; i < chart.x_tick_labels.size(); ++i) {
      out += "<text x=\"" + num(px(static_cast<double>(i))) + "\" y=\"" + num(top + plot_h + 18) +
             "\" text-anchor=\"middle\">" + escape(chart.x_tick_labels[i]) + "</text>\n";
    }
  }
  // Axes and labels.
  out += "<rect x=\"" + num(left) + "\" y=\"" + num(top) + "\" width=\"" + num(plot_w) +
         "\" height=\"" + num(plot_h) + "\" fill=\"none\" stroke=\"#404040\"/>\n";
  out += "<text x=\"" + num(left + plot_w / 2) + "\" y=\"" + num(height - 18) +
         "\" text-anchor=\"middle\">" + escape(chart.x_label) + "</text>\n";
  out += "<text transform=\"translate(18 " + num(top + plot_h / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">" + escape(chart.y_label) + "</text>\n";
  if (chart.y_reference) {
    const double y = py(*chart.y_reference);
    out += "<line x1=\"" + num(left) + "\" y1=\"" + num(y) + "\" x2=\"" + num(left + plot_w) +
           "\" y2=\"" + num(y) + "\" stroke=\"#404040\" stroke-dasharray=\"4 3\"/>\n";
  }
  // Series.
  const double n_series = static_cast<double>(std::max<std::size_t>(chart.series.size(), 1));
  const double bar_w = (px(slot) - px(0)) * 0.8 / n_series;
  for (std::size_t k = 0; k < chart.series.size(); ++k) {
    const Series& s = chart.series[k];
    const std::string color = palette[k % (sizeof palette / sizeof palette[0])];
    const std::size_t n = std::min(s.x.size(), s.y.size());
    auto finite = [&](std::size_t i) { return std::isfinite(s.x[i]) && std::isfinite(s.y[i]); };
    if (chart.bars) {
      const double base = py(chart.y_reference.value_or(0.0));
      for (std::size_t i = 0; i < n; ++i) {
        if (!finite(i))
          continue;
        const double x0 = px(s.x[i]) - bar_w * n_series / 2 + bar_w * static_cast<double>(k);
        const double y = py(s.y[i]);
        out += "<rect x=\"" + num(x0) + "\" y=\"" + num(std::min(y, base)) + "\" width=\"" +
               num(bar_w) + "\" height=\"" + num(std::fabs(base - y)) + "\" fill=\"" + color +
               "\"/>\n";
      }
    } else if (s.lines) {
      std::string path;
      bool pen_down = false;
      for (std::size_t i = 0; i < n; ++i) {
        if (!finite(i)) {
          pen_down = false;
          continue;
        }
        path += (pen_down ? " L" : " M") + num(px(s.x[i])) + " " + num(py(s.y[i]));
        pen_down = true;
      }
      if (!path.empty()) {
        out += "<path d=\"" + path.substr(1) + "\" fill=\"none\" stroke=\"" + color +
               "\" stroke-width=\"2\"/>\n";
      }
    }
    for (std::size_t i = 0; i < n; ++i) {
      if (!finite(i))
        continue;
      const double cx =
          chart.bars ? px(s.x[i]) - bar_w * n_series / 2 + bar_w * (static_cast<double>(k) + 0.5)
                     : px(s.x[i]);
      if (i < s.y_low.size() && i < s.y_high.size() && std::isfinite(s.y_low[i]) &&
          std::isfinite(s.y_high[i])) {
        const double lo = py(s.y_low[i]), hi = py(s.y_high[i]);
        out += "<path d=\"M" + num(cx) + " " + num(lo) + " L" + num(cx) + " " + num(hi) + " M" +
               num(cx - 4) + " " + num(lo) + " L" + num(cx + 4) + " " + num(lo) + " M" +
               num(cx - 4) + " " + num(hi) + " L" + num(cx + 4) + " " + num(hi) +
               "\" stroke=\"#202020\" stroke-width=\"1.2\" fill=\"none\"/>\n";
      }
      if (!chart.bars && s.points) {
        out += "<circle cx=\"" + num(cx) + "\" cy=\"" + num(py(s.y[i])) + "\" r=\"3.5\" fill=\"" +
               color + "\"/>\n";
      }
    }
  }
  // Legend (only when some series has a label): a framed column right of the plotting area.
  if (labels > 0) {
    const double legend_x = left + plot_w + 12;
    out += "<g class=\"legend\">\n";
    out += "<rect class=\"legend-box\" x=\"" + num(legend_x) + "\" y=\"" + num(top) +
           "\" width=\"" + num(legend_w) + "\" height=\"" +
           num(10 + 17 * static_cast<double>(labels)) + "\" fill=\"white\" stroke=\"#c0c0c0\"/>\n";
    double legend_y = top + 19;
    for (std::size_t k = 0; k < chart.series.size(); ++k) {
      if (chart.series[k].label.empty())
        continue;
      const std::string color = palette[k % (sizeof palette / sizeof palette[0])];
      out += "<rect x=\"" + num(legend_x + 8) + "\" y=\"" + num(legend_y - 10) +
             "\" width=\"12\" height=\"12\" fill=\"" + color + "\"/>\n";
      out += "<text x=\"" + num(legend_x + 26) + "\" y=\"" + num(legend_y) + "\">" +
             escape(chart.series[k].label) + "</text>\n";
      legend_y += 17;
    }
    out += "</g>\n";
  }
  out += "</svg>\n";
  return out;
}

/// A histogram of `values` over [low, high] in `bins` equal bins, as a bar chart whose x is
/// each bin's centre; values below low / above high are counted in the first / last bin,
/// non-finite values are ignored. bins < 1 is taken as 1; high <= low gives one bin at low.
inline Chart histogram(std::string title, std::string x_label, const std::vector<double>& values,
                       int bins, double low, double high) {
  bins = std::max(bins, 1);
  if (!(high > low))
    high = low + 1;
  const double step = (high - low) / bins;
  Series s;
  s.label = "";
  s.y.assign(static_cast<std::size_t>(bins), 0.0);
  for (int b = 0; b < bins; ++b)
    s.x.push_back(low + (b + 0.5) * step);
  for (double v : values) {
    if (!std::isfinite(v))
      continue;
    const int b = std::clamp(static_cast<int>(std::floor((v - low) / step)), 0, bins - 1);
    s.y[static_cast<std::size_t>(b)] += 1;
  }
  Chart chart;
  chart.title = std::move(title);
  chart.x_label = std::move(x_label);
  chart.y_label = "count";
  chart.bars = true;
  chart.series.push_back(std::move(s));
  return chart;
}

}  // namespace nlb::cli::svg
