// Chapter 12: the decoder-only model, its KV cache, sampling, and the language-model data.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include "../helpers.h"
#include "autograd/autocast.h"
#include "transformer/lm_train.h"
#include "transformer/sampling.h"

using namespace stepformer;
using namespace stepformer::transformer;
using stepformer::test::close;
using stepformer::test::max_abs_diff;
using stepformer::test::mistake;

namespace {
LMConfig tiny(const std::string& name) {
  LMConfig c = lm_config_from_name(name, 23);  // 8 heads: GQA 2 key/value heads, MQA 1
  c.n_layers = 2;
  c.d_model = 32;
  c.n_heads = 8;  // Dh 4
  c.d_ff = 32;
  c.max_len = 16;
  return c;
}
TokenStream repeated_text() {  // seven ids, twenty times
  TokenStream s;
  for (int rep = 0; rep < 20; ++rep)
    for (std::int64_t id : {4, 9, 13, 4, 20, 7, 2}) s.ids.push_back(id);
  return s;
}
}  // namespace

TEST_CASE("every named block builds; each single change differs from the 2017 block", "[ch12]") {
  for (const std::string& name : lm_config_names()) {
    Generator gen(1);
    LanguageModel model(tiny(name), gen);
    const Tensor logits = model(from_vector(std::vector<std::int64_t>{1, 5, 7, 2}, {2, 2}, {DType::int64}));
    INFO(name);
    CHECK(logits.shape() == Shape{2, 2, 23});
  }
  CHECK_THROWS_AS(lm_config_from_name("2017+moe", 10), ValueError);
  const LMConfig l = llama_block(100);
  CHECK((l.pre_norm && l.norm == NormKind::rms && l.feed_forward == FeedForwardKind::swiglu &&
         l.positions == PositionKind::rope && l.n_kv_heads == l.n_heads / 4 && !l.bias && l.tie_embeddings));
}

// Before it learns, a model should know nothing: every token about as likely, a loss near ln V. Tied token
// vectors started at N(0, 1/D) give each position's own input token a logit near sqrt(D) (docs/12_modern_lm.md,
// "Tying the embeddings"): at D 64 the loss starts near 8 nats where ln 200 is 5.3.
TEST_CASE("every block's untrained loss is within 0.5 nats of ln V (a tied embedding starts small)", "[ch12]") {
  for (const std::string& name : lm_config_names()) {
    LMConfig c = tiny(name);
    c.vocab = 200;
    c.d_model = 64;
    Generator gen(3);
    LanguageModel model(c, gen);
    TokenStream s;
    for (std::int64_t i = 0; i < 4 * 16 * 8 + 1; ++i) s.ids.push_back((i * 7919 + 13) % 200);  // every id, unordered
    INFO(name);
    CHECK(std::abs(lm_loss(model, sequential_windows(s, 4, 16, 8)) - std::log(200.0)) < 0.5);
  }
}

TEST_CASE("the KV cache gives the full forward's logits, a prompt, a chunk and single tokens at a time", "[ch12]") {
  for (const std::string name : {"2017", "2017+learned", "llama", "2017+mqa"}) {
    Generator gen(2);
    LanguageModel model(tiny(name), gen);
    model.eval();
    const std::vector<std::int64_t> ids{3, 9, 4, 1, 17, 22, 5, 8};
    const Tensor full = model(from_vector(ids, {1, 8}, {DType::int64}));  // [1, 8, V]
    KVCache cache = model.make_cache(8);
    std::vector<Tensor> pieces;
    for (const auto& [start, length] :
         std::vector<std::pair<std::int64_t, std::int64_t>>{{0, 3}, {3, 1}, {4, 3}, {7, 1}}) {
      std::vector<std::int64_t> chunk(ids.begin() + start, ids.begin() + start + length);
      pieces.push_back(model(from_vector(chunk, {1, length}, {DType::int64}), &cache));
    }
    INFO(name);
    CHECK(cache.length() == 8);
    CHECK(close(cat(pieces, 1), full, 1e-5, 1e-4));
  }
}

