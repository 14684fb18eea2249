// Chapters 01-03. The graded tests of chapters 01-07 (docs/exercises.md): test [exN.M] grades exercise N.M. Each checks
// behaviour against values computed another way (other ops, the paper's formula), forward only, so that it
// passes with its exercise (and those it declares it needs) solved and fails without. Where a seed had a
// classic bug (../shared/design/seed-bugs.md), the failure message names it.
#include "exercise_references.h"

using namespace stepformer::test::exercises;  // stepformer, transformer and the test helpers (exercise_references.h)

TEST_CASE("ex1.1: PE matches the paper's formula at every (pos, column)", "[ex1.1]") {
  const std::int64_t L = 9, D = 10;
  const auto pe = sinusoidal_table(L, D).to_vector<double>();
  REQUIRE(pe.size() == static_cast<std::size_t>(L * D));
  // The table that angle(pos, 2i, col) makes, sin on the even columns (or, with sin_even false, on the odd ones).
  auto table = [&](auto angle, bool sin_even) {
    std::vector<double> t(static_cast<std::size_t>(L * D));
    for (std::int64_t pos = 0; pos < L; ++pos)
      for (std::int64_t col = 0; col < D; ++col) {
        const double a = angle(static_cast<double>(pos), static_cast<double>(col - col % 2), static_cast<double>(col));
        t[static_cast<std::size_t>(pos * D + col)] = (col % 2 == 0) == sin_even ? std::sin(a) : std::cos(a);
      }
    return t;
  };
  auto max_diff = [](const std::vector<double>& a, const std::vector<double>& b) {
    double m = 0;
    for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
    return m;
  };
  const auto paper = [&](double pos, double two_i, double) { return pos / std::pow(10000.0, two_i / D); };
  const std::vector<double> want = table(paper, true);
  // Each known mistake's table: when the learner's equals one, the message names that mistake.
  const std::vector<std::tuple<std::string, std::string, std::vector<double>>> known{
      {"doubled-exponent", "seed 003's bug: the exponent 2i doubled, 10000^(2 * 2i / d_model): wrong frequencies",
       table([&](double pos, double two_i, double) { return pos / std::pow(10000.0, 2 * two_i / D); }, true)},
      {"positions-dimensions-swapped",
       "position and dimension swapped: 2i / 10000^(pos / d_model) where pos / 10000^(2i / d_model) is meant",
       table([&](double pos, double two_i, double) { return two_i / std::pow(10000.0, pos / D); }, true)},
      {"sin-cos-swapped", "cos on the even columns and sin on the odd ones: sin goes on column 2i, cos on 2i+1",
       table(paper, false)},
      {"frequency-per-column",
       "every column its own frequency, 10000^(col / d_model): columns 2i and 2i+1 share one angle per pair",
       table([&](double pos, double, double col) { return pos / std::pow(10000.0, col / D); }, true)}};
  std::string diagnosis =
      "PE(pos, 2i) = sin(pos / 10000^(2i/d_model)) and PE(pos, 2i+1) = cos of the same angle, one angle per pair";
  for (const auto& [slug, words, t] : known)
    if (max_diff(pe, t) <= 1e-6) diagnosis = mistake(slug, words);  // the table is float32
  for (std::size_t k = 0; k < want.size(); ++k)
    if (std::abs(pe[k] - want[k]) > 1e-6) {
      diagnosis += fmt::format(" (first difference at pos {}, column {})", k / D, k % D);
      break;
    }
  INFO(diagnosis);
  CHECK(max_diff(pe, want) <= 1e-6);
}

