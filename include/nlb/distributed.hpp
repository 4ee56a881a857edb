// The analyses spread over several processes (docs/scaling.md): the Communicator interface, the
// window assignment, the sharded runner, and the ridge statistics' reduction. The MPI
// implementation, nlb/distributed/mpi_communicator.hpp, needs <mpi.h> and is included on its own.
#pragma once

#include "nlb/distributed/communicator.hpp"
#include "nlb/distributed/ridge_reduction.hpp"
#include "nlb/distributed/row_parts.hpp"
#include "nlb/distributed/sharded_runner.hpp"
#include "nlb/distributed/window_shard.hpp"
