// Chapter 07: decoding. Shape legend in transformer/config.h.
#include "transformer/decoding.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "autograd/errors.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"

namespace stepformer::transformer {

namespace {

Tensor ids_tensor(const std::vector<std::int64_t>& v, std::int64_t B, Device device) {
  return from_vector(v, {B, static_cast<std::int64_t>(v.size()) / B}, {DType::int64, device});
}

// One decoding step for a batch of prefixes: the next token's log-probabilities [B, V]. With a cache, only
// the newest token is fed; without, the whole prefix is decoded again and its last row is used.
class Stepper {
 public:
  Stepper(Transformer& model, const Tensor& src, bool use_cache) : model_(model), use_cache_(use_cache) {
    encoded_ = model.encode(src);  // memory [B, S, D], src_blocked [B, 1, 1, S]
  }
  Tensor next_log_probs(const std::vector<std::vector<std::int64_t>>& prefixes) {
    const auto B = static_cast<std::int64_t>(prefixes.size());
    Tensor hidden;  // [B, 1, D]
    if (use_cache_) {
      std::vector<std::int64_t> last;
      for (const auto& p : prefixes) last.push_back(p.back());
      hidden = model_.decoder->step(ids_tensor(last, B, encoded_.memory.device()), encoded_, cache_);
    } else {
      std::vector<std::int64_t> all;
      for (const auto& p : prefixes) all.insert(all.end(), p.begin(), p.end());
      const Tensor h = (*model_.decoder)(ids_tensor(all, B, encoded_.memory.device()), encoded_).hidden;  // [B, T, D]
      hidden = narrow(h, 1, h.size(1) - 1, 1);
    }
    return reshape(log_softmax(model_.logits(hidden), -1), {B, -1});  // [B, V]
  }
  // Beam search reorders its prefixes every step; the cache rows must follow their prefixes.
  void reorder(const std::vector<std::int64_t>& rows) {
    auto pick = [&rows](const Tensor& t) {
      std::vector<Tensor> parts;
      for (std::int64_t r : rows) parts.push_back(narrow(t, 0, r, 1));
      return cat(parts, 0);
    };
    if (use_cache_ && cache_.length > 0) {
      for (auto* list : {&cache_.self_k, &cache_.self_v, &cache_.cross_k, &cache_.cross_v})
        for (Tensor& t : *list) t = pick(t);
    }
    encoded_.memory = pick(encoded_.memory);
    encoded_.src_blocked = pick(encoded_.src_blocked);
  }

