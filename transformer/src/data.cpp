// Chapter 07: data.
#include "transformer/data.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "autograd/errors.h"
#include "autograd/ops.h"

namespace stepformer::transformer {

Vocabulary::Vocabulary() {
  for (const char* s : {"<pad>", "<bos>", "<eos>", "<unk>"}) {
    ids_.emplace(s, size());
    tokens_.emplace_back(s);
  }
}

Vocabulary Vocabulary::build(const std::vector<std::vector<std::string>>& corpus, std::int64_t min_count) {
  std::unordered_map<std::string, std::int64_t> counts;
  for (const auto& sentence : corpus)
    for (const auto& token : sentence) ++counts[token];
  Vocabulary v;
  for (const auto& sentence : corpus)
    for (const auto& token : sentence)
      if (counts[token] >= min_count) v.add(token);
  return v;
}

std::int64_t Vocabulary::add(const std::string& token) {
  auto [it, fresh] = ids_.try_emplace(token, size());
  if (fresh) tokens_.push_back(token);
  return it->second <= kUnk ? kUnk : it->second;  // a special's name in text is no word
}

std::int64_t Vocabulary::id(const std::string& token) const {
  auto it = ids_.find(token);
  return it == ids_.end() || it->second <= kUnk ? kUnk : it->second;
}

const std::string& Vocabulary::token(std::int64_t id) const {
  if (id < 0 || id >= size())
    throw IndexError(fmt::format("Vocabulary: id {} is out of range for {} tokens", id, size()));
  return tokens_[static_cast<std::size_t>(id)];
}

std::vector<std::int64_t> Vocabulary::encode(const std::vector<std::string>& tokens) const {
  std::vector<std::int64_t> out;
  for (const auto& t : tokens) out.push_back(id(t));
  return out;
}

std::vector<std::string> Vocabulary::decode(const std::vector<std::int64_t>& ids) const {
  std::vector<std::string> out;
  for (std::int64_t i : ids) {
    if (i == kEos) break;
    if (i != kPad && i != kBos) out.push_back(token(i));
  }
  return out;
}

std::vector<std::string> word_tokens(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::vector<std::string> char_tokens(const std::string& text, bool keep_spaces) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    const std::size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (keep_spaces || !std::isspace(c)) out.push_back(text.substr(i, len));
    i += len;
  }
  return out;
}

std::string join(const std::vector<std::string>& tokens, const std::string& sep) {
  std::string out;
  for (std::size_t i = 0; i < tokens.size(); ++i) out += (i ? sep : "") + tokens[i];
  return out;
}

Batch make_batch(const std::vector<Pair>& pairs, const Vocabulary& sv, const Vocabulary& tv) {
  if (pairs.empty()) throw ValueError("make_batch: no pairs");
  std::size_t S = 0, T = 0;
  for (const Pair& p : pairs) {
    S = std::max(S, p.src.size());
    T = std::max(T, p.tgt.size() + 1);
  }
  const auto B = static_cast<std::int64_t>(pairs.size());
  std::vector<std::int64_t> src(B * S, Vocabulary::kPad), tin(B * T, Vocabulary::kPad), tout(B * T, Vocabulary::kPad);
  Batch batch;
  for (std::size_t b = 0; b < pairs.size(); ++b) {
    const auto s = sv.encode(pairs[b].src), t = tv.encode(pairs[b].tgt);
    std::copy(s.begin(), s.end(), src.begin() + static_cast<std::ptrdiff_t>(b * S));
    tin[b * T] = Vocabulary::kBos;
    std::copy(t.begin(), t.end(), tin.begin() + static_cast<std::ptrdiff_t>(b * T + 1));
    std::copy(t.begin(), t.end(), tout.begin() + static_cast<std::ptrdiff_t>(b * T));
    tout[b * T + t.size()] = Vocabulary::kEos;
    batch.target_tokens += static_cast<std::int64_t>(t.size()) + 1;
  }
  batch.src = from_vector(src, {B, static_cast<std::int64_t>(S)}, {DType::int64});
  batch.tgt_in = from_vector(tin, {B, static_cast<std::int64_t>(T)}, {DType::int64});
  batch.tgt_out = from_vector(tout, {B, static_cast<std::int64_t>(T)}, {DType::int64});
  return batch;
}

