"""Where runs live: run directories (the contract) and the SQL index over them."""

from stepscope.store.store import Store, open_store

__all__ = ["Store", "open_store"]
