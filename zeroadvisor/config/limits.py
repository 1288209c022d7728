"""The limits on what is read, one place for config files and model descriptions alike.

Each limit is far above anything real and far below what would make a hostile file slow:
the tool must answer in seconds, never hang or exhaust memory, whatever it is given.
"""

from __future__ import annotations

# A DeepSpeed config is a few kilobytes (the largest of 284 real ones is under 10 KB).
# Anything far larger is not a config; refusing it keeps hostile input fast.
MAX_CONFIG_BYTES = 1 << 20

# A model description is a few lines; a Hugging Face config.json can carry a label map
# (ImageNet-21k's id2label is about 0.7 MB), so descriptions get more room than configs.
MAX_MODEL_BYTES = 16 << 20

# DeepSpeed's recursive hjson decoder dies with RecursionError a few hundred levels down;
# real configs nest at most 6 levels.
MAX_DEPTH = 200

# Every value is indexed by its JSON pointer, so a long key path is stored once per value
# under it: a 400,000-character key over 300,000 array elements would be 120 GB of
# pointers. The pointers of one file may add up to this many characters; the 284 real
# configs need at most a few thousand.
MAX_POINTER_CHARS = 32 << 20

# YAML aliases (*name) repeat an anchored block; nine nested aliases of nine make a
# 553-byte file expand to 387 million values (the "billion laughs"). Aliases may add at
# most this many values to the document; a real config has a few hundred values in all.
MAX_YAML_ALIAS_VALUES = 10_000

# The largest size the memory model multiplies (a model dimension, a sequence length, a micro
# batch). Real values stay far below it (hidden sizes of ~30k, 256k vocabularies, 10M-token
# contexts), and with every factor bounded the byte counts stay far inside the float range the
# reports format them in (a product of five such factors is 2**150, floats reach 2**1024).
# Defined here, where inputs are read and bounded.
MAX_DIMENSION = 2**30

# The most GPUs (processes) a run may have: the largest training clusters have ~10**5 GPUs, so 2**24 is a typo
# ("--gpus 10**30", a launch command's "--nproc-per-node 99999999"), not a plan. memory/cluster.py bounds the
# cluster by it; config/launch.py the counts a launch command writes.
MAX_GPUS = 2**24
