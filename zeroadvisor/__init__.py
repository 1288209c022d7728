"""zeroadvisor: lint DeepSpeed configs and advise on ZeRO memory."""

__version__ = "0.1.0"

DEEPSPEED_TARGET = "0.19.8"
