// Chapter 07: the full model, decoding, data and training.
#include <cmath>
#include <filesystem>
#include <set>

#include "autograd/autocast.h"
#include "reference.h"
#include "transformer/decoding.h"
#include "transformer/flops.h"
#include "transformer/train.h"

using namespace stepformer;
using namespace stepformer::test;
using namespace stepformer::transformer;

namespace {
Config tiny(std::int64_t src_vocab, std::int64_t tgt_vocab) {
  Config c = small_config();
  c.src_vocab = src_vocab;
  c.tgt_vocab = tgt_vocab;
  return c;
}
}  // namespace

TEST_CASE("the full model's logits and gradients match PyTorch from the same weights", "[ch07]") {
  const auto f = chapter_fixture("07_transformer");
  Generator gen(1);
  Transformer model(small_config(), gen);
  model.load_state_dict(params(f));
  const Tensor logits = model.forward(f.at("input.src"), f.at("input.tgt"));
  CHECK(logits.shape() == Shape{2, 7, 12});
  CHECK(close(logits, f.at("output.logits"), 1e-5, 1e-4));
  logits.backward(f.at("dy.logits"));
  check_parameter_grads(model, f);
}

// Chapter 11's autocast on the whole model, from the same weights as above. The fixture holds PyTorch's logits
// two ways: our rule written out in PyTorch (each Linear rounds its operands to bfloat16 and multiplies in
// float32; flash_attention rounds q, k, v and its weights, test_ch02's autocast case; everything else float32),
// and torch.autocast itself, which rounds every product to bfloat16 too.
// The tolerances: against our rule, a few bfloat16 roundings. The order of float32 sums differs, and a value one
// float32 ulp from a bfloat16 midpoint rounds the other way: moving q, k and v by one ulp in PyTorch's rule moves
// its logits by 0 or 2.3e-3, run to run (measured); ours are 4.2e-4 from it. Against torch.autocast, the triangle
// inequality through the float32 logits, since each bfloat16 model is off the float32 one by its roundings and
// ours rounds fewer values than torch.autocast does.
TEST_CASE(
    "under bfloat16 autocast the logits match PyTorch: our rule to a few bfloat16 roundings, torch.autocast "
    "within its own bfloat16 error",
    "[ch07][ch11]") {
  const auto f = chapter_fixture("07_transformer");
  Generator gen(1);
  Transformer model(small_config(), gen);
  model.load_state_dict(params(f));
  Tensor logits;
  {
    AutocastGuard autocast(DType::bfloat16);
    logits = model.forward(f.at("input.src"), f.at("input.tgt"));
  }
  CHECK(logits.dtype() == DType::float32);
  CHECK(max_abs_diff(logits, f.at("autocast_rule.logits")) <= 5e-3);
  const Tensor& float32 = f.at("output.logits");
  const Tensor& torch_autocast = f.at("autocast.logits");
  const double ours_off = max_abs_diff(logits, float32), torch_off = max_abs_diff(torch_autocast, float32);
  INFO("ours - float32: " << ours_off << ", torch.autocast - float32: " << torch_off);
  CHECK(ours_off > 1e-4);  // bfloat16 operands were used: further from float32 than float32's own noise
  CHECK(ours_off <= torch_off);
  CHECK(max_abs_diff(logits, torch_autocast) <= ours_off + torch_off);
}

TEST_CASE("every tensor the Transformer makes to require grad is one of its parameters (the leaf audit)", "[ch07]") {
  CHECK(unregistered_leaves([] {
          Generator gen(8);
          auto model = std::make_shared<Transformer>(tiny(11, 12), gen);
          sum(model->forward(ids({1, 2, 3, 0}, 1), ids({1, 5, 7}, 1))).backward();
          model->eval();
          DecodeOptions o;
          o.max_len = 4;
          (void)greedy_decode(*model, ids({1, 2, 3, 0}, 1), o);
          return model;
        }) == std::vector<std::string>{});  // lists the shapes of any unregistered leaf
}

