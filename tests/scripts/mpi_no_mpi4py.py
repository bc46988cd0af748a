"""Under mpirun in an environment without mpi4py (tests/scripts/no_mpi4py first on PYTHONPATH): marks three
steps with the API and prints whether mpi4py could be imported."""

import stepscope

for _ in stepscope.steps(range(3)):
    pass
try:
    import mpi4py  # noqa: F401
    print("mpi4py importable", flush=True)
except ModuleNotFoundError:
    print("no mpi4py", flush=True)