std::vector<Batch> make_batches(std::vector<Pair> pairs, const Vocabulary& sv, const Vocabulary& tv,
                                std::int64_t batch_size) {
  if (batch_size < 1) throw ValueError(fmt::format("make_batches: batch_size must be positive, got {}", batch_size));
  std::stable_sort(pairs.begin(), pairs.end(), [](const Pair& a, const Pair& b) {
    return std::pair(a.src.size(), a.tgt.size()) < std::pair(b.src.size(), b.tgt.size());  // similar lengths together
  });
  std::vector<Batch> out;
  for (std::size_t i = 0; i < pairs.size(); i += static_cast<std::size_t>(batch_size)) {
    const auto end = std::min(pairs.size(), i + static_cast<std::size_t>(batch_size));
    out.push_back(make_batch(
        {pairs.begin() + static_cast<std::ptrdiff_t>(i), pairs.begin() + static_cast<std::ptrdiff_t>(end)}, sv, tv));
  }
  return out;
}

std::vector<Batch> make_token_batches(std::vector<Pair> pairs, const Vocabulary& sv, const Vocabulary& tv,
                                      std::int64_t max_tokens) {
  if (max_tokens < 1)
    throw ValueError(fmt::format("make_token_batches: max_tokens must be positive, got {}", max_tokens));
  std::stable_sort(pairs.begin(), pairs.end(), [](const Pair& a, const Pair& b) {
    return std::pair(a.src.size(), a.tgt.size()) < std::pair(b.src.size(), b.tgt.size());
  });
  std::vector<Batch> out;
  std::size_t first = 0, longest = 0;  // the open batch: pairs[first, i), its longest padded side
  for (std::size_t i = 0; i <= pairs.size(); ++i) {
    const std::size_t len = i < pairs.size() ? std::max(pairs[i].src.size(), pairs[i].tgt.size() + 1) : 0;
    const bool fits =
        i < pairs.size() && (i - first + 1) * std::max(longest, len) <= static_cast<std::size_t>(max_tokens);
    if (!fits && i > first) {  // close the open batch (a pair longer than the budget still gets one of its own)
      out.push_back(make_batch(
          {pairs.begin() + static_cast<std::ptrdiff_t>(first), pairs.begin() + static_cast<std::ptrdiff_t>(i)}, sv,
          tv));
      first = i, longest = 0;
    }
    longest = std::max(longest, len);
  }
  return out;
}

std::vector<Pair> toy_pairs() {
  return {{word_tokens("我 有 一 个 好 朋 友"), word_tokens("I have a good friend .")},
          {word_tokens("我 有 零 个 女 朋 友"), word_tokens("I have zero girl friend .")},
          {word_tokens("我 有 一 个 男 朋 友"), word_tokens("I have a boy friend .")}};
}

// --- numerals -----------------------------------------------------------------------------------------

std::string chinese_numeral(std::int64_t n) {
  if (n < 1 || n > NumeralTask::kMax) throw ValueError(fmt::format("chinese_numeral: {} is outside 1..99999", n));
  static const char* digit[] = {"零", "一", "二", "三", "四", "五", "六", "七", "八", "九"};
  static const char* unit[] = {"", "十", "百", "千", "万"};
  std::string out;
  bool started = false, zero_pending = false;
  for (int pos = 4; pos >= 0; --pos) {
    std::int64_t p10 = 1;
    for (int i = 0; i < pos; ++i) p10 *= 10;
    const std::int64_t d = n / p10 % 10;
    if (d == 0) {
      zero_pending = started;  // a gap inside the number is read as one 零
      continue;
    }
    if (zero_pending) out += digit[0];
    zero_pending = false;
    if (!(pos == 1 && d == 1 && !started)) out += digit[d];  // 十一, not 一十一, at the start
    out += unit[pos];
    started = true;
  }
  return out;
}

