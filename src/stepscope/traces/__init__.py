"""traces layer."""
