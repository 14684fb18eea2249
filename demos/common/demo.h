#pragma once
// What the chapter demos share: the seed's toy data, an SVG heatmap, and writing output files.
// Demos are programs: they print; the libraries they call return values.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "transformer/config.h"

namespace stepformer::demo {

// The three toy pairs of seed 000 (docs/seeds.md: "我 有 一 个 好 朋 友" -> "I have a good friend ."), with
// vocabularies whose ids are dense and unique. (Seed 000 listed '.' twice in the target vocabulary, so '.' got id 11
// == the vocabulary size; here every token has exactly one id.) PAD is 0 in both; BOS 'S' and EOS 'E'.
struct ToyData {
  std::vector<std::string> src_vocab, tgt_vocab;  // id -> token
  std::vector<std::vector<std::string>> src, tgt_in, tgt_out;
  Tensor src_ids() const;     // int64 [3, 8]
  Tensor tgt_in_ids() const;  // int64 [3, 7]: "S I have ..."
};
const ToyData& toy_data();

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

// Writes `text` to out_dir/name atomically, prints "wrote <path>", returns the path.
std::filesystem::path write_output(const std::filesystem::path& out_dir, const std::string& name,
                                   const std::string& text);

// Columns a UTF-8 string takes in a terminal: two for CJK characters, one for the rest.
std::size_t display_width(const std::string& s);

// A matrix [R, C] as aligned text with labels (right-aligned by display_width), values to 2 decimals.
std::string format_matrix(const Tensor& matrix, const std::vector<std::string>& row_labels,
                          const std::vector<std::string>& col_labels);

std::string duration(double seconds);  // "1m05s", "42s"
// A training run's progress line: one line per report on a pipe (CI logs), a redrawn bar on a terminal. MFU: the
// model FLOPs done per second over the CPU's measured peak (cpu/peak.h); on another device no MFU is shown rather
// than a wrong one.
void progress(std::int64_t step, std::int64_t total, double loss, double tokens_per_s, double flops_per_s,
              double elapsed, const std::string& extra);

// Options every demo has: --out DIR and --seed S.
struct CommonOptions {
  std::filesystem::path out = "stepformer-out";
  std::uint64_t seed = 1;
};
// --out, --seed, --detect-anomaly, --device, and --threads (OpenMP's CPU threads) unless the demo has its own.
void add_common_options(CLI::App& app, CommonOptions& o, bool cpu_threads = true);

// A small stack for the encoder and decoder demos (N 2, D 32, 4 heads, F = 2 D, toy vocabularies), with
// --layers, --d-model and --heads; call finish_stack_config after parsing.
transformer::Config small_stack_config();
void add_stack_options(CLI::App& app, transformer::Config& cfg);
void finish_stack_config(transformer::Config& cfg);  // d_ff = 2 d_model; vocabulary sizes of toy_data()

}  // namespace stepformer::demo
