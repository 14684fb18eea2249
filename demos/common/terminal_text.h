#pragma once
// What the demos print: matrices as aligned text, CJK counted two columns wide, and a training run's progress.
#include <cstdint>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace stepformer::demo {

// Columns a UTF-8 string takes in a terminal: two for CJK characters, one for the rest.
std::size_t display_width(const std::string& s);

// A matrix [R, C] as aligned text with labels (right-aligned by display_width), values to 2 decimals.
std::string format_matrix(const Tensor& matrix, const std::vector<std::string>& row_labels,
                          const std::vector<std::string>& col_labels);

std::string duration(double seconds);  // "1m05s", "42s"
// Model FLOPs utilisation in percent: flops_per_s over the CPU's measured peak in the precision the products run in
// (cpu/peak.h: bfloat16 under a bf16 run's autocast); 0 where no peak applies (another device, a book page).
double mfu_percent(double flops_per_s, DType precision);
// A training run's progress line: one line per report on a pipe (CI logs), a redrawn bar on a terminal, with
// mfu_percent() where it applies (on another device no MFU is shown rather than a wrong one).
void progress(std::int64_t step, std::int64_t total, double loss, double tokens_per_s, double flops_per_s,
              double elapsed, const std::string& extra, DType precision = DType::float32);

}  // namespace stepformer::demo
