"""Inputs resolved once: everything a run needs, as one typed ``RunInputs`` (inputs/run.py).

``build`` (inputs/run.py) is the one place a run's inputs come together, from the command line's flags,
the Python API's keywords, the project configuration (config/project.py reads the TOML; inputs/project.py
checks it), a Trainer arguments file and a launch command (inputs/trainer.py), and in ``preflight`` the
job's own readings (inputs/environment.py). Each value is parsed and checked once, naming the flag,
keyword or project key it came from (inputs/values.py, inputs/model.py); the CLI, the Python API and
preflight all call it, and nothing here imports ``zeroadvisor.cli``.

Modules: errors (UsageError, UnusableConfig), settings (choices and fallbacks), values (sizes, shares,
GPU names, bandwidths), model (model and training shape), trainer (Trainer arguments and launch
commands), project (the project configuration checked), rules (rule selection), source (a config as
given: path, standard input or text), environment (what preflight reads from the job), run (RunInputs
and build). Importing this package imports none of them.
"""