std::string english_number(std::int64_t n) {
  if (n < 1 || n > NumeralTask::kMax) throw ValueError(fmt::format("english_number: {} is outside 1..99999", n));
  static const char* ones[] = {"",         "one",     "two",     "three",     "four",     "five",    "six",
                               "seven",    "eight",   "nine",    "ten",       "eleven",   "twelve",  "thirteen",
                               "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"};
  static const char* tens[] = {"", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"};
  auto below_100 = [&](std::int64_t x) -> std::string {
    if (x < 20) return ones[x];
    return std::string(tens[x / 10]) + (x % 10 ? std::string(" ") + ones[x % 10] : "");
  };
  auto below_1000 = [&](std::int64_t x) -> std::string {
    if (x < 100) return below_100(x);
    return std::string(ones[x / 100]) + " hundred" + (x % 100 ? " " + below_100(x % 100) : "");
  };
  if (n < 1000) return below_1000(n);
  const std::int64_t rest = n % 1000;
  return below_1000(n / 1000) + " thousand" +
         (rest == 0    ? ""
          : rest < 100 ? " and " + below_100(rest)
                       : " " + below_1000(rest));
}

Pair numeral_pair(std::int64_t n) { return {char_tokens(chinese_numeral(n)), word_tokens(english_number(n))}; }

NumeralVocabularies numeral_vocabularies() {
  NumeralVocabularies v;
  for (std::int64_t n = 1; n <= NumeralTask::kMax; n += 1) {  // numbers that between them use every token
    if (n > 200 && n % 97 != 0 && n != 10003 && n != 10300) continue;
    const Pair p = numeral_pair(n);
    for (const auto& t : p.src) v.src.add(t);
    for (const auto& t : p.tgt) v.tgt.add(t);
  }
  for (const char* w : {"thousand", "hundred", "and", "ten", "eleven", "twelve"}) v.tgt.add(w);
  return v;
}

NumeralTask::NumeralTask(std::uint64_t seed, double test_fraction) : seed_(seed), test_fraction_(test_fraction) {
  if (!(test_fraction > 0 && test_fraction < 1))
    throw ValueError(fmt::format("NumeralTask: test_fraction must be in (0, 1), got {}", test_fraction));
}

bool NumeralTask::is_test(std::int64_t n) const {
  return uniform01(random_bits(seed_ ^ 0x5eed, 0, static_cast<std::uint64_t>(n))) < test_fraction_;
}

std::vector<Pair> NumeralTask::train_batch(std::int64_t size, Generator& gen) const {
  std::vector<Pair> out;
  while (static_cast<std::int64_t>(out.size()) < size) {
    // Uniform over the number of digits first, then within: short numbers are as common as long ones.
    const auto u = rand({2}, gen, {DType::float64}).to_vector<double>();
    const int digits = 1 + static_cast<int>(u[0] * 5);
    std::int64_t lo = 1;
    for (int i = 1; i < digits; ++i) lo *= 10;
    const std::int64_t n = lo + static_cast<std::int64_t>(u[1] * static_cast<double>(lo * 10 - lo - (lo == 1)));
    if (!is_test(n)) out.push_back(numeral_pair(n));
  }
  return out;
}

std::vector<Pair> NumeralTask::test_set(std::int64_t size) const {
  std::vector<Pair> out;
  // Spread over the whole range: step through it with a stride coprime to 10.
  for (std::int64_t i = 0, n = 1; static_cast<std::int64_t>(out.size()) < size && i < kMax;
       ++i, n = (n + 7919) % kMax + 1)
    if (is_test(n)) out.push_back(numeral_pair(n));
  return out;
}

}  // namespace stepformer::transformer
