// The report helpers shared by nlb's subcommands: staged, all-or-nothing report directories
// (tools/nlb/report_files.hpp) and the SVG charts (tools/nlb/svg_plot.hpp).
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "nlb/core/errors.hpp"
#include "report_files.hpp"
#include "svg_plot.hpp"

namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("nlb-report-helpers-" + name);
  fs::remove_all(dir);
  return dir;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

}  // namespace

BOOST_AUTO_TEST_CASE(report_files_write_every_staged_file_and_nothing_before_write) {
  const fs::path dir = fresh_dir("write") / "nested";
  nlb::cli::ReportFiles files(dir);
  files.add("report.md", "# title\n");
  files.add("report.json", "{}\n");
  BOOST_TEST(!fs::exists(dir));  // staged only
  files.write();
  BOOST_TEST(read_text(dir / "report.md") == "# title\n");
  BOOST_TEST(read_text(dir / "report.json") == "{}\n");
  std::size_t entries = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    (void)entry;
    ++entries;
  }
  BOOST_TEST(entries == 2u);  // no temporary files left
  fs::remove_all(dir.parent_path());
}

BOOST_AUTO_TEST_CASE(report_files_reject_bad_names_and_unwritable_directories) {
  const fs::path dir = fresh_dir("bad");
  nlb::cli::ReportFiles files(dir);
  BOOST_CHECK_THROW(files.add("sub/x.md", ""), nlb::ArgumentError);
  BOOST_CHECK_THROW(files.add("", ""), nlb::ArgumentError);
  files.add("a.md", "");
  BOOST_CHECK_THROW(files.add("a.md", ""), nlb::ArgumentError);
  // The report directory's name is taken by a regular file.
  { std::ofstream(dir.string()) << "x"; }
  BOOST_CHECK_THROW(files.write(), nlb::Error);
  BOOST_TEST(fs::is_regular_file(dir));
  fs::remove(dir);
}