TEST_CASE("the cache stores Hkv heads: bytes per token for MHA, GQA and MQA", "[ch12]") {
  LMConfig c = block_2017(100);  // 4 layers, D 256, 8 heads of 32
  CHECK(kv_cache_bytes_per_token(c) == 2 * 4 * 8 * 32 * 4);
  c.n_kv_heads = 2;
  CHECK(kv_cache_bytes_per_token(c) == 2 * 4 * 2 * 32 * 4);
  c.n_kv_heads = 1;
  CHECK(kv_cache_bytes_per_token(c, 2) == 2 * 4 * 1 * 32 * 2);
  Generator gen(3);
  LanguageModel model(tiny("llama"), gen);
  KVCache cache = model.make_cache(3);
  model(from_vector(std::vector<std::int64_t>{1, 2, 3}, {1, 3}, {DType::int64}), &cache);
  CHECK(cache.layers[0].keys().shape() == Shape{1, 2, 3, 4});  // [B, Hkv, t, Dh]: 2 of the 8 heads stored
}

// Allocated once: a token's keys are written into the buffer, and attention reads them there. A cache that
// concatenates, or hands attention a copy, moves to new memory each step.
TEST_CASE("the KV cache is allocated once, at its capacity, read in place, and refuses tokens past it", "[ch12]") {
  Generator gen(4);
  LanguageModel model(tiny("llama"), gen);
  model.eval();
  KVCache cache = model.make_cache(6);
  const auto feed = [&](std::vector<std::int64_t> ids) {
    const std::int64_t T = static_cast<std::int64_t>(ids.size());
    return model(from_vector(ids, {1, T}, {DType::int64}), &cache);
  };
  feed({1, 2, 3});
  const void* keys = cache.layers[1].keys().desc().data;
  const void* values = cache.layers[1].values().desc().data;
  feed({4});
  feed({5, 6});
  CHECK(cache.length() == 6);
  CHECK(cache.layers[1].capacity() == 6);
  CHECK(cache.layers[1].keys().desc().data == keys);
  CHECK(cache.layers[1].values().desc().data == values);
  CHECK_THROWS_WITH(feed({7}), Catch::Matchers::ContainsSubstring("LayerCache") &&
                                   Catch::Matchers::ContainsSubstring("capacity is 6"));
  LayerCache layer(4);
  layer.append(zeros({1, 2, 3, 4}), zeros({1, 2, 3, 4}));
  CHECK_THROWS_WITH(
      layer.append(zeros({2, 2, 1, 4}), zeros({2, 2, 1, 4})),
      Catch::Matchers::ContainsSubstring("[2, 2, 1, 4]") && Catch::Matchers::ContainsSubstring("[1, 2, 4, 4]"));
  CHECK_THROWS_AS(LayerCache(0), ValueError);
}

// Under autocast attention multiplies bfloat16 keys and values: the cache keeps them so (half the bytes), rounded as
// attention would round them, so the cached logits stay the full forward's.
TEST_CASE("under bfloat16 autocast the KV cache holds bfloat16 and gives the full forward's logits", "[ch12]") {
  Generator gen(5);
  LanguageModel model(tiny("llama"), gen);
  model.eval();
  const NoGradGuard no_grad;
  const AutocastGuard autocast(DType::bfloat16);
  const std::vector<std::int64_t> ids{3, 9, 4, 1, 17, 22};
  const Tensor full = model(from_vector(ids, {1, 6}, {DType::int64}));
  KVCache cache = model.make_cache(6);
  std::vector<Tensor> pieces;
  for (const auto& [start, length] : std::vector<std::pair<std::int64_t, std::int64_t>>{{0, 3}, {3, 1}, {4, 2}}) {
    std::vector<std::int64_t> chunk(ids.begin() + start, ids.begin() + start + length);
    pieces.push_back(model(from_vector(chunk, {1, length}, {DType::int64}), &cache));
  }
  CHECK(cache.layers[0].keys().dtype() == DType::bfloat16);
  CHECK(cache.layers[0].values().dtype() == DType::bfloat16);
  CHECK(close(cat(pieces, 1), full, 1e-5, 1e-4));
}

