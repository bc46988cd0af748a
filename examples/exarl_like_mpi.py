"""An EXARL-like reinforcement-learning layout on mpi4py, no deep-learning framework: one learner (rank 0)
and actors (every other rank). Each step, every actor rolls out a batch of experience with the current
weights of a tiny linear policy (NumPy), sends it to the learner (``Send`` of a NumPy buffer, then a
pickled ``send`` of the episode's summary), the learner receives from whichever actor is ready
(``Recv`` from ``ANY_SOURCE``), takes a gradient step and broadcasts the new weights (``Bcast``).

    stepscope run -- mpirun -n 3 python examples/exarl_like_mpi.py --steps 20
    stepscope run -- mpirun -n 3 python examples/exarl_like_mpi.py --slow-rank 2 --slow-ms 50  # a slow actor
    stepscope show latest --ranks          # the slow actor as the straggler, the learner waiting for it
    stepscope show latest --comm-matrix    # experience bytes actor -> learner, weights learner -> actors

Roles are named with ``stepscope.session(role=...)``; steps with ``stepscope.steps``; every MPI call is
timed by stepscope without any code here.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from mpi4py import MPI

import stepscope

TAG_EXPERIENCE = 11
TAG_SUMMARY = 12


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--obs", type=int, default=8, help="observation size")
    p.add_argument("--actions", type=int, default=4)
    p.add_argument("--batch", type=int, default=16, help="transitions per actor per step")
    p.add_argument("--actor-ms", type=float, default=5.0, help="simulated environment time per rollout")
    p.add_argument("--slow-rank", type=int, default=-1, help="this actor's environment is slower")
    p.add_argument("--slow-ms", type=float, default=0.0, help="extra environment time of --slow-rank")
    p.add_argument("--lr", type=float, default=0.01)
    args = p.parse_args()

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    if size < 2:
        raise SystemExit("run with at least 2 ranks: mpirun -n 3 python exarl_like_mpi.py")
    rng = np.random.default_rng(rank)
    weights = np.zeros((args.obs, args.actions))
    width = args.obs + 2  # observation, action, reward
    with stepscope.session(role="learner" if rank == 0 else "actor"):
        for _ in stepscope.steps(range(args.steps)):
            if rank == 0:
                experience = np.empty((args.batch, width))
                rewards = []
                grad = np.zeros_like(weights)
                for _actor in range(size - 1):
                    status = MPI.Status()
                    comm.Recv(experience, source=MPI.ANY_SOURCE, tag=TAG_EXPERIENCE, status=status)
                    summary = comm.recv(source=status.Get_source(), tag=TAG_SUMMARY)
                    rewards.append(summary["reward"])
                    obs, act, rew = experience[:, :args.obs], experience[:, args.obs].astype(int), experience[:, -1]
                    onehot = np.eye(args.actions)[act]
                    grad += obs.T @ (onehot * rew[:, None]) / args.batch
                weights += args.lr * grad / (size - 1)
                stepscope.log(mean_reward=float(np.mean(rewards)))
            else:
                time.sleep((args.actor_ms + (args.slow_ms if rank == args.slow_rank else 0.0)) / 1000)
                obs = rng.standard_normal((args.batch, args.obs))
                act = np.argmax(obs @ weights + rng.gumbel(size=(args.batch, args.actions)), axis=1)
                rew = (act == (obs[:, 0] > 0)).astype(float)
                comm.Send(np.column_stack([obs, act, rew]), dest=0, tag=TAG_EXPERIENCE)
                comm.send({"reward": float(rew.mean()), "actor": rank}, dest=0, tag=TAG_SUMMARY)
            comm.Bcast(weights, root=0)
    comm.Barrier()
    if rank == 0:
        print(f"learner: {args.steps} steps from {size - 1} actors, |w| = {np.linalg.norm(weights):.3f}", flush=True)


if __name__ == "__main__":
    main()
