// The report helpers shared by nlb's subcommands: staged, all-or-nothing report directories
// (tools/nlb/report_files.hpp) and the SVG charts (tools/nlb/svg_plot.hpp).
#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

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
  // Background + plot frame + legend swatch + 3 bars.
  BOOST_TEST(count(bars, "<rect") == 6u);
  BOOST_TEST(bars.find(">L3</text>") != std::string::npos);
}
