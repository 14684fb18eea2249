#pragma once
// Initialisation in place (under no-grad), as torch.nn.init, from a seeded generator: the same seed gives
// the same weights on every run and device. fan_in / fan_out as torch: for a weight [out, in, *k],
// fan_in = in * prod(k) and fan_out = out * prod(k).
#include <cstdint>

#include "autograd/random.h"
#include "autograd/tensor.h"

namespace stepformer::nn::init {

std::int64_t fan_in(const Tensor& w);
std::int64_t fan_out(const Tensor& w);

void uniform_(Tensor& t, double low, double high, Generator& gen = default_generator());
void normal_(Tensor& t, double mean, double std, Generator& gen = default_generator());
void zeros_(Tensor& t);
void ones_(Tensor& t);
// Glorot & Bengio (2010): std = gain * sqrt(2 / (fan_in + fan_out)).
void xavier_uniform_(Tensor& t, double gain = 1.0, Generator& gen = default_generator());
void xavier_normal_(Tensor& t, double gain = 1.0, Generator& gen = default_generator());
// He et al. (2015), fan_in mode, leaky-ReLU gain sqrt(2 / (1 + a^2)); a = 0 is plain ReLU.
void kaiming_uniform_(Tensor& t, double a = 0.0, Generator& gen = default_generator());
void kaiming_normal_(Tensor& t, double a = 0.0, Generator& gen = default_generator());

}  // namespace stepformer::nn::init