TEST_CASE("a tied output projection is the target embedding: its logits, and a gradient from both uses", "[ch07]") {
  Generator untied_gen(3), tied_gen(3), data_gen(4);
  Transformer untied(tiny(11, 12), untied_gen), tied(tiny(11, 12), tied_gen, true);
  const Config& c = tied.cfg;
  CHECK(tied.generator == nullptr);
  CHECK(untied.parameter_count() - tied.parameter_count() == c.tgt_vocab * c.d_model + c.tgt_vocab);
  const Tensor& embedding = tied.decoder->embed->tokens->weight;  // [V, D]
  const Tensor h = randn({2, 3, c.d_model}, data_gen);
  CHECK(close(tied.logits(h), matmul(h, transpose(embedding, 0, 1)), 1e-6, 1e-6));
  // The decoder reads targets 1, 5, 7 only: every other row of the embedding learns through the output alone.
  sum(tied.forward(ids({1, 2, 3, 0}, 1), ids({1, 5, 7}, 1))).backward();
  const Tensor row = narrow(embedding.grad(), 0, 9, 1);
  CHECK(sum(row * row).item() > 0);
}

TEST_CASE("model FLOPs: the formula equals the products of the model's own weights and attention maps", "[ch07]") {
  // Counted a second way, from the parameters a model built from the config really has: each Linear weight
  // [out, in] costs 2 in out per token of the side it reads (sources for the encoder and the cross-attention's
  // K, V; targets for the rest), and each attention 4 Tq Tk D per sequence (Q K^T, then P V). S != T, so a
  // length swapped anywhere shows.
  Config cfg = small_config();
  cfg.n_layers = 3;
  const std::int64_t batch = 3, s = 7, t = 5;
  Generator gen(1);
  Transformer model(cfg, gen);
  double expected = 0;
  for (const auto& [name, p] : model.named_parameters()) {
    if (p.dim() != 2 || name.find("embed") != std::string::npos) continue;
    const bool reads_sources = name.rfind("encoder.", 0) == 0 || name.find("cross_attn.w_k") != std::string::npos ||
                               name.find("cross_attn.w_v") != std::string::npos;
    expected += 2.0 * static_cast<double>(p.size(0) * p.size(1) * batch * (reads_sources ? s : t));
    if (name.find("w_q.weight") == std::string::npos) continue;
    const std::int64_t keys = name.rfind("encoder.", 0) == 0 || name.find("cross_attn") != std::string::npos ? s : t;
    const std::int64_t queries = name.rfind("encoder.", 0) == 0 ? s : t;
    expected += 4.0 * static_cast<double>(batch * queries * keys * cfg.d_model);
  }
  INFO("forward FLOPs counted from the model's parameters: " << expected);
  CHECK(forward_flops(cfg, batch, s, t) == Catch::Approx(expected).epsilon(1e-12));
  CHECK(training_step_flops(cfg, batch, s, t) == Catch::Approx(3 * expected).epsilon(1e-12));
  // The paper's base model on a batch of 32 x 32 tokens: ~300 GFLOP per training step (docs/performance.md).
  CHECK(training_step_flops(Config{.src_vocab = 8000, .tgt_vocab = 8000}, 32, 32, 32) ==
        Catch::Approx(299.4e9).epsilon(1e-3));
}

TEST_CASE("beam search of width 1 equals greedy decoding", "[ch07]") {
  Generator gen(2);
  Transformer model(tiny(11, 12), gen);
  model.eval();
  const Tensor src = ids({1, 2, 3, 4, 5, 0, 4, 5, 6, 7, 8, 9, 3, 3, 0, 0, 0, 0}, 3);
  DecodeOptions o;
  o.max_len = 12;
  CHECK(beam_decode(model, src, 1, 0.0, o) == greedy_decode(model, src, o));
  CHECK(beam_decode(model, src, 1, 0.6, o) == greedy_decode(model, src, o));
}

TEST_CASE("decoding with the KV cache gives the same logits as recomputing the prefix", "[ch07]") {
  // Teacher-forced: the same tokens go through Decoder::step (one at a time, cached) and Decoder::forward
  // (the whole prefix at once, causal mask); every position's logits must agree.
  Generator gen(3);
  Transformer model(tiny(11, 12), gen);
  model.eval();
  NoGradGuard no_grad;
  const Tensor src = ids({1, 2, 3, 4, 5, 0, 4, 5, 6, 7, 8, 9}, 2);
  const Tensor tgt = ids({1, 5, 7, 3, 9, 4, 1, 8, 8, 6, 2, 3}, 2);  // no PAD: a generated prefix has none
  const EncoderOutput encoded = model.encode(src);
  const Tensor full = model.logits((*model.decoder)(tgt, encoded).hidden);  // [2, 6, V]
  DecoderCache cache;
  std::vector<Tensor> rows;
  for (std::int64_t t = 0; t < tgt.size(1); ++t)
    rows.push_back(model.logits(model.decoder->step(narrow(tgt, 1, t, 1), encoded, cache)));
  CHECK(cache.length == 6);
  CHECK(cache.self_k[1].shape() == Shape{2, 2, 6, 8});
  CHECK(close(cat(rows, 1), full, 1e-5, 1e-5));
}