TEST_CASE("ex1.2: token embeddings scaled by sqrt(d_model) plus the PE rows of their positions", "[ex1.2]") {
  Generator gen(1);
  const Config c = small_config();
  TransformerEmbedding emb(c.src_vocab, c, gen);
  emb.eval();
  const Tensor src = ids({3, 4, 5, 6, 7, 8}, 2);
  for (const std::int64_t start : {0, 4}) {
    const Tensor unscaled = embedding(emb.tokens->weight, src);
    const Tensor scaled = unscaled * std::sqrt(static_cast<double>(c.d_model));
    const Tensor expected = scaled + narrow(emb.pe, 0, start, 3);
    std::string diagnosis =
        fmt::format("start {}: tokens(ids) * sqrt(d_model) + the PE rows start .. start+T-1", start);
    Tensor got;
    {
      INFO(diagnosis);  // for an exception thrown by forward
      got = emb.forward(src, start);
    }
    if (max_abs_diff(got, unscaled + narrow(emb.pe, 0, start, 3)) <= 1e-6)
      diagnosis = mistake("no-scale", "seed 003's bug: the token embeddings not multiplied by sqrt(d_model)");
    else if (start > 0 && max_abs_diff(got, scaled + narrow(emb.pe, 0, 0, 3)) <= 1e-6)
      diagnosis =
          mistake("pe-from-zero", fmt::format("start {}: the PE rows taken from position 0, not from start", start));
    INFO(diagnosis);
    CHECK(close(got, expected, 1e-6, 1e-6));
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

TEST_CASE("ex2.2: subsequent_mask blocks exactly the later positions, shaped [1, 1, T, start + T]", "[ex2.2]") {
  const Tensor m = subsequent_mask(4);
  {
    INFO("[1, 1, T, T]: broadcast over the batch and the heads");
    CHECK(m.shape() == Shape{1, 1, 4, 4});
  }
  {
    INFO("query i sees keys 0 .. i, itself included: blocked exactly where j > i");
    CHECK(m.to_vector<double>() == std::vector<double>{0, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0});
  }
  // Two new queries after three cached keys (the KV cache of chapter 12): they sit at positions 3 and 4.
  const Tensor shifted = subsequent_mask(2, default_device(), 3);
  INFO("query i is at position start + i: after 3 cached keys, query 0 sees keys 0 .. 3 and query 1 all 5");
  CHECK(shifted.shape() == Shape{1, 1, 2, 5});
  CHECK(shifted.to_vector<double>() == std::vector<double>{0, 0, 0, 0, 1, 0, 0, 0, 0, 0});
}

TEST_CASE("ex2.3: scaled dot-product attention: weights, context, exact zeros where blocked", "[ex2.3]") {
  Generator gen(3);
  const Tensor q = randn({2, 3, 5, 4}, gen), k = randn({2, 3, 6, 4}, gen), v = randn({2, 3, 6, 7}, gen);
  const Tensor blocked = mask({0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1}, {2, 1, 1, 6});  // PAD keys
  const Attention got = scaled_dot_product_attention(q, k, v, blocked);
  const Attention want = reference_attention(q, k, v, blocked);
  const auto w = got.weights.tensor().to_vector<double>();
  const auto b = expand(blocked, {2, 3, 5, 6}).to_vector<double>();
  const Tensor unmasked_weights = reference_attention(q, k, v, Tensor()).weights.tensor();
  const bool unmasked = max_abs_diff(got.weights.tensor(), unmasked_weights) <= 1e-6;
  std::vector<double> zeroed_after = unmasked_weights.to_vector<double>();  // the unmasked softmax, then zeros
  for (std::size_t i = 0; i < zeroed_after.size(); ++i) zeroed_after[i] *= b[i] != 0 ? 0.0 : 1.0;
  {
    INFO((max_abs_diff(got.weights.tensor(), zeroed_after) <= 1e-6
              ? mistake("mask-after-softmax",
                        "the blocked weights were zeroed after the softmax, so a row no longer sums to 1: "
                        "blocked scores get -inf before it, and the softmax shares the weight among the keys left")
              : std::string("each query's weights sum to 1 over the keys: softmax over the last dimension")));
    CHECK(close(sum(got.weights.tensor(), {-1}), ones({2, 3, 5}), 1e-6, 1e-6));
  }
  for (std::size_t i = 0; i < w.size(); ++i)
    if (b[i] != 0) {
      INFO((unmasked
                ? mistake("mask-discarded", "seed 002's bug: masked_fill's result thrown away, the mask did nothing")
                : std::string("blocked keys get -inf before the softmax, so exactly 0 after it"))
           << "; a blocked key got weight " << w[i]);
      REQUIRE(w[i] == 0.0);
    }
  {
    INFO("weights = softmax(Q K^T / sqrt(d_k)); context = weights V");
    CHECK(close(got.weights.tensor(), want.weights.tensor(), 1e-6, 1e-5));
    CHECK(close(got.context, want.context, 1e-6, 1e-5));
  }
  Generator g(31), replay = g;
  const Attention dropped = scaled_dot_product_attention(q, k, v, blocked, 0.5, true, g);
  {
    INFO("with dropout 0.5 in training: dropout on the attention weights, before they multiply V");
    CHECK(close(dropped.context, matmul(dropout(want.weights.tensor(), 0.5, true, replay), v), 1e-6, 1e-5));
  }
  // No mask at all (an undefined tensor, the default): every key is seen.
  Attention plain;
  try {
    plain = scaled_dot_product_attention(q, k, v);
  } catch (const NotImplemented&) {
    throw;
  } catch (const std::exception& e) {
    FAIL(mistake("mask-required", std::string("called with no mask (the default), it threw: ") + e.what() +
                                      "; apply the mask only when one is given (blocked.defined())"));
  }
  INFO("with no mask every key is seen: softmax(Q K^T / sqrt(d_k)) V");
  CHECK(close(plain.context, reference_attention(q, k, v, Tensor()).context, 1e-6, 1e-5));
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
  const Tensor packed = contiguous(heads);  // as attention's output is: a permuted view of it is not contiguous
  Tensor merged;
  std::string view_error;
  try {
    merged = merge_heads(packed);
  } catch (const ShapeError& e) {
    if (std::string(e.what()).rfind("view:", 0) != 0) throw;
    view_error = e.what();
  }
  {
    INFO(
        mistake("merge-by-view",
                "seed 002's bug: view() on the permuted heads, which are not contiguous: reshape copies, view cannot"));
    REQUIRE(view_error.empty());
  }
  INFO("merge_heads undoes split_heads: permute back to [B, T, H, Dh], then reshape to [B, T, D]");
  CHECK(merged.shape() == Shape{2, 3, 8});
  CHECK(merged.to_vector<double>() == x.to_vector<double>());
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
  const Tensor w = dropout(reference_attention(qh, kh, vh, blocked).weights.tensor(), 0.5, true, replay);
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
    const std::string rule = "post-norm: LayerNorm(x + Sublayer(x)) with this module's own LayerNorm";
    Tensor got;
    {
      INFO(rule);  // for an exception thrown by forward
      got = post.forward(x, sublayer);
    }
    nn::LayerNorm fresh(8);  // gamma 1, beta 0: what a LayerNorm built inside forward computes
    // Each known mistake's output: when the module's equals one, the message names that mistake.
    const std::vector<std::tuple<std::string, std::string, Tensor>> known{
        {"no-residual", "seed 002's bug: LayerNorm(Sublayer(x)), the residual x dropped", (*post.norm)(sublayer(x))},
        {"fresh-norm",
         "seed 000's bug: a fresh LayerNorm built inside forward, not this module's own (its gamma and "
         "beta never learn)",
         fresh(x + sublayer(x))},
        {"pre-norm-for-post", "pre-norm x + Sublayer(LayerNorm(x)) written where post-norm is asked (pre_norm false)",
         x + sublayer((*post.norm)(x))}};
    std::string diagnosis = rule;
    for (const auto& [slug, words, output] : known)
      if (max_abs_diff(got, output) <= 1e-5) diagnosis = mistake(slug, words);
    INFO(diagnosis);
    CHECK(close(got, reference_add_norm(post, x, sublayer(x)), 1e-5, 1e-5));
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
