"""analyze layer."""