TEST_CASE("beam search returns sequences that end at EOS or at max_len", "[ch07]") {
  Generator gen(4);
  Transformer model(tiny(11, 12), gen);
  model.eval();
  DecodeOptions o;
  o.max_len = 6;
  for (const auto& seq : beam_decode(model, ids({1, 2, 3, 0, 5, 6, 7, 8}, 2), 4, 0.6, o)) {
    REQUIRE_FALSE(seq.empty());
    CHECK((seq.back() == o.eos || static_cast<std::int64_t>(seq.size()) == o.max_len));
    for (std::int64_t t : seq) CHECK((t != o.pad && t != o.bos));
  }
  REQUIRE_THROWS_WITH_ALL(beam_decode(model, ids({1}, 1), 0), ValueError, "width");
}

TEST_CASE("the loss at initialisation is close to ln(V)", "[ch07]") {
  // An untrained model should be unsure: near-uniform predictions cost ln(V) nats per token.
  Generator gen(5);
  const std::int64_t V = 40;
  Transformer model(tiny(30, V), gen);
  model.eval();
  Generator data(6);
  const Tensor src = ids({1, 5, 9, 12, 4, 7, 22, 2, 3, 8, 11, 6}, 2);
  const Tensor tgt = ids({1, 5, 9, 30, 4, 7, 22, 2, 3, 8, 11, 6}, 2);
  const double loss = cross_entropy(model.forward(src, tgt), tgt).item();
  INFO("loss " << loss << ", ln V " << std::log(static_cast<double>(V)));
  CHECK(std::abs(loss - std::log(static_cast<double>(V))) < 0.15 * std::log(static_cast<double>(V)));
}

TEST_CASE("the model overfits one batch: the seed's toy pairs translate exactly (no dropout)", "[ch07]") {
  const auto pairs = toy_pairs();
  std::vector<std::vector<std::string>> src, tgt;
  for (const auto& p : pairs) src.push_back(p.src), tgt.push_back(p.tgt);
  const Vocabulary sv = Vocabulary::build(src), tv = Vocabulary::build(tgt);
  Generator gen(7);
  Transformer model(tiny(sv.size(), tv.size()), gen);
  Trainer trainer(model, {.warmup = 30});
  const Batch batch = make_batch(pairs, sv, tv);
  double first = 0, last = 0;
  for (int s = 0; s < 300; ++s) (s == 0 ? first : last) = trainer.step(batch);
  INFO("loss " << first << " -> " << last);
  CHECK(last < 0.5 * first);
  CHECK(exact_match(model, pairs, sv, tv) == 1.0);
  // Beam search agrees with and without the cache, and with greedy, on a model that has learned.
  const Batch b = make_batch(pairs, sv, tv);
  DecodeOptions full;
  full.use_cache = false;
  const auto beam = beam_decode(model, b.src, 3, 0.6);
  CHECK(beam == beam_decode(model, b.src, 3, 0.6, full));
  CHECK(beam == greedy_decode(model, b.src));
}

