// The graded tests of chapters 01-07 (docs/exercises.md): test [exN.M] grades exercise N.M. Each checks
// behaviour against values computed another way (other ops, the paper's formula), forward only, so that it
// passes with its exercise (and those it declares it needs) solved and fails without. Where a seed had a
// classic bug (../shared/design/seed-bugs.md), the failure message names it.
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

using namespace stepformer;
using namespace stepformer::transformer;
using stepformer::test::close;
using stepformer::test::ids;
using stepformer::test::small_config;  // the PyTorch fixtures' sizes: d_model 16, 2 heads

namespace {

// A boolean mask from 0/1 values, built without the mask exercises (2.1, 2.2, 6.1).
Tensor mask(const std::vector<double>& v, const Shape& shape) { return from_vector(v, shape, {DType::boolean}); }

// softmax(q k^T / sqrt(d) with blocked at -inf) v, from ops that are not exercises.
Attention reference_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& blocked) {
  Tensor s = matmul(q, transpose(k, -2, -1)) / std::sqrt(static_cast<double>(q.size(-1)));
  if (blocked.defined()) s = where(blocked, full({}, -INFINITY), s);
  const Tensor w = softmax(s, -1);
  return {matmul(w, v), w};
}

Tensor reference_split(const Tensor& x, std::int64_t H) {  // [B, T, D] -> [B, H, T, D/H], element by element
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

Tensor reference_mha(MultiHeadAttention& m, const Tensor& q, const Tensor& kv, const Tensor& blocked) {
  const std::int64_t H = m.n_heads;
  const Tensor qh = reference_split((*m.w_q)(q), H), kh = reference_split((*m.w_k)(kv), H);
  const Tensor vh = reference_split((*m.w_v)(kv), H);
  const Tensor ctx = reference_attention(qh, kh, vh, blocked).context;  // [B, H, T, Dh]
  return (*m.w_o)(reshape(contiguous(permute(ctx, {0, 2, 1, 3})), {q.size(0), q.size(1), q.size(2)}));
}

// LayerNorm(x + sublayer(x)) with the AddNorm's own LayerNorm (dropout 0).
Tensor reference_add_norm(AddNorm& an, const Tensor& x, const Tensor& sub) { return (*an.norm)(x + sub); }

Tensor reference_ffn(PositionwiseFeedForward& f, const Tensor& x) { return (*f.w_2)(relu((*f.w_1)(x))); }

// Every LayerNorm of `m` gets random gamma and beta: a fresh LayerNorm (gamma 1, beta 0) gives the same output
// as any other, so one norm shared by several sublayers (seed 003), or one built inside forward (seed 000; both in
// docs/seeds.md), would pass a test that leaves them at their initial values.
void randomize_norms(nn::Module& m, std::uint64_t seed) {
  Generator gen(seed);
  NoGradGuard no_grad;
  for (auto& [name, p] : m.named_parameters()) {
    if (name.find("norm") == std::string::npos) continue;
    const bool weight = name.size() >= 6 && name.compare(name.size() - 6, 6, "weight") == 0;
    Tensor target = p;
    copy_(target, uniform(p.shape(), weight ? 0.5 : -0.5, weight ? 1.5 : 0.5, gen));
  }
}

}  // namespace

TEST_CASE("ex1.1: PE matches the paper's formula at every (pos, column)", "[ex1.1]") {
  const std::int64_t L = 9, D = 10;
  const auto pe = sinusoidal_table(L, D).to_vector<double>();
  REQUIRE(pe.size() == static_cast<std::size_t>(L * D));
  for (std::int64_t pos = 0; pos < L; ++pos)
    for (std::int64_t i = 0; i < D / 2; ++i) {
      const double angle = static_cast<double>(pos) / std::pow(10000.0, 2.0 * static_cast<double>(i) / D);
      INFO("pos " << pos << ", columns " << 2 * i << " and " << 2 * i + 1
                  << ": sin on even columns, cos on odd ones, one angle per pair (seed 003 doubled the exponent: "
                     "10000^(2*(2i)/d) gives the wrong frequencies)");
      CHECK(pe[static_cast<std::size_t>(pos * D + 2 * i)] == Catch::Approx(std::sin(angle)).margin(1e-12));
      CHECK(pe[static_cast<std::size_t>(pos * D + 2 * i + 1)] == Catch::Approx(std::cos(angle)).margin(1e-12));
    }
}

