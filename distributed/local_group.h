// LocalGroup: the ranks of a data-parallel job as threads of one process, sharing memory. It computes what
// MPI computes (each rank's buffer replaced by the mean over ranks, added in rank order) without a launcher,
// so the data-parallel paths of TrainingSession are tested everywhere, MPI installed or not.
#pragma once

#include <memory>

#include "distributed/communicator.h"

namespace ontrain {

class LocalGroup {
 public:
  explicit LocalGroup(int size);
  ~LocalGroup();
  // Rank `rank`'s communicator; each is used by its own thread, and the group outlives them all.
  std::unique_ptr<Communicator> Rank(int rank);

  struct Shared;

 private:
  std::unique_ptr<Shared> shared_;
};

}  // namespace ontrain
