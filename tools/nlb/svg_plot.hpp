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

// Where the data lie and how they map to the plotting area.
struct Frame {
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo;
  double y_lo = x_lo, y_hi = -x_lo;
  double slot = 1;  // the x distance of one bar or category
  std::vector<double> x_ticks, y_ticks;
  double plot_w = width - left - right, plot_h = height - top - bottom;

  double px(double x) const { return left + (x - x_lo) / (x_hi - x_lo) * plot_w; }
  double py(double y) const { return top + (y_hi - y) / (y_hi - y_lo) * plot_h; }
};

// The range of every finite point and error bar (the unit square without any).
inline void data_range(const Chart& chart, Frame& f) {
  for (const auto& s : chart.series) {
    for (std::size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i]))
        continue;
      extend(s.x[i], f.x_lo, f.x_hi);
      extend(s.y[i], f.y_lo, f.y_hi);
      if (i < s.y_low.size())
        extend(s.y_low[i], f.y_lo, f.y_hi);
      if (i < s.y_high.size())
        extend(s.y_high[i], f.y_lo, f.y_hi);
    }
  }
  if (!std::isfinite(f.x_lo)) {  // no data at all
    f.x_lo = 0;
    f.x_hi = 1;
    f.y_lo = 0;
    f.y_hi = 1;
  }
}

// The frame of `chart`: its data range, room for the reference line, the categories and half a
// bar on each side, and the ticks.
inline Frame frame_of(const Chart& chart) {
  Frame f;
  data_range(chart, f);
  if (chart.bars || chart.y_reference) {
    const double ref = chart.y_reference.value_or(0.0);
    extend(ref, f.y_lo, f.y_hi);
  }
  if (!chart.x_tick_labels.empty()) {
    f.x_lo = std::min(f.x_lo, 0.0);
    f.x_hi = std::max(f.x_hi, static_cast<double>(chart.x_tick_labels.size()) - 1);
  }
  // Bars and categories need half a slot of room on each side.
  if (chart.bars || !chart.x_tick_labels.empty()) {
    std::vector<double> xs;
    for (const auto& s : chart.series)
      xs.insert(xs.end(), s.x.begin(), s.x.end());
    std::sort(xs.begin(), xs.end());
    double gap = std::numeric_limits<double>::infinity();
    for (std::size_t i = 1; i < xs.size(); ++i)
      if (xs[i] > xs[i - 1])
        gap = std::min(gap, xs[i] - xs[i - 1]);
    f.slot = std::isfinite(gap) ? gap : 1.0;
    f.x_lo -= f.slot / 2;
    f.x_hi += f.slot / 2;
  }
  if (chart.x_tick_labels.empty()) {
    f.x_ticks = nice_ticks(f.x_lo, f.x_hi);
  } else if (!(f.x_hi > f.x_lo)) {
    f.x_hi = f.x_lo + 1;
  }
  f.y_ticks = nice_ticks(f.y_lo, f.y_hi);
  return f;
}