TEST_CASE("ex1.2: token embeddings scaled by sqrt(d_model) plus the PE rows of their positions", "[ex1.2]") {
  Generator gen(1);
  const Config c = small_config();
  TransformerEmbedding emb(c.src_vocab, c, gen);
  emb.eval();
  const Tensor src = ids({3, 4, 5, 6, 7, 8}, 2);
  for (const std::int64_t start : {0, 4}) {
    const Tensor expected =
        embedding(emb.tokens->weight, src) * std::sqrt(static_cast<double>(c.d_model)) + narrow(emb.pe, 0, start, 3);
    INFO("start " << start << " (seed 003 forgot the sqrt(d_model) scale)");
    CHECK(close(emb.forward(src, start), expected, 1e-6, 1e-6));
  }
  Config with_dropout = c;
  with_dropout.dropout = 0.5;
  Generator g(12);
  TransformerEmbedding train_emb(c.src_vocab, with_dropout, g);  // training mode
  Generator replay = g;
  const Tensor got = train_emb.forward(src, 0);
  const Tensor want = dropout(embedding(train_emb.tokens->weight, src) * std::sqrt(static_cast<double>(c.d_model)) +
                                  narrow(train_emb.pe, 0, 0, 3),
                              0.5, true, replay);
  INFO("with dropout 0.5 in training: dropout on the sum of the scaled embeddings and the PE (paper 5.4)");
  CHECK(close(got, want, 1e-6, 1e-6));
}

TEST_CASE("ex2.1: pad_mask is true at PAD keys, shaped [B, 1, 1, S]", "[ex2.1]") {
  const Tensor m = pad_mask(ids({5, 6, 0, 0, 7, 8, 9, 0}, 2), 0);
  {
    INFO("[B, 1, 1, S]: PAD is masked on keys, broadcast over heads and query rows");
    CHECK(m.shape() == Shape{2, 1, 1, 4});
  }
  CHECK(m.dtype() == DType::boolean);
  {
    INFO("true (blocked) where the token is PAD, false where it is a real token");
    CHECK(m.to_vector<double>() == std::vector<double>{0, 0, 1, 1, 0, 0, 0, 1});
  }
  INFO("the PAD id is the pad_id argument, not always 0");
  CHECK(pad_mask(ids({1, 2, 1}, 1), 1).to_vector<double>() == std::vector<double>{1, 0, 1});
}

TEST_CASE("ex2.2: subsequent_mask blocks exactly the later positions, shaped [1, 1, T, T]", "[ex2.2]") {
  const Tensor m = subsequent_mask(4);
  {
    INFO("[1, 1, T, T]: broadcast over the batch and the heads");
    CHECK(m.shape() == Shape{1, 1, 4, 4});
  }
  INFO("query i sees keys 0 .. i, itself included: blocked exactly where j > i");
  CHECK(m.to_vector<double>() == std::vector<double>{0, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0});
}

TEST_CASE("ex2.3: scaled dot-product attention: weights, context, exact zeros where blocked", "[ex2.3]") {
  Generator gen(3);
  const Tensor q = randn({2, 3, 5, 4}, gen), k = randn({2, 3, 6, 4}, gen), v = randn({2, 3, 6, 7}, gen);
  const Tensor blocked = mask({0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1}, {2, 1, 1, 6});  // PAD keys
  const Attention got = scaled_dot_product_attention(q, k, v, blocked);
  const Attention want = reference_attention(q, k, v, blocked);
  {
    INFO("each query's weights sum to 1 over the keys: softmax over the last dimension");
    CHECK(close(sum(got.weights, {-1}), ones({2, 3, 5}), 1e-6, 1e-6));
  }
  const auto w = got.weights.to_vector<double>();
  const auto b = expand(blocked, {2, 3, 5, 6}).to_vector<double>();
  for (std::size_t i = 0; i < w.size(); ++i)
    if (b[i] != 0) {
      INFO("a blocked key got weight " << w[i] << " (seed 002 discarded masked_fill's result: the mask did nothing)");
      REQUIRE(w[i] == 0.0);
    }
  {
    INFO("weights = softmax(Q K^T / sqrt(d_k)); context = weights V");
    CHECK(close(got.weights, want.weights, 1e-6, 1e-5));
    CHECK(close(got.context, want.context, 1e-6, 1e-5));
  }
  Generator g(31), replay = g;
  const Attention dropped = scaled_dot_product_attention(q, k, v, blocked, 0.5, true, g);
  INFO("with dropout 0.5 in training: dropout on the attention weights, before they multiply V");
  CHECK(close(dropped.context, matmul(dropout(want.weights, 0.5, true, replay), v), 1e-6, 1e-5));
}

