#pragma once
// The demos' SVG pictures: heatmaps of a matrix and line charts of curves, drawn as text, no library.
#include <cstddef>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace stepformer::demo {

// A matrix [R, C] as an SVG heatmap (white = min, dark blue = max), with row and column labels.
std::string heatmap_svg(const Tensor& matrix, const std::vector<std::string>& row_labels,
                        const std::vector<std::string>& col_labels, const std::string& title);

// A line chart of one or more named curves (e.g. loss curves), with x ticks, a title, axis labels and, for
// several curves, a legend to the right of the plot. A series without x values is drawn against 1..n (steps);
// one with x values (as many as values) against those, so a validation loss measured every 100 steps shares
// the training loss's axis. The value axis spans the data (from 0 only where the data reaches it), so curves
// 0.04 apart stay apart; six colours, then the same six dashed, then dotted.
struct Series {
  std::string name;
  std::vector<double> values;
  std::vector<double> x = {};
};
std::string line_chart_svg(const std::vector<Series>& series, const std::string& title, const std::string& x_label,
                           const std::string& y_label);

// Pale fills for the i-th of several regions of a picture (blocks of a grid, buckets, slices), cycling after six.
const char* region_fill(std::size_t i);

}  // namespace stepformer::demo
