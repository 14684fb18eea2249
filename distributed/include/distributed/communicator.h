#pragma once
// Chapter 10 — the processes of one job and the collectives between them, on MPI (OpenMPI in Debian).
// The only file that knows MPI is src/communicator.cpp: the engine, nn and the transformer see tensors.
//
//   mpirun -np 2 build/release/bin/10_distributed            two processes on this machine
//   mpirun -np 8 --hostfile hosts build/release/bin/10_distributed   eight, on the machines listed in `hosts`
//
// A program started without mpirun is a job of one process (rank 0 of 1), and every collective is a no-op.
// Collectives take contiguous CPU tensors (float32, float64 or int64) and must be called by every rank, in the
// same order, with the same sizes: MPI matches them by order alone, so a rank that calls them in a different
// order makes the job hang or mixes up data (docs/10_distributed.md, "What can go wrong").
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autograd/errors.h"
#include "autograd/tensor.h"

namespace stepformer::distributed {

// A collective that failed, or ranks that disagree (different models, sizes or orders); names the
// operation and, where known, the ranks and sizes.
struct DistributedError : Error {
  using Error::Error;
};

class Communicator {
 public:
  // Joins the job (MPI_Init_thread, funnelled: only the thread that made the Communicator calls MPI).
  // One per process; MPI_Finalize when it is destroyed.
  Communicator();
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& host() const { return host_; }

  void broadcast(Tensor& t, int root = 0);  // every rank's t becomes root's
  void all_reduce_sum(Tensor& t);           // in place: t becomes the sum over ranks
  double all_reduce_sum(double value);
  std::int64_t all_reduce_sum(std::int64_t value);
  // `in` holds size() equal chunks; `out` (one chunk) becomes the sum over ranks of this rank's chunk.
  void reduce_scatter_sum(const Tensor& in, Tensor& out);
  // `out` holds size() chunks; chunk r becomes rank r's `in`.
  void all_gather(const Tensor& in, Tensor& out);
  std::vector<std::int64_t> all_gather(std::int64_t value);  // one value per rank
  void barrier();
  // Ends every process of the job with `exit_code` (MPI_Abort): what a rank that cannot go on must do, since
  // the others may be waiting for it inside a collective. The destructor does it when an exception unwinds.
  [[noreturn]] void abort(int exit_code);

  // Non-blocking all-reduce: started now, finished by wait_all(); `t` must stay alive and untouched until then.
  // MPI moves data only inside MPI calls (no progress thread), so poll() lets the started ones advance while
  // the caller computes.
  void start_all_reduce_sum(Tensor& t);
  // Non-blocking reduce to one rank: `root`'s t becomes the sum over ranks (the others' t is only read).
  void start_reduce_sum(Tensor& t, int root);
  // Non-blocking broadcast: every rank's t becomes root's.
  void start_broadcast(Tensor& t, int root);
  void poll();
  void wait_all();

 private:
  int rank_ = 0, size_ = 1;
  std::string host_;
  struct Requests;  // the MPI requests in flight (src/communicator.cpp: no mpi.h in this header)
  std::unique_ptr<Requests> requests_;
};

}  // namespace stepformer::distributed