TEST_CASE("ex2.4: split_heads and merge_heads move whole head slices and round-trip", "[ex2.4]") {
  Generator gen(4);
  const Tensor x = randn({2, 3, 8}, gen);
  const Tensor heads = split_heads(x, 4);
  {
    INFO(
        "split_heads: head h takes columns h*Dh .. (h+1)*Dh - 1 of every position: view as [B, T, H, Dh], "
        "then permute to [B, H, T, Dh]");
    CHECK(heads.shape() == Shape{2, 4, 3, 2});
    CHECK(heads.to_vector<double>() == reference_split(x, 4).to_vector<double>());
  }
  INFO(
      "merge_heads undoes split_heads: permute back to [B, T, H, Dh], then reshape, which copies: the permuted "
      "tensor is not contiguous, so view cannot (seed 002)");
  const Tensor packed = contiguous(heads);  // as attention's output is: a permuted view of it is not contiguous
  CHECK(merge_heads(packed).shape() == Shape{2, 3, 8});
  CHECK(merge_heads(packed).to_vector<double>() == x.to_vector<double>());
}

TEST_CASE("ex2.5: multi-head attention projects, splits, attends, merges and projects", "[ex2.5]") {
  Generator gen(5);
  MultiHeadAttention mha(8, 2, 0.0, gen);
  const Tensor x = randn({2, 4, 8}, gen), mem = randn({2, 5, 8}, gen);
  const Tensor blocked = mask({0, 0, 0, 1, 1, 0, 0, 0, 0, 0}, {2, 1, 1, 5});
  {
    INFO(
        "queries through w_q, split into heads, attention with the mask, heads merged, then the output "
        "projection w_o");
    CHECK(close(mha.forward(x, mem, mem, blocked).context, reference_mha(mha, x, mem, blocked), 1e-5, 1e-5));
  }
  Generator g(51);
  MultiHeadAttention with_dropout(8, 2, 0.5, g);  // training mode
  Generator replay = g;
  const Tensor got = with_dropout.forward(x, mem, mem, blocked).context;
  const Tensor qh = reference_split((*with_dropout.w_q)(x), 2), kh = reference_split((*with_dropout.w_k)(mem), 2);
  const Tensor vh = reference_split((*with_dropout.w_v)(mem), 2);
  const Tensor w = dropout(reference_attention(qh, kh, vh, blocked).weights, 0.5, true, replay);
  const Tensor ctx = reshape(contiguous(permute(matmul(w, vh), {0, 2, 1, 3})), {2, 4, 8});
  INFO("with dropout 0.5 in training: the module's dropout goes to the attention weights");
  CHECK(close(got, (*with_dropout.w_o)(ctx), 1e-5, 1e-5));
}

TEST_CASE("ex3.1: add & norm: LayerNorm(x + sublayer(x)), and the pre-norm variant", "[ex3.1]") {
  Generator gen(6);
  const Tensor x = randn({2, 3, 8}, gen);
  auto sublayer = [](const Tensor& t) { return tanh(t) * 3.0; };
  AddNorm post(8, 0.0, false, gen);
  randomize_norms(post, 61);
  {
    INFO(
        "post-norm: LayerNorm(x + Sublayer(x)) with this module's own LayerNorm (seed 002 dropped the residual x; "
        "seed 000 built a fresh LayerNorm inside forward)");
    CHECK(close(post.forward(x, sublayer), reference_add_norm(post, x, sublayer(x)), 1e-5, 1e-5));
  }
  AddNorm pre(8, 0.0, true, gen);
  randomize_norms(pre, 62);
  {
    INFO("pre-norm: x + Sublayer(LayerNorm(x))");
    CHECK(close(pre.forward(x, sublayer), x + sublayer((*pre.norm)(x)), 1e-5, 1e-5));
  }
  // Dropout, graded with p = 0.5 in training: the counter-based generator makes the mask reproducible, so a
  // copy of the module's generator taken before the call draws the same mask for the expected value.
  for (const bool pre_norm : {false, true}) {
    Generator g(63);
    AddNorm an(8, 0.5, pre_norm, g);
    randomize_norms(an, 64);
    Generator replay = g;
    const Tensor got = an.forward(x, sublayer);
    const Tensor want = pre_norm ? x + dropout(sublayer((*an.norm)(x)), 0.5, true, replay)
                                 : (*an.norm)(x + dropout(sublayer(x), 0.5, true, replay));
    INFO((pre_norm ? "pre" : "post")
         << "-norm with dropout 0.5: dropout goes on the sublayer's output, before the residual add (paper 5.4)");
    CHECK(close(got, want, 1e-5, 1e-5));
  }
}

