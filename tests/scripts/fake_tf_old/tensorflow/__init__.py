"""Put first on PYTHONPATH, this stands for a TensorFlow stepscope does not know (2.10, before Keras 3): a
package named ``tensorflow`` with that version and none of the modules stepscope's hooks patch."""

__version__ = "2.10.0"
