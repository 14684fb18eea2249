#pragma once
// The independent implementations the graded exercise tests compare learners' code with (test_exercises_*.cpp):
// attention and multi-head attention written out from the paper's formulas, and norms with random weights.
// The graded test files say `using namespace stepformer::test::exercises` and get, through it, every name below.
#include <fmt/format.h>

#include <tuple>

#include "../helpers.h"
#include "nn/schedule.h"
#include "reference.h"
#include "transformer/add_norm.h"
#include "transformer/attention.h"
#include "transformer/decoder.h"
#include "transformer/decoding.h"
#include "transformer/embedding.h"
#include "transformer/encoder.h"
#include "transformer/feed_forward.h"
#include "transformer/model.h"

namespace stepformer::test::exercises {

using namespace stepformer;
using namespace stepformer::transformer;
using stepformer::test::close;
using stepformer::test::ids;
using stepformer::test::max_abs_diff;
using stepformer::test::mistake;
using stepformer::test::small_config;  // the PyTorch fixtures' sizes: d_model 16, 2 heads

// A boolean mask from 0/1 values, built without the mask exercises (2.1, 2.2, 6.1).
inline Tensor mask(const std::vector<double>& v, const Shape& shape) { return from_vector(v, shape, {DType::boolean}); }

// softmax(q k^T / sqrt(d) with blocked at -inf) v, from ops that are not exercises.
inline Attention reference_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& blocked) {
  Tensor s = matmul(q, transpose(k, -2, -1)) / std::sqrt(static_cast<double>(q.size(-1)));
  if (blocked.defined()) s = where(blocked, full({}, -INFINITY), s);
  const Tensor w = softmax(s, -1);
  return {matmul(w, v), w};
}

inline Tensor reference_split(const Tensor& x, std::int64_t H) {  // [B, T, D] -> [B, H, T, D/H], element by element
  const std::int64_t B = x.size(0), T = x.size(1), D = x.size(2), Dh = D / H;
  const auto xv = x.to_vector<double>();
  std::vector<double> out(xv.size());
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t t = 0; t < T; ++t)
        for (std::int64_t e = 0; e < Dh; ++e)
          out[static_cast<std::size_t>(((b * H + h) * T + t) * Dh + e)] =
              xv[static_cast<std::size_t>((b * T + t) * D + h * Dh + e)];
  return from_vector(out, {B, H, T, Dh});
}

inline Tensor reference_mha(MultiHeadAttention& m, const Tensor& q, const Tensor& kv, const Tensor& blocked) {
  const std::int64_t H = m.n_heads;
  const Tensor qh = reference_split((*m.w_q)(q), H), kh = reference_split((*m.w_k)(kv), H);
  const Tensor vh = reference_split((*m.w_v)(kv), H);
  const Tensor ctx = reference_attention(qh, kh, vh, blocked).context;  // [B, H, T, Dh]
  return (*m.w_o)(reshape(contiguous(permute(ctx, {0, 2, 1, 3})), {q.size(0), q.size(1), q.size(2)}));
}

// LayerNorm(x + sublayer(x)) with the AddNorm's own LayerNorm (dropout 0).
inline Tensor reference_add_norm(AddNorm& an, const Tensor& x, const Tensor& sub) { return (*an.norm)(x + sub); }

inline Tensor reference_ffn(PositionwiseFeedForward& f, const Tensor& x) { return (*f.w_2)(relu((*f.w_1)(x))); }

// Every LayerNorm of `m` gets random gamma and beta: a fresh LayerNorm (gamma 1, beta 0) gives the same output
// as any other, so one norm shared by several sublayers (seed 003), or one built inside forward (seed 000; both in
// docs/seeds.md), would pass a test that leaves them at their initial values.
inline void randomize_norms(nn::Module& m, std::uint64_t seed) {
  Generator gen(seed);
  NoGradGuard no_grad;
  for (auto& [name, p] : m.named_parameters()) {
    if (name.find("norm") == std::string::npos) continue;
    const bool weight = name.size() >= 6 && name.compare(name.size() - 6, 6, "weight") == 0;
    Tensor target = p;
    copy_(target, uniform(p.shape(), weight ? 0.5 : -0.5, weight ? 1.5 : 0.5, gen));
  }
}

}  // namespace stepformer::test::exercises