TEST_CASE("ex4.1: the position-wise feed-forward network", "[ex4.1]") {
  Generator gen(7);
  PositionwiseFeedForward ffn(8, 16, 0.0, gen);
  const Tensor x = randn({2, 3, 8}, gen);
  {
    INFO("W_2 ReLU(W_1 x + b_1) + b_2");
    CHECK(close(ffn.forward(x), reference_ffn(ffn, x), 1e-5, 1e-5));
  }
  Generator g(71);
  PositionwiseFeedForward with_dropout(8, 16, 0.5, g);
  Generator replay = g;
  const Tensor got = with_dropout.forward(x);
  const Tensor want = (*with_dropout.w_2)(dropout(relu((*with_dropout.w_1)(x)), 0.5, true, replay));
  INFO("with dropout 0.5 in training: W_2 Dropout(ReLU(W_1 x + b_1)) + b_2, dropout on the hidden layer");
  CHECK(close(got, want, 1e-5, 1e-5));
}

TEST_CASE("ex5.1: an encoder layer: self-attention, then feed-forward, each in add & norm", "[ex5.1]") {
  Generator gen(8);
  const Config c = small_config();
  EncoderLayer layer(c, gen);
  randomize_norms(layer, 81);
  const Tensor x = randn({2, 4, c.d_model}, gen);
  const Tensor blocked = mask({0, 0, 0, 1, 0, 0, 0, 0}, {2, 1, 1, 4});
  const Tensor h = reference_add_norm(*layer.norm_attn, x, reference_mha(*layer.self_attn, x, x, blocked));
  const Tensor y = reference_add_norm(*layer.norm_ffn, h, reference_ffn(*layer.ffn, h));
  INFO("self-attention takes queries, keys and values from x, with the source PAD mask; two distinct add & norms");
  CHECK(close(layer.forward(x, blocked).context, y, 1e-4, 1e-4));
}

TEST_CASE("ex5.2: the encoder: embedding, every layer with the PAD mask, in order", "[ex5.2]") {
  Generator gen(9);
  const Config c = small_config();
  Encoder enc(c, gen);
  enc.eval();
  const Tensor src = ids({3, 4, 5, 0, 6, 7, 8, 9}, 2);
  Tensor x = enc.embed->forward(src);
  for (auto& layer : *enc.layers) x = layer->forward(x, pad_mask(src, 0)).context;
  const EncoderOutput out = enc.forward(src);
  INFO("every layer gets the source PAD mask, and each layer's output feeds the next");
  CHECK(close(out.memory, x, 1e-5, 1e-5));
  CHECK(out.attention.size() == 2);
}

TEST_CASE("ex6.1: the decoder's mask blocks PAD keys and future positions", "[ex6.1]") {
  const Tensor m = decoder_mask(ids({5, 6, 0, 7, 8, 9}, 2), 0);
  INFO("blocked where the key is PAD or in the future of the query (PAD on keys, not on query rows), [B, 1, T, T]");
  CHECK(m.shape() == Shape{2, 1, 3, 3});
  CHECK(m.to_vector<double>() == std::vector<double>{0, 1, 1, 0, 0, 1, 0, 0, 1, 0, 1, 1, 0, 0, 1, 0, 0, 0});
}

