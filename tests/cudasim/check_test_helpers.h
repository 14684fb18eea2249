#pragma once
// What the checker tests share (test_checks.cpp, test_checks_shared.cpp): device arrays, running a launch with
// every check on under every schedule, and looking at the reports.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "cudasim/check.h"
#include "cudasim/cudasim.h"

namespace checks_test {

using cudasim::check::Report;

// Device memory holding `values` (tracked by the checker: host vectors are not device memory).
template <class T>
struct DeviceArray {
  T* data = nullptr;
  std::size_t n = 0;
  explicit DeviceArray(const std::vector<T>& values) : n(values.size()) {
    data = static_cast<T*>(cudasim::device_allocate(n * sizeof(T)));
    cudasim::copy_to_device(data, values.data(), n * sizeof(T));
  }
  explicit DeviceArray(std::size_t count) : n(count) {
    data = static_cast<T*>(cudasim::device_allocate(n * sizeof(T)));
  }
  ~DeviceArray() { cudasim::device_free(data); }
  std::vector<T> host() const { return std::vector<T>(data, data + n); }
};

inline std::vector<float> iota(std::size_t n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.f);
  return v;
}

inline const std::pair<cudasim::Schedule, std::uint64_t> kSchedules[] = {{cudasim::Schedule::forward, 0},
                                                                         {cudasim::Schedule::reverse, 0},
                                                                         {cudasim::Schedule::random, 1},
                                                                         {cudasim::Schedule::random, 2}};

// Runs `run` with every check on, recording reports; returns them (the checks are off again after).
template <class F>
std::vector<Report> recorded(F run) {
  cudasim::check::take_reports();
  cudasim::check::enable(cudasim::check::all);
  cudasim::check::set_on_report(cudasim::check::OnReport::record);
  run();
  cudasim::check::set_on_report(cudasim::check::OnReport::throw_after_launch);
  cudasim::check::enable(cudasim::check::none);
  return cudasim::check::take_reports();
}

// recorded(run) under every schedule; the reports per schedule.
template <class F>
std::vector<std::vector<Report>> under_every_schedule(F run) {
  std::vector<std::vector<Report>> out;
  for (const auto& [order, seed] : kSchedules) {
    cudasim::set_schedule(order, seed);
    out.push_back(recorded(run));
  }
  cudasim::set_schedule(cudasim::Schedule::forward);
  return out;
}

// The first report of `checker`, or null.
inline const Report* find(const std::vector<Report>& reports, const std::string& checker) {
  const auto it = std::find_if(reports.begin(), reports.end(), [&](const Report& r) { return r.checker == checker; });
  return it == reports.end() ? nullptr : &*it;
}

inline bool same(const cudasim::uint3& a, unsigned x, unsigned y = 0, unsigned z = 0) {
  return a.x == x && a.y == y && a.z == z;
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

inline std::string all_messages(const std::vector<Report>& reports) {
  std::string s;
  for (const Report& r : reports) s += r.message + "\n";
  return s;
}

}  // namespace checks_test