TEST_CASE("sampling: greedy, temperature, top-k, and top-p keeping the token that crosses p", "[ch12]") {
  const std::vector<double> logits{std::log(0.5), std::log(0.3), std::log(0.2)};
  const auto dist = [&](SamplingOptions o) { return sampling_distribution(logits, o); };
  CHECK(dist({0.0}) == std::vector<double>{1, 0, 0});
  const auto plain = dist({1.0});
  CHECK((std::abs(plain[0] - 0.5) < 1e-12 && std::abs(plain[1] - 0.3) < 1e-12 && std::abs(plain[2] - 0.2) < 1e-12));
  const auto k2 = dist({1.0, 2});
  CHECK((std::abs(k2[0] - 0.625) < 1e-12 && std::abs(k2[1] - 0.375) < 1e-12 && k2[2] == 0));
  const auto p6 = dist({1.0, 0, 0.6});  // 0.5 < 0.6: the second token crosses 0.6 and is kept
  CHECK((std::abs(p6[0] - 0.625) < 1e-12 && std::abs(p6[1] - 0.375) < 1e-12 && p6[2] == 0));
  CHECK(dist({1.0, 0, 0.5}) == std::vector<double>{1, 0, 0});  // exactly reached by the first
  const auto hot = dist({2.0});                                // flatter: p ~ sqrt(p), renormalised
  CHECK(hot[2] > plain[2]);
  CHECK_THROWS_AS(dist({1.0, 0, 0.0}), ValueError);
  CHECK_THROWS_AS(dist({-1.0}), ValueError);
}

TEST_CASE("next_token follows the distribution and repeats for a seed", "[ch12]") {
  const Tensor logits = from_vector(std::vector<double>{std::log(0.5), std::log(0.3), std::log(0.2)}, {3});
  Generator a(7), b(7);
  std::vector<int> counts(3, 0);
  for (int i = 0; i < 2000; ++i) {
    const std::int64_t t = next_token(logits, {1.0}, a);
    if (i < 200) CHECK(t == next_token(logits, {1.0}, b));  // (each draw on cuda-sim launches kernels: 200 will do)
    ++counts[static_cast<std::size_t>(t)];
  }
  CHECK(std::abs(counts[0] / 2000.0 - 0.5) < 0.04);
  CHECK(std::abs(counts[2] / 2000.0 - 0.2) < 0.04);
}

TEST_CASE("sample_token refuses what it cannot sample from, naming the op", "[ch12]") {
  Generator gen(1);
  const Tensor logits = from_vector(std::vector<double>{0.1, 0.2, 0.3}, {3});
  CHECK_THROWS_WITH(sample_token(reshape(logits, {1, 3}), {}, gen),
                    Catch::Matchers::ContainsSubstring("sample_token expected logits [V]"));
  CHECK_THROWS_AS(sample_token(zeros({0}), {}, gen), ShapeError);
  CHECK_THROWS_AS(sample_token(from_vector(std::vector<std::int64_t>{1, 2}, {2}, {DType::int64}), {}, gen), DTypeError);
  CHECK_THROWS_WITH(sample_token(logits, {1.0, -1, 1.0}, gen), Catch::Matchers::ContainsSubstring("top_k -1"));
  CHECK_THROWS_AS(sample_token(logits, {1.0, 0, 1.5}, gen), ValueError);
  CHECK_THROWS_WITH(sample_token(logits, {}, gen, zeros({2}, {DType::int64})),
                    Catch::Matchers::ContainsSubstring("into must be [1]"));
  CHECK_THROWS_WITH(sample_token(logits, {}, gen, zeros({1})),
                    Catch::Matchers::ContainsSubstring("into must be int64"));
  // The reference device: never the default one, on which the test runs (the CPU, or cuda-sim in its variant).
  CHECK_THROWS_AS(sample_token(logits, {}, gen, zeros({1}, {DType::int64, {DeviceType::reference, 0}})), DeviceError);
  Tensor tokens = full({3}, -1, {DType::int64});
  const Tensor got = sample_token(logits, {0.0}, gen, narrow(tokens, 0, 1, 1)).token;  // greedy: id 2
  CHECK(tokens.to_vector<std::int64_t>() == std::vector<std::int64_t>{-1, 2, -1});
  CHECK(got.to_vector<std::int64_t>() == std::vector<std::int64_t>{2});
}

