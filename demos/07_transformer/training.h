#pragma once
// What every task of the 07 demo does around a training run: the progress line (with MFU), the loss curves,
// the pictures (loss, cross-attention, the KV cache while decoding) and the table of translations.
#include <fmt/format.h>

#include <chrono>
#include <string>
#include <vector>

#include "options.h"
#include "transformer/flops.h"
#include "transformer/train.h"

namespace ch07 {

using Clock = std::chrono::steady_clock;

using stepformer::demo::duration;
using stepformer::demo::progress;

// The losses of a run: the training loss of every step (label-smoothed, so it levels off above 0) and the
// validation loss every few steps (no smoothing, no dropout: it can approach 0).
struct Curves {
  std::vector<double> train, train_steps, valid, valid_steps;  // no train_steps: steps 1, 2, ...
};

// 07_TASK_loss.svg (the curves) and 07_TASK_attention.svg (the last layer's cross-attention of `sample`).
void write_pictures(const Options& o, const std::string& task, const Curves& curves, Transformer& model,
                    const Pair& sample, const Vocabulary& sv, const Vocabulary& tv);
// Sources, translations and whether each equals its reference.
void print_table(const std::vector<Pair>& pairs, const std::vector<std::vector<std::string>>& out,
                 const std::string& src_separator = "");
void print_samples(Transformer& model, const std::vector<Pair>& pairs, const Vocabulary& sv, const Vocabulary& tv);
void save_if_asked(const Options& o, const Trainer& trainer, sf::Generator& gen, sf::Generator& data_gen);
// Greedy decoding of one source, one Decoder::step at a time, drawing what the KV cache holds (07_kv_cache.svg).
void draw_kv_cache(const Options& o, Transformer& model, const Pair& sample, const Vocabulary& sv,
                   const Vocabulary& tv);

// Trains until `steps` are done, one batch from next_batch() per step: a progress line every 100 steps,
// the validation loss every `valid_every` (a multiple of 100) and at the end. Returns this run's curves.
template <class NextBatch>
Curves train_steps(Trainer& trainer, Transformer& model, std::int64_t steps, const std::vector<Batch>& valid,
                   std::int64_t valid_every, NextBatch next_batch) {
  Curves curves;
  const auto start = Clock::now();
  std::int64_t tokens = 0;
  double flops = 0;
  while (trainer.steps_done() < steps) {
    const Batch b = next_batch();
    curves.train.push_back(trainer.step(b));
    tokens += b.target_tokens;
    flops += training_step_flops(model.cfg, b.src.size(0), b.src.size(1), b.tgt_in.size(1));
    const std::int64_t s = trainer.steps_done();
    curves.train_steps.push_back(static_cast<double>(s));  // a resumed run starts past step 1
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    if (s % 100 == 0 || s == steps) {
      std::string extra;
      if (s % valid_every == 0 || s == steps) {
        curves.valid_steps.push_back(static_cast<double>(s));
        curves.valid.push_back(evaluate_loss(model, valid));
        extra = fmt::format("  valid loss {:.3f}", curves.valid.back());
      }
      progress(s, steps, curves.train.back(), static_cast<double>(tokens) / elapsed, flops / elapsed, elapsed, extra,
               trainer.precision());
    }
  }
  fmt::print("\ntrained {} steps in {}\n", curves.train.size(),
             duration(std::chrono::duration<double>(Clock::now() - start).count()));
  return curves;
}

}  // namespace ch07
