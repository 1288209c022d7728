"""The package's version and the DeepSpeed release it reads configs as: below every layer, so that reports
and the memory model can name them without importing the package facade (zeroadvisor/__init__.py)."""

__version__ = "0.1.0"

DEEPSPEED_TARGET = "0.19.8"