// The model's logits differ within float32 rounding between the devices; no draw of this seed falls that close to a
// boundary of the cumulative distribution, so the tokens are the same. On cuda-sim the third token on is a replay of
// one recorded step, its position (RoPE's, sinusoidal or learned) and its draw read on the device.
TEST_CASE("generate on cuda-sim draws the CPU's tokens, sampled on the device", "[ch12]") {
  for (const std::string name : {"llama", "2017", "2017+learned"}) {
    Generator gen(4);
    LanguageModel model(tiny(name), gen);
    Generator s1(9), s2(9);
    const auto on_cpu = generate(model, {1, 4}, 10, {0.8, 5, 0.9}, s1);
    model.to({DeviceType::cuda_sim, 0});
    INFO(name);
    CHECK(generate(model, {1, 4}, 10, {0.8, 5, 0.9}, s2) == on_cpu);
    CHECK(s1.offset() == s2.offset());  // the generator ends where the CPU's does
  }
}

TEST_CASE("generate: with and without the cache, the same tokens for a seed", "[ch12]") {
  for (const std::string name : {"2017", "llama"}) {
    Generator gen(4);
    LanguageModel model(tiny(name), gen);
    Generator s1(9), s2(9);
    const auto cached = generate(model, {1, 4}, 10, {0.8, 5, 0.9}, s1, true);
    const auto uncached = generate(model, {1, 4}, 10, {0.8, 5, 0.9}, s2, false);
    INFO(name);
    CHECK(cached == uncached);
    CHECK(cached.size() == 10);
  }
  Generator gen(5);
  LanguageModel model(tiny("2017"), gen);
  CHECK_NOTHROW(generate(model, {1}, 16, {}, gen));                // the last step reads 16 positions
  CHECK_THROWS_AS(generate(model, {1}, 17, {}, gen), ShapeError);  // 17: past max_len 16
}

TEST_CASE("verses, books held out, token streams and windows", "[ch12]") {
  const auto verses = parse_verses("Ge1:1 In the beginning.\nRuth1:1 Now it came to pass.\n1Sm2:3 Talk no more.\n");
  REQUIRE(verses.size() == 3);
  CHECK((verses[2].book == "1Sm" && verses[2].text == "Talk no more."));
  CHECK_THROWS_AS(parse_verses("In the beginning\n"), ValueError);
  const TextSplit split = split_by_books(verses, kjv_valid_books());
  CHECK((split.train.size() == 2 && split.valid == std::vector<std::string>{"Now it came to pass."}));
  TokenStream s;
  for (std::int64_t i = 0; i < 20; ++i) s.ids.push_back(i);
  Generator gen(6);
  const LMBatch b = random_windows(s, 3, 5, gen);
  CHECK(close(narrow(b.targets, 1, 0, 4), narrow(b.inputs, 1, 1, 4), 0, 0));  // targets: the inputs shifted by one
  CHECK(close(narrow(b.targets, 1, 4, 1), narrow(b.inputs, 1, 4, 1) + 1.0, 0, 0));
  const auto windows = sequential_windows(s, 2, 5, 100);  // starts 0, 5, 10 (15 + 5 would need id 20)
  REQUIRE(windows.size() == 2);
  CHECK(windows[1].inputs.to_vector<double>() == std::vector<double>{10, 11, 12, 13, 14});
  CHECK(bits_per_byte(std::log(2.0), 10, 5) == Catch::Approx(2.0));  // 1 bit per token, 2 tokens per byte
}

