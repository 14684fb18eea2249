// The demos' text output: labels in other scripts stay aligned in a terminal.
#include <catch2/catch_test_macros.hpp>
#include <sstream>

#include "autograd/autograd.h"
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