TEST_CASE("a run resumed from a mid-run checkpoint continues bit-identically", "[ch07]") {
  const NumeralTask task(1);
  Vocabulary sv, tv;
  for (std::int64_t n : {1, 10, 11, 20, 100, 110, 1003, 10003, 10300, 23456, 98765, 70001})
    for (std::int64_t k = 0; k < 10; ++k) {
      const Pair p = numeral_pair(std::min<std::int64_t>(n + k * 1111, NumeralTask::kMax));
      for (const auto& t : p.src) sv.add(t);
      for (const auto& t : p.tgt) tv.add(t);
    }
  for (const char* w :
       {"one",    "two",    "three",    "four",     "five",    "six",     "seven",     "eight",    "nine",     "ten",
        "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty",
        "thirty", "forty",  "fifty",    "sixty",    "seventy", "eighty",  "ninety",    "hundred",  "thousand", "and"})
    tv.add(w);
  Config c = tiny(sv.size(), tv.size());
  c.dropout = 0.1;  // the dropout masks must resume too
  auto run = [&](int steps, const std::filesystem::path& save, const std::filesystem::path& load) {
    Generator gen(11), data(12);
    Transformer model(c, gen);
    Trainer trainer(model, {.warmup = 10});
    if (!load.empty()) trainer.load(load, {{"model", &gen}, {"data", &data}});
    std::vector<double> losses;
    for (int s = 0; s < steps; ++s) losses.push_back(trainer.step(make_batch(task.train_batch(8, data), sv, tv)));
    if (!save.empty()) trainer.save(save, {{"model", &gen}, {"data", &data}});
    return losses;
  };
  const auto path = std::filesystem::temp_directory_path() / "stepformer-test-resume07.safetensors";
  const auto uninterrupted = run(6, {}, {});
  const auto first_half = run(3, path, {});
  const auto second_half = run(3, {}, path);
  CHECK(std::vector<double>(uninterrupted.begin(), uninterrupted.begin() + 3) == first_half);
  CHECK(std::vector<double>(uninterrupted.begin() + 3, uninterrupted.end()) == second_half);
}

TEST_CASE("vocabulary: dense unique ids, round trip, UNK (seed 000's duplicate '.')", "[ch07][data]") {
  const Vocabulary v =
      Vocabulary::build({word_tokens("I have a good friend ."), word_tokens("I have zero girl friend .")});
  CHECK(v.size() == 4 + 8);
  for (std::int64_t i = Vocabulary::kUnk + 1; i < v.size(); ++i) CHECK(v.id(v.token(i)) == i);  // words
  std::set<std::string> names;
  for (std::int64_t i = 0; i < v.size(); ++i) names.insert(v.token(i));
  CHECK(static_cast<std::int64_t>(names.size()) == v.size());  // unique
  const auto tokens = word_tokens("I have a girl friend .");
  CHECK(v.decode(v.encode(tokens)) == tokens);
  CHECK(v.id("boy") == Vocabulary::kUnk);
  CHECK(v.decode({Vocabulary::kBos, v.id("I"), Vocabulary::kEos, v.id("have")}) == std::vector<std::string>{"I"});
  REQUIRE_THROWS_WITH_ALL(v.token(12), IndexError, "id 12", "12 tokens");
}

TEST_CASE("vocabulary: the specials' names in text are unknown words, not control tokens", "[ch07][data]") {
  // Found by fuzz_tokens: "<eos>" typed in a sentence used to encode as EOS and cut the sentence short.
  const auto tokens = word_tokens("an <eos> in the middle <pad> <bos> <unk>");
  const Vocabulary v = Vocabulary::build({tokens});
  CHECK(v.size() == 4 + 4);  // an, in, the, middle
  const auto ids = v.encode(tokens);
  CHECK(ids[1] == Vocabulary::kUnk);
  CHECK(ids[5] == Vocabulary::kUnk);
  CHECK(ids[6] == Vocabulary::kUnk);
  CHECK(v.decode(ids).size() == tokens.size());  // nothing is cut
  CHECK(v.token(Vocabulary::kEos) == "<eos>");   // the specials themselves are still there
}

TEST_CASE("Chinese numerals and English words follow the rules, including 零", "[ch07][data]") {
  CHECK(chinese_numeral(10003) == "一万零三");
  CHECK(english_number(10003) == "ten thousand and three");
  CHECK(chinese_numeral(321) == "三百二十一");
  CHECK(english_number(321) == "three hundred twenty one");
  CHECK(chinese_numeral(10) == "十");
  CHECK(chinese_numeral(110) == "一百一十");
  CHECK(chinese_numeral(1030) == "一千零三十");
  CHECK(chinese_numeral(10300) == "一万零三百");
  CHECK(chinese_numeral(11000) == "一万一千");
  CHECK(english_number(11000) == "eleven thousand");
  CHECK(english_number(99999) == "ninety nine thousand nine hundred ninety nine");
  CHECK(char_tokens("一万零三") == std::vector<std::string>{"一", "万", "零", "三"});
  REQUIRE_THROWS_AS(chinese_numeral(0), ValueError);
}