TEST_CASE("character tokens keep spaces and multi-byte letters; the stream counts bytes; text comes back whole",
          "[ch12]") {
  const LMTokens chars = LMTokens::characters();
  const std::string verse = "Let there be light: Ælfric’s";
  const auto pieces = chars.pieces(verse);
  CHECK(pieces.size() == 28);  // 26 one-byte characters, Æ (2 bytes) and ’ (3 bytes) one piece each
  CHECK((pieces[3] == " " && pieces[20] == "Æ" && pieces[26] == "’"));
  CHECK(chars.text(pieces) == verse);
  const Vocabulary vocab = chars.vocabulary({"ab a", "ba!"});  // the specials, then a b space ! in first appearance
  CHECK((vocab.size() == 8 && vocab.token(4) == "a" && vocab.token(6) == " " && vocab.token(7) == "!"));
  const TokenStream s = encode_stream(chars, vocab, {"ab a", "c"});  // c is not in the vocabulary
  CHECK(s.ids == std::vector<std::int64_t>{4, 5, 6, 4, Vocabulary::kEos, Vocabulary::kUnk, Vocabulary::kEos});
  CHECK(s.bytes == 7);  // each verse's bytes and its newline
}

TEST_CASE("read_kjv reads a file of some verses only when told it is a part", "[ch12]") {
  const auto path = std::filesystem::temp_directory_path() / "stepformer_kjv_part.txt";
  { std::ofstream(path) << "Ge1:1 In the beginning.\nRuth1:1 Now it came to pass.\n"; }
  CHECK(read_kjv(path.string(), /*part=*/true).size() == 2);
  CHECK_THROWS_WITH(read_kjv(path.string()), Catch::Matchers::ContainsSubstring("holds 2 verses, not 31102"));
  { std::ofstream out(path); }
  CHECK_THROWS_WITH(read_kjv(path.string(), true), Catch::Matchers::ContainsSubstring("not at least one"));
  std::filesystem::remove(path);
}

TEST_CASE("the Llama-style model learns a repeated text (loss falls below 0.5 nats)", "[ch12]") {
  Generator gen(8);
  LanguageModel model(tiny("llama"), gen);
  const TokenStream s = repeated_text();
  LMTrainer trainer(model, {2e-2, 5, 60});
  double loss = 0;
  for (int i = 0; i < 60; ++i) loss = trainer.step(random_windows(s, 4, 12, gen)).item();
  CHECK(loss < 0.5);
  CHECK(lm_loss(model, sequential_windows(s, 4, 12, 8)) < 0.5);
}

