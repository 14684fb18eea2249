// Chapter 10's benchmark: one training step of the small or base configuration (train_bench's shapes) with
// the global batch split over the job's processes, one thread each. Run it on 1 process and on 2 and compare:
//
//   build/bench/bin/dp_bench base                          1 process, the whole batch
//   mpirun -np 2 build/bench/bin/dp_bench base             2 processes, half the batch each, overlapped
//   mpirun -np 2 build/bench/bin/dp_bench base --no-overlap   gradients sent after backward
//   mpirun -np 2 build/bench/bin/dp_bench base --zero         ZeRO-1
//   build/bench/bin/dp_bench base --batch 16                 1 process, one rank's share (no communication)
//
// Prints the best and median step, target tokens per second of the whole job, how long rank 0 waited for
// gradients after backward (the communication backward did not hide), and the mean peak RSS per rank.
#include <fmt/format.h>
#include <omp.h>
#include <CLI/CLI.hpp>

#include <algorithm>

#include "distributed/train.h"
#include "model_setup.h"
#include "timing.h"

using namespace stepformer;
using namespace stepformer::transformer;

int main(int argc, char** argv) {
  std::string which = "small", precision = "fp32";
  int steps = 0;
  std::int64_t batch = 0;  // 0: the setup's
  bool zero = false, overlap = true;
  CLI::App app{"dp_bench: a training step split over MPI processes (run under mpirun -np N)"};
  app.add_option("setup", which, "small or base")->capture_default_str()->check(CLI::IsMember({"small", "base"}));
  app.add_option("--steps", steps, "timed steps (0: 20 small, 4 base)")->check(CLI::NonNegativeNumber);
  app.add_option("--batch", batch, "rows of the whole batch (0: the setup's)")->check(CLI::NonNegativeNumber);
  app.add_flag("--zero", zero, "ZeRO-1: each rank keeps and updates its shard of Adam's state");
  app.add_flag("!--no-overlap", overlap, "all-reduce the gradients after backward, not during it");
  app.add_option("--precision", precision, "fp32, or bf16 autocast")
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "bf16"}));
  CLI11_PARSE(app, argc, argv);
  distributed::Communicator comm;
  omp_set_num_threads(1);
  bench::ModelSetup setup = bench::model_setup(which);
  if (batch > 0) setup.batch = batch;  // e.g. one process with half the batch: what each of 2 ranks computes
  if (setup.batch % comm.size() != 0) {
    fmt::print(stderr, "dp_bench: the batch of {} rows does not split over {} processes\n", setup.batch, comm.size());
    return 2;
  }
  if (steps <= 0) steps = which == "base" ? 4 : 20;
  const std::int64_t rows = setup.batch / comm.size();
  Generator gen(1 + static_cast<std::uint64_t>(comm.rank())), data(2 + static_cast<std::uint64_t>(comm.rank()));
  Transformer model(setup.cfg, gen);
  distributed::DistributedTrainer trainer(model, comm, {.warmup = 4000, .precision = precision_from_name(precision)},
                                          {.zero = zero, .data_parallel = {.overlap = overlap}});
  const Batch b = bench::random_batch(setup, rows, data);
  trainer.step(b);  // warm-up: first touch of every buffer
  const double waited_before = trainer.data_parallel() ? trainer.data_parallel()->seconds_waiting() : 0.0;
  std::vector<double> times;
  for (int s = 0; s < steps; ++s) {
    comm.barrier();  // every rank starts the step together: the time is the job's
    times.push_back(bench::seconds([&] { trainer.step(b); }));
  }
  const double waited = (trainer.data_parallel() ? trainer.data_parallel()->seconds_waiting() : 0.0) - waited_before;
  const double rss = comm.all_reduce_sum(bench::peak_rss_mb()) / comm.size();
  std::sort(times.begin(), times.end());
  double total = 0;
  for (double t : times) total += t;
  if (comm.rank() == 0)
    fmt::print(
        "{} config, {}, {} process(es) x 1 thread, {}{}: step {:.1f} ms best, {:.1f} ms median of {}; {:.0f} target "
        "tokens/s; rank 0 waited {:.1f}% of the steps for gradients; peak RSS {:.0f} MB per rank\n",
        which, precision, comm.size(), zero ? "ZeRO-1" : "data parallel",
        zero      ? ""
        : overlap ? " overlapped"
                  : " not overlapped",
        times.front() * 1e3, times[times.size() / 2] * 1e3, steps,
        static_cast<double>(setup.batch * setup.len) / times[times.size() / 2], 100 * waited / total, rss);
  return 0;
}
