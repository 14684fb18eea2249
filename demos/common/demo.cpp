#include "demo.h"

#include <fmt/format.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "autograd/anomaly.h"
#include "autograd/ops.h"
#include "cpu/peak.h"
#include "nn/safetensors.h"

namespace stepformer::demo {

namespace {
std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

Tensor encode(const std::vector<std::vector<std::string>>& sentences, const std::vector<std::string>& vocab) {
  std::vector<std::int64_t> ids;
  for (const auto& s : sentences)
    for (const auto& w : s) ids.push_back(std::find(vocab.begin(), vocab.end(), w) - vocab.begin());
  return from_vector(ids, {static_cast<std::int64_t>(sentences.size()), static_cast<std::int64_t>(sentences[0].size())},
                     {DType::int64});
}

std::string pad_to(const std::string& s, std::size_t width) {
  const std::size_t w = display_width(s);
  return w >= width ? s : std::string(width - w, ' ') + s;
}

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
}  // namespace

// Code points a terminal draws two columns wide: the East Asian Wide and Fullwidth blocks (Hangul Jamo, CJK
// radicals to Yi, Hangul syllables, compatibility ideographs, fullwidth forms) and the emoji pictographs.
// Everything else, "▁" (U+2581, SentencePiece's word start) and accented Latin included, takes one.
std::size_t display_width(const std::string& s) {
  std::size_t w = 0;
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    char32_t cp = len == 1 ? c : len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
    for (std::size_t k = 1; k < len && i + k < s.size(); ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    const bool wide = (cp >= 0x1100 && cp <= 0x115F) || (cp >= 0x2E80 && cp <= 0xA4CF && cp != 0x303F) ||
                      (cp >= 0xAC00 && cp <= 0xD7A3) || (cp >= 0xF900 && cp <= 0xFAFF) ||
                      (cp >= 0xFE30 && cp <= 0xFE4F) || (cp >= 0xFF00 && cp <= 0xFF60) ||
                      (cp >= 0xFFE0 && cp <= 0xFFE6) || (cp >= 0x1F300 && cp <= 0x1F64F) ||
                      (cp >= 0x1F900 && cp <= 0x1F9FF) || (cp >= 0x20000 && cp <= 0x3FFFD);
    w += wide ? 2 : 1;
    i += len;
  }
  return w;
}

Tensor ToyData::src_ids() const { return encode(src, src_vocab); }
Tensor ToyData::tgt_in_ids() const { return encode(tgt_in, tgt_vocab); }

const ToyData& toy_data() {
  static const ToyData data = [] {
    ToyData d;
    d.src_vocab = words("P 我 有 一 个 好 朋 友 零 女 男");
    d.tgt_vocab = words("P S E I have a good friend . zero girl boy");
    const char* pairs[3][3] = {{"我 有 一 个 好 朋 友 P", "S I have a good friend .", "I have a good friend . E"},
                               {"我 有 零 个 女 朋 友 P", "S I have zero girl friend .", "I have zero girl friend . E"},
                               {"我 有 一 个 男 朋 友 P", "S I have a boy friend .", "I have a boy friend . E"}};
    for (const auto& p : pairs) {
      d.src.push_back(words(p[0]));
      d.tgt_in.push_back(words(p[1]));
      d.tgt_out.push_back(words(p[2]));
    }
    return d;
  }();
  return data;
}

namespace {
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

std::filesystem::path write_output(const std::filesystem::path& out_dir, const std::string& name,
                                   const std::string& text) {
  std::filesystem::create_directories(out_dir);
  const std::filesystem::path path = out_dir / name;
  nn::write_file_atomically(path, std::as_bytes(std::span(text.data(), text.size())));
  std::printf("wrote %s\n", path.string().c_str());
  return path;
}

std::string format_matrix(const Tensor& matrix, const std::vector<std::string>& rows,
                          const std::vector<std::string>& cols) {
  const std::int64_t R = matrix.size(0), C = matrix.size(1);
  const auto v = matrix.to_vector<double>();
  std::string out = "        ";
  for (std::int64_t c = 0; c < C; ++c) out += pad_to(c < static_cast<std::int64_t>(cols.size()) ? cols[c] : "", 7);
  out += "\n";
  for (std::int64_t r = 0; r < R; ++r) {
    out += pad_to(r < static_cast<std::int64_t>(rows.size()) ? rows[r] : "", 7) + " ";
    for (std::int64_t c = 0; c < C; ++c) out += fmt::format("{:7.2f}", v[static_cast<std::size_t>(r * C + c)]);
    out += "\n";
  }
  return out;
}

std::string duration(double seconds) {
  const auto s = static_cast<long>(seconds);
  return s >= 60 ? fmt::format("{}m{:02d}s", s / 60, s % 60) : fmt::format("{}s", s);
}

void progress(std::int64_t step, std::int64_t total, double loss, double tokens_per_s, double flops_per_s,
              double elapsed, const std::string& extra) {
  static const bool tty = isatty(STDOUT_FILENO);
  const int filled = static_cast<int>(30.0 * static_cast<double>(step) / static_cast<double>(total));
  const double eta = elapsed / static_cast<double>(step) * static_cast<double>(total - step);
  // The peak is the CPU's; on another device the line shows no MFU rather than a wrong one.
  static const double peak = default_device() == kCPU ? cpu::peak_flops(0) : 0;
  const std::string mfu = peak > 0 ? fmt::format("  MFU {:4.1f}%", 100 * flops_per_s / peak) : "";
  fmt::print("{}[{}{}] step {:5d}/{}  loss {:.3f}  {:6.0f} tok/s{}  ETA {:>6}{}{}", tty ? "\r" : "",
             std::string(filled, '#'), std::string(30 - filled, '.'), step, total, loss, tokens_per_s, mfu,
             duration(eta), extra, tty ? "" : "\n");
  std::fflush(stdout);
}

void add_common_options(CLI::App& app, CommonOptions& o, bool cpu_threads) {
  app.add_option("--out", o.out, "folder for the pictures")->capture_default_str();
  app.add_option("--seed", o.seed, "seed for the weights")->capture_default_str();
  if (cpu_threads)
    app.add_option_function<int>(
           "--threads", [](int n) { omp_set_num_threads(n); }, "CPU threads (OpenMP)")
        ->default_str("all cores")
        ->check(CLI::Range(1, 1024));
  app.add_flag_function(
      "--detect-anomaly", [](std::int64_t) { set_detect_anomaly(true); },
      "check every op's output and gradient for NaN/inf and stop at the first (slow; autograd/anomaly.h)");
  // Every tensor the demo makes without naming a device lands here: weights, data, masks.
  app.add_option_function<std::string>(
         "--device", [](const std::string& name) { set_default_device(parse_device(name)); },
         "cpu, cuda-sim (the CUDA kernels run on the CPU; slow) or cuda (a GPU; needs an nvcc build)")
      ->default_str("cpu")
      ->check([](const std::string& name) {
        try {
          backend_for(parse_device(name));  // built, and usable on this machine
          return std::string();
        } catch (const DeviceError& e) {
          return std::string(e.what());
        }
      });
}

transformer::Config small_stack_config() {
  transformer::Config cfg;
  cfg.n_layers = 2;
  cfg.d_model = 32;
  cfg.n_heads = 4;
  cfg.max_len = 16;
  return cfg;
}

void add_stack_options(CLI::App& app, transformer::Config& cfg) {
  app.add_option("--layers", cfg.n_layers, "N")->capture_default_str()->check(CLI::Range(1, 24));
  app.add_option("--d-model", cfg.d_model, "model size")->capture_default_str()->check(CLI::Range(2, 1024));
  app.add_option("--heads", cfg.n_heads, "attention heads")->capture_default_str()->check(CLI::Range(1, 64));
}

void finish_stack_config(transformer::Config& cfg) {
  cfg.d_ff = 2 * cfg.d_model;
  cfg.src_vocab = static_cast<std::int64_t>(toy_data().src_vocab.size());
  cfg.tgt_vocab = static_cast<std::int64_t>(toy_data().tgt_vocab.size());
}

}  // namespace stepformer::demo