// A GPU runs ahead of the host until a copy between host and device memory makes the host wait for it, and each
// kernel costs microseconds to queue and start. Counted on cuda-sim, which makes the GPU's copies and launches: the
// numbers docs/09_cuda.md states ("Where the host waits"). A wait per parameter (a norm read back for each) or per
// layer (a table copied for each), or a composite where a kernel was, goes over them; so does a generated token
// that is not replayed as one recorded step.
TEST_CASE("on cuda-sim a training step and a generated token wait and launch no more than docs/09 states",
          "[ch12][cpu-only]") {
  // docs/09_cuda.md's tables. Replays read their index checks once in 16 (checks.cu): none in these 8.
  constexpr std::size_t kStepWaits = 0, kEagerTokenWaits = 0, kReplayedTokenWaits = 0;
  constexpr std::size_t kStepLaunches = 146, kEagerTokenLaunches = 37, kReplayedTokenLaunches = 2;
  constexpr std::size_t kDevicePositionTokenLaunches = 39;  // the model's kernels a replayed token runs
  constexpr std::size_t kReplayedStepLaunches = 4;  // the replay, the batch's two copies into place, the loss's copy
  const Device sim{DeviceType::cuda_sim, 0};
  const Device before_default = default_device();
  set_default_device(sim);
  Generator gen(8);
  LanguageModel model(tiny("llama"), gen);
  const TokenStream s = repeated_text();
  LMTrainer trainer(model, {2e-2, 5, 60});
  trainer.step(random_windows(s, 4, 12, gen));  // the optimizer's state is made here, once
  const LMBatch batch = random_windows(s, 4, 12, gen);
  struct Count {
    std::size_t waits, launches;
  };
  const auto cost = [&](const std::function<void()>& run) {
    const Count start{host_waits(sim), kernel_launches(sim)};
    run();
    return Count{host_waits(sim) - start.waits, kernel_launches(sim) - start.launches};
  };
  const Count step = cost([&] { trainer.step(batch); });
  trainer.step(batch);  // the third: recorded, then replayed
  const Count replayed_step = cost([&] { trainer.step(batch); });
  // A generation's own costs (its prompt, the recording of its step) taken away by differences. An eager token: 2
  // tokens after 3 less 1 after 2 (generate replays from its third token on). A replayed token: 11 tokens after 3
  // less 3 after 3, 8 replays apart. The first generations of each length make the tables and memory they keep.
  const auto tokens = [&](std::vector<std::int64_t> prompt, std::int64_t n) {
    return cost([&] { generate(model, prompt, n, {}, gen); });
  };
  for (const std::int64_t n : {3, 11}) tokens({1, 4, 7}, n);
  const auto per_token = [](Count more, Count fewer, double apart) {
    return std::pair<double, double>{
        (static_cast<double>(more.waits) - static_cast<double>(fewer.waits)) / apart,
        (static_cast<double>(more.launches) - static_cast<double>(fewer.launches)) / apart};
  };
  const auto [eager_waits, eager_launches] = per_token(tokens({1, 4, 7}, 2), tokens({1, 4}, 1), 1);
  const auto [replayed_waits, replayed_launches] = per_token(tokens({1, 4, 7}, 11), tokens({1, 4, 7}, 3), 8);
  // What a replayed token runs on the device: the step at a device position, counted as it runs eagerly.
  const std::size_t device_position_launches = [&] {
    const NoGradGuard no_grad;
    KVCache cache = model.make_cache(8);
    const Tensor feed = from_vector(std::vector<std::int64_t>{9}, {1, 1}, {DType::int64, sim});
    model(from_vector(std::vector<std::int64_t>{1, 4, 7}, {1, 3}, {DType::int64, sim}), &cache);
    cache.keep_position_on_device(sim);
    model(feed, &cache);  // tables and memory made
    return cost([&] { model(feed, &cache); }).launches;
  }();
  set_default_device(before_default);
  WARN("a training step: " << step.waits << " host waits, " << step.launches
                           << " launches; replayed: " << replayed_step.waits << " host waits, "
                           << replayed_step.launches << " launches; an eager token: " << eager_waits << " host waits, "
                           << eager_launches << " launches (2 layers); a replayed "
                           << "token: " << replayed_waits << " host waits, " << replayed_launches
                           << " launches, of a step of " << device_position_launches << " kernels");
  CHECK(step.waits <= kStepWaits);
  CHECK(step.launches <= kStepLaunches);
  CHECK(replayed_step.waits <= kStepWaits);
  CHECK(replayed_step.launches <= kReplayedStepLaunches);
  CHECK(eager_waits <= kEagerTokenWaits);
  CHECK(eager_launches <= kEagerTokenLaunches);
  CHECK(replayed_waits <= kReplayedTokenWaits);
  CHECK(replayed_launches <= kReplayedTokenLaunches);
  CHECK(device_position_launches <= kDevicePositionTokenLaunches);
}

