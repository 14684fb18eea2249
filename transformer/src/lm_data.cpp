// Chapter 12. Shape legend in transformer/config.h.
#include "transformer/lm_data.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <regex>
#include <sstream>

#include "autograd/errors.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "nn/errors.h"

namespace stepformer::transformer {

std::vector<Verse> parse_verses(const std::string& text) {
  static const std::regex line_format(R"(^([1-3]?[A-Za-z]+)[0-9]+:[0-9]+ (.*)$)");
  std::vector<Verse> verses;
  std::istringstream in(text);
  std::string line;
  for (std::int64_t number = 1; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    std::smatch m;
    if (!std::regex_match(line, m, line_format))
      throw ValueError(fmt::format("parse_verses: line {} is not 'Book1:1 text': '{}'", number, line.substr(0, 60)));
    verses.push_back({m[1].str(), m[2].str()});
  }
  return verses;
}

std::vector<Verse> read_kjv(const std::string& file, bool part) {
  std::string text;
  if (file.empty()) {
    const std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen("bible -f Gen1:1-Rev22:21 2>/dev/null", "r"), pclose);
    if (pipe) {
      char buffer[1 << 16];
      for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe.get())) > 0;) text.append(buffer, n);
    }
  } else {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw nn::IoError(fmt::format("read_kjv: cannot read {}", file));
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::vector<Verse> verses = parse_verses(text);
  if (verses.size() != 31102 && file.empty())
    throw nn::IoError(
        fmt::format("read_kjv: `bible -f Gen1:1-Rev22:21` gave {} verses, not 31102: install Debian's "
                    "bible-kjv (sudo apt-get install bible-kjv; ./run demo lm does it)",
                    verses.size()));
  if (part ? verses.empty() : verses.size() != 31102)
    throw nn::IoError(
        fmt::format("read_kjv: {} holds {} verses, not {}", file, verses.size(), part ? "at least one" : "31102"));
  return verses;
}

const std::vector<std::string>& kjv_valid_books() {
  static const std::vector<std::string> books{"Ruth", "Jonah", "Acts"};
  return books;
}

TextSplit split_by_books(const std::vector<Verse>& verses, const std::vector<std::string>& valid_books) {
  TextSplit split;
  for (const Verse& v : verses) {
    const bool held_out = std::find(valid_books.begin(), valid_books.end(), v.book) != valid_books.end();
    (held_out ? split.valid : split.train).push_back(v.text);
  }
  return split;
}

LMTokens LMTokens::bpe(Subwords subwords) {
  LMTokens t;
  t.bpe_ = std::move(subwords);
  return t;
}

LMTokens LMTokens::characters() { return {}; }

std::vector<std::string> LMTokens::pieces(std::string_view text) const {
  return bpe_ ? bpe_->encode(text) : char_tokens(std::string(text), /*keep_spaces=*/true);
}

std::string LMTokens::text(const std::vector<std::string>& pieces) const {
  return bpe_ ? bpe_->decode(pieces) : join(pieces, "");
}

Vocabulary LMTokens::vocabulary(const std::vector<std::string>& texts) const {
  if (bpe_) return bpe_->vocabulary();
  Vocabulary v;
  for (const std::string& text : texts)
    for (const std::string& c : pieces(text)) v.add(c);
  return v;
}

TokenStream encode_stream(const LMTokens& tokens, const Vocabulary& vocab, const std::vector<std::string>& texts) {
  TokenStream s;
  for (const std::string& text : texts) {
    for (const std::int64_t id : vocab.encode(tokens.pieces(text))) s.ids.push_back(id);
    s.ids.push_back(Vocabulary::kEos);
    s.bytes += static_cast<std::int64_t>(text.size()) + 1;
  }
  return s;
}

namespace {
LMBatch windows_at(const TokenStream& s, const std::vector<std::int64_t>& starts, std::int64_t T) {
  const std::int64_t B = static_cast<std::int64_t>(starts.size());
  std::vector<std::int64_t> inputs(static_cast<std::size_t>(B * T)), targets(inputs.size());
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t) {
      inputs[static_cast<std::size_t>(b * T + t)] = s.ids[static_cast<std::size_t>(starts[b] + t)];
      targets[static_cast<std::size_t>(b * T + t)] = s.ids[static_cast<std::size_t>(starts[b] + t + 1)];
    }
  return {from_vector(inputs, {B, T}, {DType::int64}), from_vector(targets, {B, T}, {DType::int64})};
}

void check_windows(const char* op, const TokenStream& s, std::int64_t B, std::int64_t T) {
  if (B < 1 || T < 1 || static_cast<std::int64_t>(s.ids.size()) < T + 1)
    throw ValueError(fmt::format("{}: {} windows of {} + 1 tokens from a stream of {}", op, B, T, s.ids.size()));
}
}  // namespace

LMBatch random_windows(const TokenStream& s, std::int64_t B, std::int64_t T, Generator& gen) {
  check_windows("random_windows", s, B, T);
  const std::uint64_t starts_count = s.ids.size() - static_cast<std::size_t>(T);  // starts 0 .. size - T - 1
  const std::uint64_t offset = gen.take(static_cast<std::uint64_t>(B));
  std::vector<std::int64_t> starts;
  for (std::int64_t b = 0; b < B; ++b)
    starts.push_back(
        static_cast<std::int64_t>(random_bits(gen.seed(), offset, static_cast<std::uint64_t>(b)) % starts_count));
  return windows_at(s, starts, T);
}

std::vector<LMBatch> sequential_windows(const TokenStream& s, std::int64_t B, std::int64_t T,
                                        std::int64_t max_windows) {
  check_windows("sequential_windows", s, B, T);
  std::vector<std::int64_t> starts;
  for (std::int64_t start = 0;
       start + T < static_cast<std::int64_t>(s.ids.size()) && static_cast<std::int64_t>(starts.size()) < max_windows;
       start += T)
    starts.push_back(start);
  std::vector<LMBatch> batches;
  for (std::size_t i = 0; i < starts.size(); i += static_cast<std::size_t>(B)) {
    const auto end =
        starts.begin() + static_cast<std::ptrdiff_t>(std::min(starts.size(), i + static_cast<std::size_t>(B)));
    batches.push_back(
        windows_at(s, std::vector<std::int64_t>(starts.begin() + static_cast<std::ptrdiff_t>(i), end), T));
  }
  return batches;
}

double lm_loss(LanguageModel& model, const std::vector<LMBatch>& batches) {
  const NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  const Device device = model.tokens->weight.device();
  double total = 0;
  std::int64_t tokens = 0;
  for (const LMBatch& b : batches) {
    const Tensor logits = model(b.inputs.to(device));  // [B, T, V]
    const std::int64_t n = b.targets.numel();
    const Tensor loss = cross_entropy(reshape(logits, {n, logits.size(2)}), reshape(b.targets.to(device), {n}));
    total += loss.item() * static_cast<double>(n);
    tokens += n;
  }
  model.train(was_training);
  return tokens > 0 ? total / static_cast<double>(tokens) : 0.0;
}

double bits_per_byte(double nats_per_token, std::int64_t tokens, std::int64_t bytes) {
  return nats_per_token * static_cast<double>(tokens) / (std::log(2.0) * static_cast<double>(bytes));
}

}  // namespace stepformer::transformer
