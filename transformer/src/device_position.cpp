// Chapter 12. Shape legend in transformer/config.h.
#include "transformer/device_position.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <numeric>

#include "autograd/errors.h"
#include "autograd/ops.h"

namespace stepformer::transformer {

namespace {
// 0, 1, .. n - 1 (int64) on `device`: a table kept per device for at least 1,024 positions, read in part and copied
// again only to grow, so that a generation made after the first copies nothing to the device (Backend::host_waits).
Tensor slot_ids(std::int64_t n, Device device) {
  static std::mutex mutex;
  static auto* kept = new std::map<std::pair<DeviceType, int>, Tensor>;  // never destroyed: see rope.cpp's tables
  const std::lock_guard<std::mutex> lock(mutex);
  Tensor& ids = (*kept)[{device.type, device.index}];
  if (!ids.defined() || ids.size(0) < n) {
    std::vector<std::int64_t> all(static_cast<std::size_t>(std::max<std::int64_t>(n, 1024)));
    std::iota(all.begin(), all.end(), 0);
    ids = from_vector(all, {static_cast<std::int64_t>(all.size())}, {DType::int64, device});
  }
  return narrow(ids, 0, 0, n);
}
}  // namespace

DevicePosition::DevicePosition(std::int64_t start, std::int64_t limit, Device device) : limit_(limit) {
  if (start < 0 || start >= limit)
    throw ValueError(fmt::format("DevicePosition: start {} must lie in [0, limit {})", start, limit));
  position_ = full({1}, static_cast<double>(start), {DType::int64, device});  // fills: nothing copied
  one_ = full({1}, 1, {DType::int64, device});
  slots_ = slot_ids(limit, device);
}

Tensor DevicePosition::row_of(const Tensor& table, DType dtype) {
  if (table.dim() != 2 || table.size(0) < limit_)
    throw ShapeError(
        fmt::format("DevicePosition: a table of at least {} rows [N, E], got {}", limit_, to_string(table.shape())));
  const void* key = table.desc().data;
  for (const Row& r : rows_)
    if (r.table.desc().data == key && r.dtype == dtype) return r.row;
  // Gathered in the table's dtype (embedding checks the position against the limit), then rounded once to dtype.
  const Tensor row = embedding(narrow(table, 0, 0, limit_), position_).to(dtype);
  rows_.push_back({table, row, dtype});
  return row;
}

Tensor DevicePosition::past() {
  if (!past_.defined()) past_ = gt(slots_, position_);
  return past_;
}

void DevicePosition::advance() {
  add_(position_, one_);
  rows_.clear();
  past_ = Tensor();
}

}  // namespace stepformer::transformer