// A GPU's memory comes from cudaMalloc, which waits for the device, behind a cache of freed blocks of each size
// (memory.cu); cuda-sim counts the calls that cache would make. Once a token's shapes have been seen, a generated
// token needs nothing new: the KV cache was allocated at its capacity and attention reads its first rows in place.
// A cache that grows (a concatenation, or a contiguous copy of the rows read) asks for a new size every few tokens
// (attention given a contiguous copy of its rows: 57 calls after 40 tokens where 50 were made after 7).
TEST_CASE("on cuda-sim generating asks the driver for no memory after the first token", "[ch12][cpu-only]") {
  const Device sim{DeviceType::cuda_sim, 0};
  const Device before_default = default_device();
  set_default_device(sim);
  Generator gen(9);
  LanguageModel model(tiny("llama"), gen);
  model.eval();
  const NoGradGuard no_grad;
  const std::int64_t tokens = 40;
  KVCache cache = model.make_cache(3 + tokens);
  model(from_vector(std::vector<std::int64_t>{1, 4, 7}, {1, 3}, {DType::int64, sim}), &cache);
  std::vector<std::size_t> after;  // driver allocations so far, after each generated token
  for (std::int64_t t = 0; t < tokens; ++t) {
    model(from_vector(std::vector<std::int64_t>{t % 20}, {1, 1}, {DType::int64, sim}), &cache);
    after.push_back(driver_allocations(sim));
  }
  set_default_device(before_default);
  std::string trail;
  for (const std::size_t n : after) trail += std::to_string(n) + " ";
  INFO("driver allocations after each token: " << trail);
  // The prompt's forward pass built RoPE's tables for 64 positions (rope.cpp); after the first token, whose shapes
  // are new, nothing is.
  CHECK(after.back() == after.front());
}

// A decode step can be queued as one graph only if it makes no copy between host and device (DeviceGraph refuses
// one): the step recorded at a position and replayed gives that position's logits, in float32 and under bfloat16
// autocast, as the step run eagerly from the same cache does. (Replayed, it redoes the same position: docs/09_cuda.md,
// "Graphs".)
TEST_CASE("on cuda-sim the cached decode step records as a graph whose replay gives the eager step's logits",
          "[ch12][cpu-only]") {
  const Device sim{DeviceType::cuda_sim, 0};
  for (const DType precision : {DType::float32, DType::bfloat16}) {
    DYNAMIC_SECTION(dtype_name(precision)) {
      Generator gen(10);
      LanguageModel model(tiny("llama"), gen);
      model.to(sim);
      model.eval();
      const NoGradGuard no_grad;
      const AutocastGuard autocast(precision, precision == DType::bfloat16);
      const Tensor prompt = from_vector(std::vector<std::int64_t>{1, 4, 7}, {1, 3}, {DType::int64, sim});
      const Tensor feed = from_vector(std::vector<std::int64_t>{9}, {1, 1}, {DType::int64, sim});
      const auto step_after_prompt = [&](KVCache& cache) {
        (void)model(prompt, &cache);
        (void)model(feed, &cache);  // one eager token first, as before any recording
      };
      KVCache eager_cache = model.make_cache(6), graph_cache = model.make_cache(6);
      step_after_prompt(eager_cache);
      const Tensor want = model(feed, &eager_cache).cpu();
      step_after_prompt(graph_cache);
      Tensor logits;
      DeviceGraph graph(sim, [&] { logits = model(feed, &graph_cache); });
      CHECK(graph_cache.length() == 5);
      graph.replay();
      CHECK(close(logits.cpu(), want, 0, 0));
    }
  }
}