TEST_CASE("held-out numbers never appear in training batches", "[ch07][data]") {
  const NumeralTask task(3);
  const auto test = task.test_set(200);
  CHECK(test.size() == 200);
  std::set<std::string> held_out;
  for (const auto& p : test) held_out.insert(join(p.src, ""));
  Generator gen(1);
  for (const auto& p : task.train_batch(2000, gen)) CHECK(held_out.count(join(p.src, "")) == 0);
  std::int64_t in_test = 0;
  for (std::int64_t n = 1; n <= 5000; ++n) in_test += task.is_test(n);
  CHECK(std::abs(static_cast<double>(in_test) / 5000.0 - 0.1) < 0.02);
}

TEST_CASE("batches by tokens: every pair once, each batch within the budget", "[ch07][data]") {
  std::vector<Pair> pairs;
  Vocabulary sv, tv;
  for (int n = 1; n <= 40; ++n) {  // sources of 1..8 words, targets of 1..10
    Pair p;
    for (int k = 0; k <= n % 8; ++k) p.src.push_back("s" + std::to_string(k));
    for (int k = 0; k <= n * 3 % 10; ++k) p.tgt.push_back("t" + std::to_string(n) + "_" + std::to_string(k));
    for (const auto& w : p.src) sv.add(w);
    for (const auto& w : p.tgt) tv.add(w);
    pairs.push_back(p);
  }
  pairs.push_back({std::vector<std::string>(20, "s0"), {"t1_0"}});  // longer than the budget: a batch of its own
  const std::int64_t budget = 24;
  const auto batches = make_token_batches(pairs, sv, tv, budget);
  std::multiset<std::int64_t> seen, expected;  // each pair's first target id (unique per pair but the long one)
  for (const auto& p : pairs) expected.insert(tv.id(p.tgt[0]));
  std::int64_t full = 0;
  for (const Batch& b : batches) {
    const std::int64_t padded = b.src.size(0) * std::max(b.src.size(1), b.tgt_in.size(1));
    CAPTURE(b.src.shape(), b.tgt_in.shape());
    if (b.src.size(0) > 1)
      CHECK(padded <= budget);
    else
      CHECK((padded <= budget || b.src.size(1) == 20));
    full += padded > budget / 2;
    for (std::int64_t i = 0; i < b.tgt_out.size(0); ++i) seen.insert(b.tgt_out.at({i, 0}));
  }
  CHECK(seen == expected);
  CHECK(full >= static_cast<std::int64_t>(batches.size()) - 2);  // batches are filled, not one pair each
  // The target side is read with BOS in front: 5 target words take 6 positions, so a budget of 10 holds one pair.
  const std::vector<Pair> long_targets(4, Pair{{"s0"}, {"t1_0", "t1_0", "t1_0", "t1_0", "t1_0"}});
  for (const Batch& b : make_token_batches(long_targets, sv, tv, 10)) CHECK(b.tgt_in.shape() == Shape{1, 6});
  CHECK_THROWS_AS(make_token_batches(pairs, sv, tv, 0), ValueError);
}

TEST_CASE("batches: shifted targets, padding, token counts", "[ch07][data]") {
  const auto pairs = toy_pairs();
  std::vector<std::vector<std::string>> src, tgt;
  for (const auto& p : pairs) src.push_back(p.src), tgt.push_back(p.tgt);
  const Vocabulary sv = Vocabulary::build(src), tv = Vocabulary::build(tgt);
  const Batch b = make_batch({pairs[0], {word_tokens("我 有"), word_tokens("I have")}}, sv, tv);
  CHECK(b.src.shape() == Shape{2, 7});
  CHECK(b.tgt_in.shape() == Shape{2, 7});
  CHECK(b.tgt_in.at({0, 0}) == Vocabulary::kBos);
  CHECK(b.tgt_out.at({0, 6}) == Vocabulary::kEos);
  CHECK(b.tgt_in.at({0, 1}) == b.tgt_out.at({0, 0}));  // shifted right by one
  CHECK(b.src.at({1, 2}) == Vocabulary::kPad);
  CHECK(b.target_tokens == 7 + 3);
}