// The document's start, the title, the grid with the y ticks, the x ticks, the axes with their
// labels and the reference line.
inline std::string axes_svg(const Chart& chart, const Frame& f, double canvas_w) {
  std::string out;
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(canvas_w) + "\" height=\"" +
         num(height) + "\" viewBox=\"0 0 " + num(canvas_w) + " " + num(height) +
         "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  out += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  out += "<text x=\"" + num(left + f.plot_w / 2) +
         "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">" + escape(chart.title) + "</text>\n";
  for (double t : f.y_ticks) {
    out += "<line x1=\"" + num(left) + "\" y1=\"" + num(f.py(t)) + "\" x2=\"" +
           num(left + f.plot_w) + "\" y2=\"" + num(f.py(t)) + "\" stroke=\"#e0e0e0\"/>\n";
    out += "<text x=\"" + num(left - 6) + "\" y=\"" + num(f.py(t) + 4) + "\" text-anchor=\"end\">" +
           escape(tick_text(t)) + "</text>\n";
  }
  const std::string tick_y = num(top + f.plot_h + 18);
  if (chart.x_tick_labels.empty()) {
    for (double t : f.x_ticks) {
      out += "<text x=\"" + num(f.px(t)) + "\" y=\"" + tick_y + "\" text-anchor=\"middle\">" +
             escape(tick_text(t)) + "</text>\n";
    }
  } else {
    for (std::size_t i = 0; i < chart.x_tick_labels.size(); ++i) {
      out += "<text x=\"" + num(f.px(static_cast<double>(i))) + "\" y=\"" + tick_y +
             "\" text-anchor=\"middle\">" + escape(chart.x_tick_labels[i]) + "</text>\n";
    }
  }
  out += "<rect x=\"" + num(left) + "\" y=\"" + num(top) + "\" width=\"" + num(f.plot_w) +
         "\" height=\"" + num(f.plot_h) + "\" fill=\"none\" stroke=\"#404040\"/>\n";
  out += "<text x=\"" + num(left + f.plot_w / 2) + "\" y=\"" + num(height - 18) +
         "\" text-anchor=\"middle\">" + escape(chart.x_label) + "</text>\n";
  out += "<text transform=\"translate(18 " + num(top + f.plot_h / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">" + escape(chart.y_label) + "</text>\n";
  if (chart.y_reference) {
    const double y = f.py(*chart.y_reference);
    out += "<line x1=\"" + num(left) + "\" y1=\"" + num(y) + "\" x2=\"" + num(left + f.plot_w) +
           "\" y2=\"" + num(y) + "\" stroke=\"#404040\" stroke-dasharray=\"4 3\"/>\n";
  }
  return out;
}

inline std::string color_of(std::size_t k) {
  return palette[k % (sizeof palette / sizeof palette[0])];
}

// Series k's bars (a bar chart) or line (broken at non-finite points).
inline std::string bars_or_line_svg(const Chart& chart, const Frame& f, std::size_t k,
                                    double bar_w) {
  const Series& s = chart.series[k];
  const double n_series = static_cast<double>(std::max<std::size_t>(chart.series.size(), 1));
  const std::size_t n = std::min(s.x.size(), s.y.size());
  auto finite = [&](std::size_t i) { return std::isfinite(s.x[i]) && std::isfinite(s.y[i]); };
  std::string out;
  if (chart.bars) {
    const double base = f.py(chart.y_reference.value_or(0.0));
    for (std::size_t i = 0; i < n; ++i) {
      if (!finite(i))
        continue;
      const double x0 = f.px(s.x[i]) - bar_w * n_series / 2 + bar_w * static_cast<double>(k);
      const double y = f.py(s.y[i]);
      out += "<rect x=\"" + num(x0) + "\" y=\"" + num(std::min(y, base)) + "\" width=\"" +
             num(bar_w) + "\" height=\"" + num(std::fabs(base - y)) + "\" fill=\"" + color_of(k) +
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
      path += (pen_down ? " L" : " M") + num(f.px(s.x[i])) + " " + num(f.py(s.y[i]));
      pen_down = true;
    }
    if (!path.empty()) {
      out += "<path d=\"" + path.substr(1) + "\" fill=\"none\" stroke=\"" + color_of(k) +
             "\" stroke-width=\"2\"/>\n";
    }
  }
  return out;
}

// Series k's error bars and points.
inline std::string marks_svg(const Chart& chart, const Frame& f, std::size_t k, double bar_w) {
  const Series& s = chart.series[k];
  const double n_series = static_cast<double>(std::max<std::size_t>(chart.series.size(), 1));
  const std::size_t n = std::min(s.x.size(), s.y.size());
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i]))
      continue;
    const double cx =
        chart.bars ? f.px(s.x[i]) - bar_w * n_series / 2 + bar_w * (static_cast<double>(k) + 0.5)
                   : f.px(s.x[i]);
    if (i < s.y_low.size() && i < s.y_high.size() && std::isfinite(s.y_low[i]) &&
        std::isfinite(s.y_high[i])) {
      const double lo = f.py(s.y_low[i]), hi = f.py(s.y_high[i]);
      out += "<path d=\"M" + num(cx) + " " + num(lo) + " L" + num(cx) + " " + num(hi) + " M" +
             num(cx - 4) + " " + num(lo) + " L" + num(cx + 4) + " " + num(lo) + " M" + num(cx - 4) +
             " " + num(hi) + " L" + num(cx + 4) + " " + num(hi) +
             "\" stroke=\"#202020\" stroke-width=\"1.2\" fill=\"none\"/>\n";
    }
    if (!chart.bars && s.points) {
      out += "<circle cx=\"" + num(cx) + "\" cy=\"" + num(f.py(s.y[i])) + "\" r=\"3.5\" fill=\"" +
             color_of(k) + "\"/>\n";
    }
  }
  return out;
}

// The legend: a framed column right of the plotting area, one entry per labelled series.
inline std::string legend_svg(const Chart& chart, const Frame& f, std::size_t labels,
                              double legend_w) {
  const double legend_x = left + f.plot_w + 12;
  std::string out = "<g class=\"legend\">\n";
  out += "<rect class=\"legend-box\" x=\"" + num(legend_x) + "\" y=\"" + num(top) + "\" width=\"" +
         num(legend_w) + "\" height=\"" + num(10 + 17 * static_cast<double>(labels)) +
         "\" fill=\"white\" stroke=\"#c0c0c0\"/>\n";
  double legend_y = top + 19;
  for (std::size_t k = 0; k < chart.series.size(); ++k) {
    if (chart.series[k].label.empty())
      continue;
    out += "<rect x=\"" + num(legend_x + 8) + "\" y=\"" + num(legend_y - 10) +
           "\" width=\"12\" height=\"12\" fill=\"" + color_of(k) + "\"/>\n";
    out += "<text x=\"" + num(legend_x + 26) + "\" y=\"" + num(legend_y) + "\">" +
           escape(chart.series[k].label) + "</text>\n";
    legend_y += 17;
  }
  return out + "</g>\n";
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
  const Frame f = frame_of(chart);
  std::string out = axes_svg(chart, f, canvas_w);
  const double n_series = static_cast<double>(std::max<std::size_t>(chart.series.size(), 1));
  const double bar_w = (f.px(f.slot) - f.px(0)) * 0.8 / n_series;
  for (std::size_t k = 0; k < chart.series.size(); ++k)
    out += bars_or_line_svg(chart, f, k, bar_w) + marks_svg(chart, f, k, bar_w);
  if (labels > 0)  // only when some series has a label
    out += legend_svg(chart, f, labels, legend_w);
  return out + "</svg>\n";
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
