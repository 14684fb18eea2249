#include "terminal_text.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

#include "cpu/peak.h"

namespace stepformer::demo {

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

namespace {
std::string pad_to(const std::string& s, std::size_t width) {
  const std::size_t w = display_width(s);
  return w >= width ? s : std::string(width - w, ' ') + s;
}
}  // namespace

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

// The peak is the CPU's: none on another device, nor in a book page (WebAssembly), where the peak measured would be
// the portable micro-kernel's, not the CPU's.
double mfu_percent(double flops_per_s, DType precision) {
#if defined(__EMSCRIPTEN__)
  (void)flops_per_s, (void)precision;
  return 0;
#else
  if (default_device() != kCPU) return 0;
  const double peak = precision == DType::bfloat16 ? cpu::bf16_peak_flops(0) : cpu::peak_flops(0);  // measured once
  return 100 * flops_per_s / peak;
#endif
}

void progress(std::int64_t step, std::int64_t total, double loss, double tokens_per_s, double flops_per_s,
              double elapsed, const std::string& extra, DType precision) {
#if defined(__EMSCRIPTEN__)  // a book page shows what the demo prints as lines (tools/book/book.js)
  constexpr bool tty = false;
#else
  static const bool tty = isatty(STDOUT_FILENO);
#endif
  const int filled = static_cast<int>(30.0 * static_cast<double>(step) / static_cast<double>(total));
  const double eta = elapsed / static_cast<double>(step) * static_cast<double>(total - step);
  const double percent = mfu_percent(flops_per_s, precision);
  const std::string mfu = percent > 0 ? fmt::format("  MFU {:4.1f}%", percent) : "";
  fmt::print("{}[{}{}] step {:5d}/{}  loss {:.3f}  {:6.0f} tok/s{}  ETA {:>6}{}{}", tty ? "\r" : "",
             std::string(filled, '#'), std::string(30 - filled, '.'), step, total, loss, tokens_per_s, mfu,
             duration(eta), extra, tty ? "" : "\n");
  std::fflush(stdout);
}

}  // namespace stepformer::demo
