#include "pictures.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "terminal_text.h"

namespace stepformer::demo {

namespace {
std::string escape_xml(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else
      out += c;
  }
  return out;
}

// The pictures' 12 px sans-serif text takes about 7 px a column: room for a label of `columns` columns.
int text_px(std::size_t columns) { return 7 * static_cast<int>(columns); }
}  // namespace

std::string heatmap_svg(const Tensor& matrix, const std::vector<std::string>& rows,
                        const std::vector<std::string>& cols, const std::string& title) {
  const std::int64_t R = matrix.size(0), C = matrix.size(1);
  const auto v = matrix.to_vector<double>();
  const double lo = *std::min_element(v.begin(), v.end()), hi = *std::max_element(v.begin(), v.end());
  std::size_t widest = 0;  // row labels are right-aligned at the grid's left edge: leave room for the longest
  for (const auto& r : rows) widest = std::max(widest, display_width(r));
  const int cell = C > 40 ? 8 : 36, left = rows.empty() ? 10 : std::max(70, text_px(widest) + 16),
            top = 50 + (cols.empty() ? 0 : 20);
  const int width = std::max(left + static_cast<int>(C) * cell + 20, left + text_px(title.size()) + 20);
  const int height = top + static_cast<int>(R) * cell + 20;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"20\" font-size=\"14\">{}</text>\n"
      "<text x=\"{}\" y=\"38\" fill=\"#555\">white = {:.3g}, dark blue = {:.3g}</text>\n",
      width, height, left, escape_xml(title), left, lo, hi);
  for (std::int64_t r = 0; r < R; ++r)
    for (std::int64_t c = 0; c < C; ++c) {
      const double t = hi > lo ? (v[static_cast<std::size_t>(r * C + c)] - lo) / (hi - lo) : 0.0;
      const int red = static_cast<int>(255 - t * (255 - 8)), green = static_cast<int>(255 - t * (255 - 48)),
                blue = static_cast<int>(255 - t * (255 - 107));
      svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"rgb({},{},{})\"/>\n",
                         left + c * cell, top + r * cell, cell, cell, red, green, blue);
    }
  for (std::size_t r = 0; r < rows.size(); ++r)
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", left - 6,
                       top + static_cast<int>(r) * cell + cell / 2 + 4, escape_xml(rows[r]));
  for (std::size_t c = 0; c < cols.size(); ++c)
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                       left + static_cast<int>(c) * cell + cell / 2, top - 6, escape_xml(cols[c]));
  return svg + "</svg>\n";
}

std::string line_chart_svg(const std::vector<Series>& series, const std::string& title, const std::string& x_label,
                           const std::string& y_label) {
  static const char* const kColours[] = {"#08306b", "#d94801", "#238b45", "#6a51a3", "#cb181d", "#737373"};
  static const char* const kDashes[] = {"", " stroke-dasharray=\"6 3\"", " stroke-dasharray=\"1.5 2.5\""};
  std::size_t longest = 0;  // the legend's column, right of the plot: a line, then the names
  for (const Series& s : series) longest = std::max(longest, display_width(s.name));
  const int legend = series.size() > 1 ? 36 + text_px(longest) : 0;
  const int W = 640 + legend, H = 360, left = 60, right = 20 + legend, top = 40, bottom = 45;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{}\" y=\"22\" font-size=\"14\">{}</text>\n",
      W, H, left, escape_xml(title));
  auto x_of = [](const Series& s, std::size_t i) { return s.x.empty() ? double(i + 1) : s.x[i]; };
  double x_lo = INFINITY, x_hi = -INFINITY, lo = INFINITY, hi = -INFINITY;
  for (const Series& s : series) {
    if (!s.x.empty() && s.x.size() != s.values.size())
      throw std::invalid_argument(fmt::format("line_chart_svg: series '{}' has {} x values for {} values", s.name,
                                              s.x.size(), s.values.size()));
    for (std::size_t i = 0; i < s.values.size(); ++i) {
      x_lo = std::min(x_lo, x_of(s, i)), x_hi = std::max(x_hi, x_of(s, i));
      lo = std::min(lo, s.values[i]), hi = std::max(hi, s.values[i]);
    }
  }
  if (!(x_lo <= x_hi)) return svg + "</svg>\n";
  const double margin = hi > lo ? 0.05 * (hi - lo) : std::max(1e-9, 0.05 * std::abs(hi));
  lo = lo >= 0.0 && lo - margin < 0.0 ? 0.0 : lo - margin;  // a margin below; 0 if it would cross it
  hi += margin;
  auto px = [&](double v) { return left + (W - left - right) * (x_hi > x_lo ? (v - x_lo) / (x_hi - x_lo) : 0.0); };
  auto py = [&](double v) { return top + (H - top - bottom) * (1.0 - (v - lo) / (hi - lo)); };
  svg += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#888\"/>\n", left, H - bottom, W - right,
                     H - bottom);
  svg += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#888\"/>\n", left, top, left, H - bottom);
  for (int t = 0; t <= 4; ++t) {  // value ticks
    const double v = lo + (hi - lo) * t / 4.0;
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:.3g}</text>\n", left - 6, py(v) + 4, v);
  }
  for (int t = 0; t <= 4; ++t) {  // x ticks: the first x, then quarters of the range
    const double v = x_lo + (x_hi - x_lo) * t / 4.0;
    svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#888\"/>\n", px(v),
                       H - bottom, H - bottom + 4);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{:.4g}</text>\n", px(v), H - bottom + 16,
                       std::round(v));
  }
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", (left + W - right) / 2, H - 8,
                     escape_xml(x_label));
  svg += fmt::format("<text x=\"14\" y=\"{}\" transform=\"rotate(-90 14 {})\" text-anchor=\"middle\">{}</text>\n",
                     (top + H - bottom) / 2, (top + H - bottom) / 2, escape_xml(y_label));
  for (std::size_t k = 0; k < series.size(); ++k) {
    const char* colour = kColours[k % std::size(kColours)];
    const char* dash = kDashes[k / std::size(kColours) % std::size(kDashes)];
    svg += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"{} points=\"", colour, dash);
    for (std::size_t i = 0; i < series[k].values.size(); ++i)
      svg += fmt::format("{:.1f},{:.1f} ", px(x_of(series[k], i)), py(series[k].values[i]));
    svg += "\"/>\n";
    if (legend)  // a line of the series' colour and dash, then its name
      svg += fmt::format(
          "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"{3}\" stroke-width=\"1.5\"{4}/>"
          "<text x=\"{5}\" y=\"{6}\">{7}</text>\n",
          W - legend, top + 8 + 16 * static_cast<int>(k), W - legend + 20, colour, dash, W - legend + 26,
          top + 12 + 16 * static_cast<int>(k), escape_xml(series[k].name));
  }
  return svg + "</svg>\n";
}

const char* region_fill(std::size_t i) {
  static const char* const kFills[] = {"#9ecae1", "#fdae6b", "#a1d99b", "#bcbddc", "#fc9272", "#c7e9c0"};
  return kFills[i % 6];
}

}  // namespace stepformer::demo