TEST_CASE("ex6.2: a decoder layer: masked self-attention, cross-attention on memory, feed-forward", "[ex6.2]") {
  Generator gen(10);
  const Config c = small_config();
  DecoderLayer layer(c, gen);
  randomize_norms(layer, 101);
  const Tensor x = randn({2, 3, c.d_model}, gen), memory = randn({2, 4, c.d_model}, gen);
  const Tensor self_blocked = mask({0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 1, 1, 0, 0, 1, 0, 0, 1}, {2, 1, 3, 3});
  const Tensor src_blocked = mask({0, 0, 1, 1, 0, 0, 0, 0}, {2, 1, 1, 4});
  const Tensor h1 = reference_add_norm(*layer.norm_self, x, reference_mha(*layer.self_attn, x, x, self_blocked));
  const Tensor h2 =
      reference_add_norm(*layer.norm_cross, h1, reference_mha(*layer.cross_attn, h1, memory, src_blocked));
  const Tensor y = reference_add_norm(*layer.norm_ffn, h2, reference_ffn(*layer.ffn, h2));
  INFO(
      "self-attention gets the target mask; cross-attention takes keys and values from memory with the source "
      "mask; three distinct add & norms (seed 003 reused one)");
  CHECK(close(layer.forward(x, memory, self_blocked, src_blocked).y, y, 1e-4, 1e-4));
}

TEST_CASE("ex7.1: greedy decoding appends the most likely allowed token until EOS", "[ex7.1]") {
  Generator gen(11);
  const Config c = small_config();
  Transformer model(c, gen);
  model.eval();
  const Tensor src = ids({3, 4, 5, 6, 7, 8, 9, 10}, 2);
  DecodeOptions o;
  o.max_len = 6;
  const auto got = greedy_decode(model, src, o);
  REQUIRE(got.size() == 2);
  for (std::int64_t b = 0; b < 2; ++b) {
    std::vector<std::int64_t> prefix{o.bos}, want;
    const Tensor one = narrow(src, 0, b, 1);
    while (static_cast<std::int64_t>(want.size()) < o.max_len) {
      const auto logits = model.forward(one, ids(prefix, 1)).to_vector<double>();  // [1, T, V]
      const std::size_t last = (prefix.size() - 1) * static_cast<std::size_t>(c.tgt_vocab);
      std::int64_t best = -1;
      for (std::int64_t t = 0; t < c.tgt_vocab; ++t) {
        if (t == o.pad || t == o.bos || t == o.unk) continue;
        if (best < 0 || logits[last + static_cast<std::size_t>(t)] > logits[last + static_cast<std::size_t>(best)])
          best = t;
      }
      want.push_back(best);
      prefix.push_back(best);
      if (best == o.eos) break;
    }
    INFO("row " << b
                << ": each step feeds the whole prefix so far (BOS and every token chosen) and appends the "
                   "most likely token that is not PAD, BOS or UNK");
    CHECK(got[static_cast<std::size_t>(b)] == want);
  }
  // A model that always prefers EOS: every row must stop right after it, not run on to max_len.
  {
    NoGradGuard no_grad;
    Tensor eos_bias = narrow(model.generator->bias, 0, o.eos, 1);
    fill_(eos_bias, 50.0);
  }
  const auto stopped = greedy_decode(model, src, o);
  INFO("with a large bias on EOS the first token is EOS: greedy decoding must stop each row at its EOS");
  CHECK(stopped == std::vector<std::vector<std::int64_t>>{{o.eos}, {o.eos}});
}

TEST_CASE("ex7.3: the Noam schedule: linear warmup, then inverse square root decay", "[ex7.3]") {
  const nn::NoamSchedule s{512, 4000, 2.0};
  INFO("lr = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)");
  for (const std::int64_t step : {1, 100, 3999, 4000, 4001, 20000}) {
    const double want =
        2.0 / std::sqrt(512.0) * std::min(1.0 / std::sqrt(static_cast<double>(step)), step * std::pow(4000.0, -1.5));
    INFO("step " << step);
    CHECK(s(step) == Catch::Approx(want).epsilon(1e-12));
  }
  CHECK(s(4000) > s(3000));
  CHECK(s(4000) > s(5000));  // the peak is at the end of warmup
  INFO("step 0 (before the first update) counts as step 1: 0^-0.5 is infinite");
  CHECK(s(0) == s(1));
}