 private:
  Transformer& model_;
  EncoderOutput encoded_;  // the source's memory and PAD mask, rows reordered with the beams
  bool use_cache_;
  DecoderCache cache_;
};

// Never PAD or BOS: a generated PAD would be masked as padding when the prefix is decoded again, and BOS
// only starts a sequence. Nor UNK (unless o.unk < 0): "<unk>" is never a useful word of a translation.
bool may_generate(std::int64_t t, const DecodeOptions& o) { return t != o.pad && t != o.bos && t != o.unk; }

std::int64_t step_limit(const Transformer& model, const DecodeOptions& o) {
  return std::min(o.max_len, model.cfg.max_len - 1);  // the prefix (BOS + tokens) must fit the PE table
}

void check_src(const Tensor& src) {
  if (src.dim() != 2 || src.dtype() != DType::int64)
    throw ShapeError(fmt::format("decode: expected source ids int64 [B, S], got {} {}", dtype_name(src.dtype()),
                                 to_string(src.shape())));
}

}  // namespace

std::int64_t best_token(const float* row, std::int64_t V, const DecodeOptions& o) {
  std::int64_t best = -1;
  for (std::int64_t t = 0; t < V; ++t)
    if (may_generate(t, o) && (best < 0 || row[t] > row[best])) best = t;
  return best;
}

std::vector<std::vector<std::int64_t>> greedy_decode(Transformer& model, const Tensor& src, const DecodeOptions& o) {
  check_src(src);
  NoGradGuard no_grad;
  const std::int64_t B = src.size(0);
  Stepper stepper(model, src, o.use_cache);
  // EXERCISE 7.1: feed the prefixes, append each row's best token, stop at EOS
  std::vector<std::vector<std::int64_t>> prefixes(static_cast<std::size_t>(B), {o.bos});
  std::vector<std::vector<std::int64_t>> out(static_cast<std::size_t>(B));
  std::vector<bool> done(static_cast<std::size_t>(B), false);
  for (std::int64_t step = 0; step < step_limit(model, o); ++step) {
    const auto lp = stepper.next_log_probs(prefixes).to_vector<float>();  // [B, V] row-major
    const auto V = static_cast<std::int64_t>(lp.size()) / B;
    for (std::int64_t b = 0; b < B; ++b) {
      const std::int64_t next = best_token(lp.data() + b * V, V, o);
      prefixes[static_cast<std::size_t>(b)].push_back(next);  // finished rows keep moving, unread
      if (done[static_cast<std::size_t>(b)]) continue;
      out[static_cast<std::size_t>(b)].push_back(next);
      done[static_cast<std::size_t>(b)] = next == o.eos;
    }
    if (std::all_of(done.begin(), done.end(), [](bool d) { return d; })) break;
  }
  return out;
  // END EXERCISE
}

double length_normalised(double score, std::size_t length, double alpha) {
  // EXERCISE 7.4: score / lp with GNMT's lp = ((5 + length) / 6)^alpha, applied once
  return score / std::pow((5.0 + static_cast<double>(length)) / 6.0, alpha);
  // END EXERCISE
}

std::vector<std::vector<std::int64_t>> beam_decode(Transformer& model, const Tensor& src, std::int64_t width,
                                                   double alpha, const DecodeOptions& o) {
  check_src(src);
  if (width < 1) throw ValueError(fmt::format("beam_decode: width must be at least 1, got {}", width));
  NoGradGuard no_grad;
  std::vector<std::vector<std::int64_t>> results;
  for (std::int64_t s = 0; s < src.size(0); ++s) {
    Stepper stepper(model, narrow(src, 0, s, 1), o.use_cache);
    std::vector<std::vector<std::int64_t>> alive{{o.bos}};
    std::vector<double> scores{0.0};
    std::vector<std::pair<double, std::vector<std::int64_t>>> finished;  // (normalised score, tokens)
    for (std::int64_t step = 0; step < step_limit(model, o) && !alive.empty(); ++step) {
      const auto lp = stepper.next_log_probs(alive).to_vector<float>();  // [alive, V]
      const auto V = lp.size() / alive.size();
      struct Candidate {
        double score;
        std::size_t parent;
        std::int64_t token;
      };
      std::vector<Candidate> candidates;
      for (std::size_t a = 0; a < alive.size(); ++a)
        for (std::size_t t = 0; t < V; ++t)
          if (may_generate(static_cast<std::int64_t>(t), o))
            candidates.push_back({scores[a] + lp[a * V + t], a, static_cast<std::int64_t>(t)});
      // Ties keep the lower parent and token (stable), so width 1 picks exactly greedy's argmax.
      std::stable_sort(candidates.begin(), candidates.end(),
                       [](const Candidate& x, const Candidate& y) { return x.score > y.score; });
      std::vector<std::vector<std::int64_t>> next_alive;
      std::vector<double> next_scores;
      std::vector<std::int64_t> rows;
      for (const Candidate& c : candidates) {
        if (static_cast<std::int64_t>(next_alive.size() + finished.size()) >= width) break;
        std::vector<std::int64_t> tokens = alive[c.parent];
        tokens.push_back(c.token);
        if (c.token == o.eos) {
          finished.emplace_back(length_normalised(c.score, tokens.size() - 1, alpha),
                                std::vector<std::int64_t>(tokens.begin() + 1, tokens.end()));
        } else {
          next_alive.push_back(std::move(tokens));
          next_scores.push_back(c.score);
          rows.push_back(static_cast<std::int64_t>(c.parent));
        }
      }
      if (static_cast<std::int64_t>(finished.size()) >= width || next_alive.empty()) break;
      stepper.reorder(rows);
      alive = std::move(next_alive);
      scores = std::move(next_scores);
    }
    for (std::size_t a = 0; a < alive.size() && finished.empty(); ++a)  // nothing finished: best unfinished
      finished.emplace_back(length_normalised(scores[a], alive[a].size() - 1, alpha),
                            std::vector<std::int64_t>(alive[a].begin() + 1, alive[a].end()));
    results.push_back(std::max_element(finished.begin(), finished.end(), [](const auto& x, const auto& y) {
                        return x.first < y.first;
                      })->second);
  }
  return results;
}

}  // namespace stepformer::transformer
