// The demos' text output: labels in other scripts stay aligned in a terminal.
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
#include <sstream>

#include "autograd/autograd.h"
#include "cpu/peak.h"
#include "demo.h"

using namespace stepformer;
using demo::display_width;

TEST_CASE("display_width: CJK and emoji take two columns, SentencePiece's ▁ and accents one", "[demos]") {
  CHECK(display_width("") == 0);
  CHECK(display_width("abc") == 3);
  CHECK(display_width("▁the") == 4);    // U+2581, three bytes, one column
  CHECK(display_width("Straße") == 6);  // ß: two bytes
  CHECK(display_width("我有") == 4);
  CHECK(display_width("한국") == 4);  // Hangul syllables
  CHECK(display_width("ｱＡ") == 3);   // halfwidth katakana one, fullwidth Latin two
  CHECK(display_width("😀") == 2);     // U+1F600, four bytes
}

namespace {

// Columns of a line measured without display_width: one per code point, one more for each of 我 and 好.
std::size_t columns(const std::string& line) {
  std::size_t n = 0;
  for (const char c : line) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  for (const std::string wide : {"我", "好"})
    for (auto at = line.find(wide); at != std::string::npos; at = line.find(wide, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("format_matrix: rows labelled in any script line up", "[demos]") {
  const Tensor m = from_vector(std::vector<double>{0.1, 0.2, 0.3, 0.4, 0.5, 0.6}, {3, 2});
  std::istringstream text(demo::format_matrix(m, {"▁Haus", "我", "x"}, {"▁the", "好"}));
  std::vector<std::size_t> widths;
  for (std::string line; std::getline(text, line);) widths.push_back(columns(line));
  REQUIRE(widths.size() == 4);                               // the header and three rows
  for (const std::size_t w : widths) CHECK(w == 8 + 7 * 2);  // a label column of 8, then 7 per value
}

namespace {

// The polylines' y coordinates and stroke styles, in drawing order.
struct Line {
  std::string style;  // stroke colour and dash
  std::vector<double> ys;
};
std::vector<Line> polylines(const std::string& svg) {
  std::vector<Line> lines;
  for (auto at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1)) {
    const std::string element = svg.substr(at, svg.find("/>", at) - at);
    const auto points = element.find("points=\"");
    Line line{element.substr(0, points), {}};
    std::istringstream in(element.substr(points + 8));
    double x, y;
    char comma;
    while (in >> x >> comma >> y) line.ys.push_back(y);
    lines.push_back(line);
  }
  return lines;
}

}  // namespace

TEST_CASE("line_chart_svg: the value axis spans the data, every curve has its own look, the legend is outside",
          "[demos]") {
  // Eleven curves 0.004 apart, falling from 1.7 to 1.6 bits/byte as the ablation's do: on an axis from 0 the
  // last points would lie 0.6 px apart; on the data's span, 7 px.
  std::vector<demo::Series> series;
  for (int k = 0; k < 11; ++k) series.push_back({"block " + std::to_string(k), {1.7 + 0.004 * k, 1.6 + 0.004 * k}});
  const std::string svg = demo::line_chart_svg(series, "t", "step", "bits/byte");
  const std::vector<Line> lines = polylines(svg);
  REQUIRE(lines.size() == 11);
  INFO("a value axis from 0 puts curves 0.004 apart within a pixel of each other");
  CHECK(lines[1].ys[1] - lines[0].ys[1] < -3.0);  // SVG y grows downwards: the higher value, the smaller y
  for (std::size_t a = 0; a < lines.size(); ++a)
    for (std::size_t b = a + 1; b < lines.size(); ++b) {
      INFO("curves " << a << " and " << b << " look alike: " << lines[a].style);
      CHECK(lines[a].style != lines[b].style);
    }
  const auto plot_right = 640 - 20;  // the plot's width; the legend starts right of it
  for (auto at = svg.find("<text x=\""); at != std::string::npos; at = svg.find("<text x=\"", at + 1))
    if (svg.compare(svg.find('>', at) + 1, 6, "block ") == 0) {
      INFO("a legend entry inside the plot, over the curves: " << svg.substr(at, 60));
      CHECK(std::stod(svg.substr(at + 9)) > plot_right);
    }
  // Data that reaches 0 keeps 0 on the axis (a learning rate warming up from 0); data above it is not pushed off.
  const std::vector<Line> warmup = polylines(demo::line_chart_svg({{"lr", {0.0, 0.5, 1.0}}}, "t", "step", "lr"));
  CHECK(warmup[0].ys[0] == 360 - 45);  // the bottom of the plot
}

// A bf16 run's MFU is over the bfloat16 peak: on a CPU with AMX that is many times the float32 one, which would
// print an MFU above 100%.
TEST_CASE("mfu_percent: over the peak of the precision the products run in", "[demos]") {
  CHECK(demo::mfu_percent(cpu::peak_flops(0), DType::float32) == Catch::Approx(100));
  CHECK(demo::mfu_percent(cpu::bf16_peak_flops(0), DType::bfloat16) == Catch::Approx(100));
  CHECK(demo::mfu_percent(cpu::peak_flops(0) / 4, DType::float32) == Catch::Approx(25));
}
