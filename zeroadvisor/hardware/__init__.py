"""The hardware a run is judged on: the GPU table (table.py), GPU names as people write them (gpus.py) and the
machine facts of the step time with their stated defaults (machine.py). It reads nothing else of the package."""
