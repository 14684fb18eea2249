#pragma once
// What train_bench and dp_bench share: the small and base configurations, their random batches and the
// process's peak memory.
#include <fstream>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "transformer/config.h"
#include "transformer/data.h"

namespace stepformer::bench {

// small: d_model 128, 2+2 layers, batch 64 x 16; base: the paper's (d_model 512, 6+6 layers), batch 32 x 32.
// Both with 8000-word vocabularies and dropout 0.1.
struct ModelSetup {
  transformer::Config cfg;
  std::int64_t batch, len;
};
inline ModelSetup model_setup(const std::string& which) {
  const bool base = which == "base";
  transformer::Config cfg;
  cfg.src_vocab = cfg.tgt_vocab = 8000;
  cfg.n_layers = base ? 6 : 2;
  cfg.d_model = base ? 512 : 128;
  cfg.d_ff = base ? 2048 : 512;
  cfg.n_heads = base ? 8 : 4;
  cfg.dropout = 0.1;
  cfg.max_len = 256;
  return {cfg, base ? 32 : 64, base ? 32 : 16};
}

// VmHWM: the peak resident memory of this process, in MB.
inline double peak_rss_mb() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0;
}

inline Tensor random_ids(std::int64_t batch, std::int64_t len, std::int64_t vocab, Generator& gen) {
  // Ids 4.. (no PAD/BOS/EOS/UNK), so every position is a real token, as in the PyTorch script.
  const Tensor u = stepformer::rand({batch, len}, gen, {DType::float64});
  std::vector<std::int64_t> ids;
  for (double x : u.to_vector<double>())
    ids.push_back(4 + static_cast<std::int64_t>(x * static_cast<double>(vocab - 4)));
  return from_vector(ids, {batch, len}, {DType::int64});
}

// One random batch of the setup's shape: every target position is a real token.
inline transformer::Batch random_batch(const ModelSetup& s, std::int64_t rows, Generator& gen) {
  return {random_ids(rows, s.len, s.cfg.src_vocab, gen), random_ids(rows, s.len, s.cfg.tgt_vocab, gen),
          random_ids(rows, s.len, s.cfg.tgt_vocab, gen), rows * s.len};
}

}  // namespace stepformer::bench
