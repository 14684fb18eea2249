// Chapters 04-07. The graded tests of chapters 01-07 (docs/exercises.md): test [exN.M] grades exercise N.M. Each checks
// behaviour against values computed another way (other ops, the paper's formula), forward only, so that it
// passes with its exercise (and those it declares it needs) solved and fails without. Where a seed had a
// classic bug (../shared/design/seed-bugs.md), the failure message names it.
#include "exercise_references.h"

using namespace stepformer::test::exercises;  // stepformer, transformer and the test helpers (exercise_references.h)

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
  // Seed 003's decoder: norm_self's add & norm for all three sublayers.
  const Tensor s1 = reference_add_norm(*layer.norm_self, x, reference_mha(*layer.self_attn, x, x, self_blocked));
  const Tensor s2 = reference_add_norm(*layer.norm_self, s1, reference_mha(*layer.cross_attn, s1, memory, src_blocked));
  const Tensor shared = reference_add_norm(*layer.norm_self, s2, reference_ffn(*layer.ffn, s2));
  const std::string rule =
      "self-attention gets the target mask; cross-attention takes keys and values from memory with the source "
      "mask; three distinct add & norms";
  Tensor got;
  {
    INFO(rule);  // for an exception thrown by forward (a mask that does not fit its attention)
    got = layer.forward(x, memory, self_blocked, src_blocked).y;
  }
  INFO((max_abs_diff(got, shared) <= 1e-4
            ? mistake("shared-norm", "seed 003's bug: one add & norm (norm_self) for all three sublayers")
            : rule));
  CHECK(close(got, y, 1e-4, 1e-4));
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

TEST_CASE("ex7.4: beam search ranks a finished hypothesis by its score over GNMT's length penalty", "[ex7.4]") {
  for (const double alpha : {0.0, 0.6, 1.0})
    for (const std::size_t length : {1, 4, 11})
      for (const double score : {-0.5, -3.25}) {
        const double lp = std::pow((5.0 + static_cast<double>(length)) / 6.0, alpha);
        const double got = length_normalised(score, length, alpha);
        const auto is = [got](double x) { return std::abs(got - x) <= 1e-12 * std::abs(x); };
        INFO("alpha " << alpha << ", length " << length << ", score " << score << ": got " << got << ", want "
                      << score / lp);
        if (lp != 1 && is(score / (lp * lp)))
          FAIL(mistake("penalty-twice",
                       "the score was divided by lp twice: long hypotheses are favoured as if "
                       "alpha were doubled; divide by ((5 + length) / 6)^alpha once"));
        if (lp != 1 && is(score * lp))
          FAIL(mistake("penalty-multiplied",
                       "the score was multiplied by lp: a log-probability is negative, so "
                       "that makes longer hypotheses worse still; divide by lp"));
        if (lp != 1 && is(score))
          FAIL(mistake("penalty-ignored",
                       "alpha was ignored: the raw score favours short hypotheses; divide by "
                       "lp = ((5 + length) / 6)^alpha"));
        INFO("score / ((5 + length) / 6)^alpha (GNMT, Wu et al. 2016); alpha 0 leaves the score as it is");
        CHECK(got == Catch::Approx(score / lp).epsilon(1e-12));
      }
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
