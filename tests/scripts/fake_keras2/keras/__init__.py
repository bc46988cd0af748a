"""A stand-in for Keras 2 (only its version): stepscope must warn once and leave it alone."""

__version__ = "2.15.0"
