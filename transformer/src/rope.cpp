// Chapter 12. Shape legend in transformer/config.h.
#include "transformer/rope.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "autograd/errors.h"
#include "autograd/ops.h"

namespace stepformer::transformer {

RopePairing rope_pairing_from_name(const std::string& name) {
  if (name == "half") return RopePairing::half;
  if (name == "adjacent") return RopePairing::adjacent;
  throw ValueError(fmt::format("rope pairing: expected half or adjacent, got '{}'", name));
}

namespace {
// The angles (start + t) theta_i of every position t and pair i, as cos and sin tables [T, Dh/2] (float64).
void angle_tables(std::int64_t T, std::int64_t Dh, std::int64_t start, double base, std::vector<double>& cos_t,
                  std::vector<double>& sin_t) {
  const std::int64_t pairs = Dh / 2;
  cos_t.resize(T * pairs);
  sin_t.resize(T * pairs);
  // EXERCISE 12.2: position start + t, pair i: angle (start + t) * base^(-2i / Dh); its cos and sin.
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t i = 0; i < pairs; ++i) {
      const double theta = std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(Dh));
      const double angle = static_cast<double>(start + t) * theta;
      cos_t[t * pairs + i] = std::cos(angle);
      sin_t[t * pairs + i] = std::sin(angle);
    }
  // END EXERCISE
}

// The tables of positions [start, start + T) as one tensor [2, T, Dh/2] (cos, then sin) on o's device in o's dtype.
// Every layer rotates q and k at the same positions, training rotates the same positions every step, and each
// generated token the next position; a table built on the host is copied to the device, which makes a GPU's host
// wait (Backend::host_waits). So one table per head size, base, dtype and device is kept and read in part: built
// from `start` for at least 64 positions, and built again only for positions outside it. A training step builds
// none, and generating builds one every 64 tokens.
Tensor angle_tensor(std::int64_t T, std::int64_t Dh, std::int64_t start, double base, const Options& o) {
  using Key = std::tuple<std::int64_t, double, DType, DeviceType, int>;
  struct Kept {
    std::int64_t start = 0;
    Tensor tables;  // [2, N, Dh/2]: positions [start, start + N)
  };
  static std::mutex mutex;
  static auto* kept = new std::map<Key, Kept>;  // never destroyed: tensors outlive static destruction order
  const std::lock_guard<std::mutex> lock(mutex);
  Kept& k = (*kept)[Key{Dh, base, o.dtype, o.device.type, o.device.index}];
  if (!k.tables.defined() || start < k.start || start + T > k.start + k.tables.size(1)) {
    const std::int64_t N = std::max<std::int64_t>(T, 64);
    std::vector<double> c, s;
    angle_tables(N, Dh, start, base, c, s);
    c.insert(c.end(), s.begin(), s.end());
    k = {start, from_vector(c, {2, N, Dh / 2}, o)};
  }
  return narrow(k.tables, 1, start - k.start, T);
}

// The rows of positions [0, N), N >= limit, as one tensor [N, Dh] on o's device in o's dtype (a row: its Dh/2 cos,
// then its Dh/2 sin; built in float64, then rounded once, as angle_tensor's), kept per head size, base, dtype and
// device for at least 1,024 positions: a decode step's rotation gathers its one row, in the dtype it multiplies in.
// The eager step before a recording copies the table to the device once; a step recorded after copies nothing, and
// neither do later generations.
Tensor angle_rows(std::int64_t limit, std::int64_t Dh, double base, const Options& o) {
  using Key = std::tuple<std::int64_t, double, DType, DeviceType, int>;
  static std::mutex mutex;
  static auto* kept = new std::map<Key, Tensor>;  // never destroyed, as angle_tensor's
  const std::lock_guard<std::mutex> lock(mutex);
  Tensor& rows = (*kept)[Key{Dh, base, o.dtype, o.device.type, o.device.index}];
  if (!rows.defined() || rows.size(0) < limit) {
    const std::int64_t pairs = Dh / 2, N = std::max<std::int64_t>(limit, 1024);  // 1,024 rows of Dh 64: 512 KiB
    std::vector<double> c, s, both(static_cast<std::size_t>(N * Dh));
    angle_tables(N, Dh, 0, base, c, s);
    for (std::int64_t t = 0; t < N; ++t)
      for (std::int64_t i = 0; i < pairs; ++i) {
        both[static_cast<std::size_t>(t * Dh + i)] = c[static_cast<std::size_t>(t * pairs + i)];
        both[static_cast<std::size_t>(t * Dh + pairs + i)] = s[static_cast<std::size_t>(t * pairs + i)];
      }
    rows = from_vector(both, {N, Dh}, o);
  }
  return rows;
}
}  // namespace

Tensor rope(const Tensor& x, std::int64_t start, RopePairing pairing, double base) {
  if (x.dim() != 4 || x.size(3) % 2 != 0)
    throw ShapeError(fmt::format("rope expected [B, H, T, Dh] with Dh even, got {}", to_string(x.shape())));
  if (start < 0 || !(base > 1)) throw ValueError(fmt::format("rope: start {} must be >= 0, base {} > 1", start, base));
  const std::int64_t T = x.size(2), Dh = x.size(3);
  const Tensor tables = angle_tensor(T, Dh, start, base, {x.dtype(), x.device()});  // [2, T, Dh/2]: cos, sin
  return rotate_pairs(x, squeeze(narrow(tables, 0, 0, 1), 0), squeeze(narrow(tables, 0, 1, 1), 0), pairing);
}

Tensor rope(const Tensor& x, const Position& at, RopePairing pairing, double base) {
  if (!at.on_device) return rope(x, at.start, pairing, base);
  if (x.dim() != 4 || x.size(2) != 1 || x.size(3) % 2 != 0)
    throw ShapeError(
        fmt::format("rope at a device position expected [B, H, 1, Dh] with Dh even, got {}", to_string(x.shape())));
  if (!(base > 1)) throw ValueError(fmt::format("rope: base {} must be > 1", base));
  const std::int64_t Dh = x.size(3);
  const Tensor row =
      at.on_device->row_of(angle_rows(at.on_device->limit(), Dh, base, {x.dtype(), x.device()}), x.dtype());
  return rotate_pairs(x, narrow(row, 1, 0, Dh / 2), narrow(row, 1, Dh / 2, Dh / 2), pairing);  // row [1, Dh]
}

}  // namespace stepformer::transformer