BOOST_AUTO_TEST_CASE(histogram_counts_match_a_direct_count) {
  // Bins of width 0.25 over [0, 1]: clipped values land in the end bins, NaN is ignored.
  const std::vector<double> values{-3.0, 0.1, 0.2, 0.26, 0.5, 0.74, 0.99, 7.0, std::nan("")};
  const auto chart = nlb::cli::svg::histogram("t", "x", values, 4, 0.0, 1.0);
  BOOST_REQUIRE(chart.series.size() == 1u);
  const auto& s = chart.series[0];
  const std::vector<double> expected_x{0.125, 0.375, 0.625, 0.875};
  const std::vector<double> expected_y{3, 1, 2, 2};
  BOOST_TEST(s.x == expected_x, boost::test_tools::per_element());
  BOOST_TEST(s.y == expected_y, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(render_draws_each_finite_point_bar_and_error_bar_deterministically) {
  nlb::cli::svg::Chart chart;
  chart.title = "Δ% <per layer>";
  chart.x_label = "layer";
  chart.y_label = "Δ%";
  nlb::cli::svg::Series s;
  s.label = "all-linear & gated";
  s.x = {0, 1, 2, 3};
  s.y = {1.0, std::nan(""), 2.5, -0.5};
  s.y_low = {0.5, 0.0, 2.0, -1.0};
  s.y_high = {1.5, 0.0, 3.0, 0.0};
  chart.series.push_back(s);
  chart.y_reference = 0.0;
  const std::string svg = nlb::cli::svg::render(chart);
  BOOST_TEST(svg.rfind("<svg ", 0) == 0u);
  BOOST_TEST(svg.find("</svg>\n") == svg.size() - 7);
  BOOST_TEST(count(svg, "<circle") == 3u);                         // the NaN point is skipped
  BOOST_TEST(count(svg, "stroke=\"#202020\"") == 3u);              // one error bar per finite point
  BOOST_TEST(svg.find("&lt;per layer&gt;") != std::string::npos);  // text is escaped
  BOOST_TEST(svg.find("&amp; gated") != std::string::npos);
  BOOST_TEST(svg == nlb::cli::svg::render(chart));

  chart.bars = true;
  chart.x_tick_labels = {"L0", "L1", "L2", "L3"};
  const std::string bars = nlb::cli::svg::render(chart);
  BOOST_TEST(count(bars, "<circle") == 0u);
  // Background + plot frame + legend box and swatch + 3 bars.
  BOOST_TEST(count(bars, "<rect") == 7u);
  BOOST_TEST(bars.find(">L3</text>") != std::string::npos);
}

// ---- legends never cover data ------------------------------------------------------------------

namespace {

struct Box {
  double x0, y0, x1, y1;
  bool overlaps(const Box& o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
};

// The value of attribute `name` in the element starting at `at` (NaN when absent).
double attribute(const std::string& svg, std::size_t at, const std::string& name) {
  const std::size_t end = svg.find('>', at);
  const std::size_t p = svg.find(" " + name + "=\"", at);
  if (p == std::string::npos || p > end)
    return std::nan("");
  return std::stod(svg.substr(p + name.size() + 3));
}

// Every element that draws data — points (circles), bars (rects filled with a series colour),
// error bars and lines (paths: the box of their coordinates) — outside the legend's group, as
// boxes; and the legend's box (its frame rect).
struct Drawn {
  std::vector<Box> data;
  std::optional<Box> legend;
};

Drawn drawn_boxes(const std::string& svg) {
  Drawn out;
  const std::size_t legend_begin = svg.find("<g class=\"legend\">");
  const std::size_t legend_end = svg.find("</g>", legend_begin);
  if (legend_begin != std::string::npos) {
    const std::size_t r = svg.find("<rect class=\"legend-box\"", legend_begin);
    if (r != std::string::npos && r < legend_end) {
      const double x = attribute(svg, r, "x"), y = attribute(svg, r, "y");
      out.legend = Box{x, y, x + attribute(svg, r, "width"), y + attribute(svg, r, "height")};
    }
  }
  auto in_legend = [&](std::size_t at) {
    return legend_begin != std::string::npos && at > legend_begin && at < legend_end;
  };
  for (std::size_t at = svg.find("<circle"); at != std::string::npos;
       at = svg.find("<circle", at + 1)) {
    if (in_legend(at))
      continue;
    const double cx = attribute(svg, at, "cx"), cy = attribute(svg, at, "cy"),
                 r = attribute(svg, at, "r");
    out.data.push_back({cx - r, cy - r, cx + r, cy + r});
  }
  for (std::size_t at = svg.find("<rect"); at != std::string::npos;
       at = svg.find("<rect", at + 1)) {
    const std::string element = svg.substr(at, svg.find('>', at) - at);
    if (in_legend(at) || element.find("fill=\"#") == std::string::npos)
      continue;  // the background (white by name) and the plot frame (fill none) are not data
    const double x = attribute(svg, at, "x"), y = attribute(svg, at, "y");
    out.data.push_back({x, y, x + attribute(svg, at, "width"), y + attribute(svg, at, "height")});
  }
  for (std::size_t at = svg.find("<path d=\""); at != std::string::npos;
       at = svg.find("<path d=\"", at + 1)) {
    if (in_legend(at))
      continue;
    const std::size_t begin = at + 9, end = svg.find('"', begin);
    std::string coords = svg.substr(begin, end - begin);
    for (char& c : coords)
      if (c == 'M' || c == 'L')
        c = ' ';
    std::istringstream in(coords);
    Box box{1e300, 1e300, -1e300, -1e300};
    double x = 0, y = 0;
    while (in >> x >> y)
      box = {std::min(box.x0, x), std::min(box.y0, y), std::max(box.x1, x), std::max(box.y1, y)};
    out.data.push_back(box);
  }
  return out;
}

}  // namespace

// The charts nlb's reports draw, shaped as the ones that hid data: the per-layer bars whose first
// layer is the largest (all_linear_delta.svg: layer 0 at +108.8% under the legend), lines with
// error bars whose largest point is the first, many labelled series, long labels.
BOOST_AUTO_TEST_CASE(no_legend_covers_a_data_element) {
  namespace svg = nlb::cli::svg;
  std::vector<svg::Chart> charts;
  {
    svg::Chart bars;
    bars.title = "per-layer Δ%";
    bars.bars = true;
    svg::Series all{"one layer linear (eval, 95% interval)", {}, {}, {}, {}};
    svg::Series gated{"gated, threshold 0", {}, {}, {}, {}};
    for (int l = 0; l < 12; ++l) {
      bars.x_tick_labels.push_back(std::to_string(l));
      all.x.push_back(l);
      gated.x.push_back(l);
      all.y.push_back(l == 0 ? 108.8 : 2.0 + 0.3 * l);
      all.y_low.push_back(all.y.back() - 3);
      all.y_high.push_back(all.y.back() + 3);
      gated.y.push_back(l == 0 ? 40.0 : 1.0);
    }
    bars.series = {all, gated};
    bars.y_reference = 0.0;
    charts.push_back(bars);
  }
  {
    svg::Chart lines;
    lines.title = "joint budget";
    for (int k = 0; k < 8; ++k) {
      svg::Series s{"series " + std::to_string(k) + " with a long label", {}, {}, {}, {}};
      for (int i = 0; i < 6; ++i) {
        s.x.push_back(i);
        s.y.push_back(100.0 - 15.0 * i + k);
        s.y_low.push_back(s.y.back() - 2);
        s.y_high.push_back(s.y.back() + 2);
      }
      lines.series.push_back(s);
    }
    charts.push_back(lines);
  }
  for (const auto& chart : charts) {
    BOOST_TEST_CONTEXT(chart.title) {
      const Drawn d = drawn_boxes(svg::render(chart));
      BOOST_TEST_REQUIRE(d.legend.has_value());  // labelled series: a legend with its box
      BOOST_TEST(d.data.size() > 12u);
      for (const Box& b : d.data)
        BOOST_TEST(!b.overlaps(*d.legend), "data at [" << b.x0 << ", " << b.x1 << "] x [" << b.y0
                                                       << ", " << b.y1 << "] under the legend");
    }
  }
  // A chart without labels draws no legend.
  BOOST_TEST(!drawn_boxes(svg::render(svg::histogram("h", "x", {1, 2, 2, 3}, 3, 0, 4)))
                  .legend.has_value());
}
