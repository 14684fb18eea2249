// same_picture DOCS_SVG DEMO_SVG: the picture a doc shows must be the one its demo writes today. Text must be
// equal; numbers (coordinates, colours, tick labels) may differ by at most one unit of the last printed
// digit's column to the left — 1.0 — because another CPU's vector units may round a value differently, and
// the demo prints colours as integers and coordinates to 0.1. A doc picture made by older code, other flags
// or another seed differs by far more, and fails with the first difference and the command to refresh it.
// TOLERANCE widens the 1.0 for a picture whose values pass through bfloat16 (chapter 11's curves): rounding to
// 8 bits of mantissa turns the GEMM kernels' different sum orders (AVX2, AVX-512, vdpbf16ps) into points up
// to 9.8 px apart.
#include <cmath>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Tokens {
  std::vector<std::string> text;  // the text between numbers (one more entry than numbers)
  std::vector<double> numbers;
};

Tokens tokenize(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string s = buffer.str();
  static const std::regex number(R"(-?[0-9]+(\.[0-9]+)?(e[-+]?[0-9]+)?)");
  Tokens t;
  std::size_t last = 0;
  for (auto it = std::sregex_iterator(s.begin(), s.end(), number); it != std::sregex_iterator(); ++it) {
    t.text.push_back(s.substr(last, static_cast<std::size_t>(it->position()) - last));
    t.numbers.push_back(std::stod(it->str()));
    last = static_cast<std::size_t>(it->position() + it->length());
  }
  t.text.push_back(s.substr(last));
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::cerr << "usage: same_picture DOCS_SVG DEMO_SVG [TOLERANCE (default 1)]\n";
    return 2;
  }
  const std::string doc = argv[1], demo = argv[2];
  const double tolerance = argc == 4 ? std::stod(argv[3]) : 1.0;
  const Tokens a = tokenize(doc), b = tokenize(demo);
  const auto refresh = "\nthe demo draws it differently now: if that is intended, copy " + demo + " to " + doc + "\n";
  if (a.numbers.size() != b.numbers.size()) {
    std::cout << doc << " has " << a.numbers.size() << " numbers, the demo's picture " << b.numbers.size() << refresh;
    return 1;
  }
  for (std::size_t i = 0; i < a.text.size(); ++i)
    if (a.text[i] != b.text[i]) {
      std::cout << "text differs at number " << i << ": \"" << a.text[i] << "\" vs \"" << b.text[i] << "\"" << refresh;
      return 1;
    }
  for (std::size_t i = 0; i < a.numbers.size(); ++i)
    if (std::abs(a.numbers[i] - b.numbers[i]) > tolerance) {
      std::cout << "number " << i << " after \"" << a.text[i] << "\": " << a.numbers[i] << " vs " << b.numbers[i]
                << refresh;
      return 1;
    }
  std::cout << doc << ": the demo's picture, " << a.numbers.size() << " numbers within " << tolerance << "\n";
  return 0;
}
