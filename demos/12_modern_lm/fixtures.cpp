// Chapter 12's fixtures for tools/compare: what its PyTorch scripts recompute (lm_fixture writes them).
#include "fixtures.h"

#include <fmt/format.h>

#include "autograd/ops.h"
#include "autograd/random.h"
#include "nn/safetensors.h"

namespace ch12 {

namespace {
// The model's shape as tools/compare reads it.
sf::nn::Metadata config_metadata(const std::string& block, const LMConfig& cfg) {
  return {{"block", block},
          {"n_layers", std::to_string(cfg.n_layers)},
          {"d_model", std::to_string(cfg.d_model)},
          {"n_heads", std::to_string(cfg.n_heads)},
          {"n_kv_heads", std::to_string(cfg.n_kv_heads)},
          {"swiglu_hidden", std::to_string(swiglu_hidden(cfg.d_ff))},
          {"rope_pairing", cfg.rope_pairing == RopePairing::half ? "half" : "adjacent"},
          {"eps", "1e-05"}};
}
}  // namespace

void write_parity_file(const Options& o, const std::string& path) {
  sf::Generator gen(o.common.seed);
  const LMConfig cfg = config_for(o, o.block, o.vocab);
  LanguageModel model(cfg, gen);
  const std::int64_t B = 2, T = std::min<std::int64_t>(o.seq_len, 16);
  std::vector<std::int64_t> drawn;
  const std::uint64_t offset = gen.take(static_cast<std::uint64_t>(B * (T + 1)));
  for (std::int64_t i = 0; i < B * (T + 1); ++i)
    drawn.push_back(static_cast<std::int64_t>(sf::random_bits(gen.seed(), offset, static_cast<std::uint64_t>(i)) %
                                              static_cast<std::uint64_t>(o.vocab)));
  const sf::Tensor ids = sf::from_vector(drawn, {B, T + 1}, {sf::DType::int64});
  const sf::Tensor inputs = contiguous(narrow(ids, 1, 0, T)), targets = contiguous(narrow(ids, 1, 1, T));
  const sf::Tensor logits = model(inputs);
  const sf::Tensor loss = sf::cross_entropy(logits, targets);
  loss.backward();
  sf::nn::StateDict out = model.state_dict();
  out["input.ids"] = inputs;
  out["input.targets"] = targets;
  out["output.logits"] = logits.detach();
  out["output.loss"] = loss.detach();
  for (const auto& [name, p] : model.named_parameters()) out["grad." + name] = p.grad();
  sf::nn::save_safetensors(path, out, config_metadata(o.block, cfg));
  fmt::print("wrote {}: {} tensors, loss {:.6f}\n", path, out.size(), loss.item());
}

void write_data_file(const Options& o, const Corpus& c, const std::string& path) {
  sf::Generator gen(o.common.seed);  // as main() makes the model it trains
  const LMConfig cfg = config_for(o, o.block, c.vocab.size());
  LanguageModel model(cfg, gen);
  sf::nn::StateDict out = model.state_dict();
  for (const auto& [name, stream] : {std::pair{"data.train", &c.train}, {"data.valid", &c.valid}})
    out[name] = sf::from_vector(stream->ids, {static_cast<std::int64_t>(stream->ids.size())}, {sf::DType::int64});
  sf::nn::Metadata meta = config_metadata(o.block, cfg);
  meta["vocab"] = std::to_string(c.vocab.size());
  meta["valid_bytes"] = std::to_string(c.valid.bytes);
  meta["batch"] = std::to_string(o.batch);
  meta["seq_len"] = std::to_string(o.seq_len);
  meta["lr"] = fmt::format("{}", o.lr);
  meta["valid_windows"] = std::to_string(o.valid_windows);
  sf::nn::save_safetensors(path, out, meta);
  fmt::print("wrote {}: the {} model's starting weights, {} training and {} validation tokens\n", path, o.block,
             c.train.ids.size(), c.valid.ids.size());
}

}  // namespace ch12