// generate's form of the step: the cache's position kept on the device, the step run once there eagerly, recorded,
// and replayed for each next token with its input filled in place. Each replay's logits are the eager step's at that
// position, bit for bit (attention over the whole capacity adds exact zeros for the blocked keys). A replay that
// rotated, embedded, wrote or attended at a stale position, or a step's gathered rows reused after the position
// moved, gives other logits.
TEST_CASE("on cuda-sim a step recorded at a device position replays token after token as eager steps run",
          "[ch12][cpu-only]") {
  const Device sim{DeviceType::cuda_sim, 0};
  const std::vector<std::int64_t> feeds{9, 2, 5, 11};
  for (const std::string name : {"llama", "2017"})
    for (const DType precision : {DType::float32, DType::bfloat16}) {
      DYNAMIC_SECTION(name << " " << dtype_name(precision)) {
        Generator gen(12);
        LanguageModel model(tiny(name), gen);
        model.to(sim);
        model.eval();
        const NoGradGuard no_grad;
        const AutocastGuard autocast(precision, precision == DType::bfloat16);
        const Tensor prompt = from_vector(std::vector<std::int64_t>{1, 4, 7}, {1, 3}, {DType::int64, sim});
        const auto token = [&](std::int64_t id) {
          return from_vector(std::vector<std::int64_t>{id}, {1, 1}, {DType::int64, sim});
        };
        KVCache eager = model.make_cache(8), replayed = model.make_cache(8);
        (void)model(prompt, &eager);
        std::vector<Tensor> want;
        for (const std::int64_t id : feeds) want.push_back(model(token(id), &eager).cpu());
        (void)model(prompt, &replayed);
        replayed.keep_position_on_device(sim);
        Tensor input = token(feeds[0]);
        CHECK(close(model(input, &replayed).cpu(), want[0], 0, 0));
        Tensor logits;
        DeviceGraph step(sim, [&] { logits = model(input, &replayed); });
        for (std::size_t i = 1; i < feeds.size(); ++i) {
          copy_(input, token(feeds[i]));
          step.replay();
          INFO("token " << i);
          CHECK(close(logits.cpu(), want[i], 0, 0));
        }
      }
    }
}

// The trainer's step recorded as a device graph (its third) and replayed: each step's loss and, after the last, every
// parameter are the eager trainer's bit for bit, with the learning rate changing at every step (warmup) and Adam's
// bias corrections with it, both read on the device. A replay that read the recorded step's lr and step count, or
// the same row of the schedule each time, gives other numbers.
TEST_CASE("on cuda-sim the training step replayed as a device graph gives the eager step's losses and weights",
          "[ch12][cpu-only]") {
  const Device sim{DeviceType::cuda_sim, 0};
  for (const DType precision : {DType::float32, DType::bfloat16}) {
    DYNAMIC_SECTION(dtype_name(precision)) {
      Generator g1(8), g2(8), data(3);
      LanguageModel eager_model(tiny("llama"), g1), replayed_model(tiny("llama"), g2);
      eager_model.to(sim);
      replayed_model.to(sim);
      const LMTrainOptions o{.lr = 2e-2, .warmup = 4, .total_steps = 60, .precision = precision};
      LMTrainOptions eager_options = o;
      eager_options.replay = false;
      LMTrainer eager(eager_model, eager_options), replayed(replayed_model, o);
      const TokenStream s = repeated_text();
      for (int step = 1; step <= 6; ++step) {
        const LMBatch batch = random_windows(s, 4, 12, data);
        const Tensor want = eager.step(batch), got = replayed.step(batch);
        INFO("step " << step);
        CHECK(close(got.cpu(), want.cpu(), 0, 0));
      }
      CHECK(replayed.replaying());
      CHECK_FALSE(eager.replaying());
      const auto want = eager_model.named_parameters(), got = replayed_model.named_parameters();
      for (std::size_t i = 0; i < want.size(); ++i) {
        INFO(want[i].first);
        CHECK(close(got[i].second.cpu(), want[i].second.cpu(), 0, 0));
      }
    }
  }
}
