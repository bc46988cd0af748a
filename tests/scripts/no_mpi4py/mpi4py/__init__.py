"""Put first on PYTHONPATH, this stands for an environment without mpi4py: importing it fails exactly as an
uninstalled package does (ModuleNotFoundError naming mpi4py)."""

raise ModuleNotFoundError("No module named 'mpi4py'", name="mpi4py")
