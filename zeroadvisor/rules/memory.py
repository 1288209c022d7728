"""Advice rules: memory findings for ``zeroadvisor check`` (they need a model and a cluster).

Each works from ``ctx.advice`` (zeroadvisor.advisor.check.AdviceContext): the estimate of every
stage/offload option against the usable GPU memory (memory less the headroom), and the
searcher that tries changes cheapest first (zeroadvisor/advice.py). Numbers in messages
are decimal GB unless --unit GiB is given; the unit is always printed.
"""

from __future__ import annotations

from zeroadvisor.lint.findings import Severity
from zeroadvisor.lint.rule import Example, Hit, Rule

_MODEL_7B = {"hf_config": {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008,
                           "num_hidden_layers": 32, "num_attention_heads": 32, "vocab_size": 32000},
             "sequence_length": 4096, "activation_checkpointing": "full"}


def _anchor(ctx) -> str:
    for pointer in ("/zero_optimization/stage", "/zero_optimization"):
        if ctx.has(pointer):
            return pointer
    return ""


def _configured(ctx):
    return ctx.advice.estimate.configured


def _label(option) -> str:
    words = f"ZeRO-{option.stage}"
    if option.offload_optimizer != "none":
        words += f" with optimizer offload to {option.offload_optimizer.upper()}"
    if option.offload_param != "none":
        words += (" and" if option.offload_optimizer != "none" else " with") + \
            f" parameter offload to {option.offload_param.upper()}"
    return words


def _breakdown(ctx, stage) -> str:
    fmt = ctx.advice.fmt
    rows = [("model states", "model_states"), ("gathered parameters", "gathered_parameters"),
            ("buffers", "buffers"), ("activations", "activations"), ("overhead", "overhead")]
    parts = [f"{name} {fmt(stage.per_gpu[key])}" for name, key in rows if stage.per_gpu[key]]
    return ", ".join(parts)


def _budget(ctx) -> str:
    a = ctx.advice
    return f"{a.fmt(a.usable)} usable ({a.fmt(a.gpu_memory)} per GPU less {a.headroom:.0%} headroom)"


def _does_not_fit(ctx):
    current = _configured(ctx)
    if current is None or current.fits is not False:
        return
    a = ctx.advice
    need = current.per_gpu["total"]
    if need <= a.usable:
        return  # fits the GPU but not the host: host-memory-insufficient reports that
    what = (f"{_label(current.option)} (configured) needs {a.fmt(need)} per GPU ({_breakdown(ctx, current)}), "
            f"more than the {_budget(ctx)}")
    found = a.searcher.first_fit(a.searcher.changes_that_fit())
    if found is not None:
        change, stage = found.change, found.stage
        host = f", {a.fmt(stage.per_node_cpu)} host RAM per node" if stage.per_node_cpu else ""
        fix_note = "" if change.patch is not None else " (no config change: do it in the training script)"
        yield Hit(_anchor(ctx), f"{what}. Cheapest change that fits: {change.description}: "
                                f"{a.fmt(stage.per_gpu['total'])} per GPU{host}; cost: {change.cost}{fix_note}",
                  fix=change.patch)
        return
    closest = a.searcher.closest(a.searcher.changes_that_fit())
    missing = ""
    if closest is not None:
        best = closest.stage
        short = best.per_gpu["total"] - a.usable
        missing = (f"; even {closest.change.description} needs {a.fmt(best.per_gpu['total'])} per GPU, "
                   f"{a.fmt(max(short, 0))} more than usable")
        if a.cpu_memory is not None and best.per_node_cpu > a.cpu_memory:
            missing += f", and {a.fmt(best.per_node_cpu)} host RAM per node against {a.fmt(a.cpu_memory)} given"
    yield Hit(_anchor(ctx), f"{what}. Nothing fits: no stage, offload, checkpointing or micro batch change "
                            f"brings it under the budget{missing}. Add GPUs or use larger ones")


DOES_NOT_FIT = Rule(
    code="ZA801",
    name="does-not-fit",
    severity=Severity.ERROR,
    summary="The configured setup needs more GPU memory than given.",
    explanation=(
        "The estimate of the configured stage and offload (model states, gathered parameters, buffers, "
        "activations and overhead) exceeds the usable memory per GPU (memory less --headroom). The fix "
        "is the cheapest change that fits, searched in order of expected throughput cost: a lower "
        "stage, a higher stage, activation checkpointing, a smaller micro batch with more gradient "
        "accumulation, optimizer offload to the CPU, parameter offload to the CPU, NVMe. When nothing "
        "fits the message says what is missing and by how much."
    ),
    check=_does_not_fit,
    examples=(
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 2}}',
                fails=True, options={"model": {**_MODEL_7B}, "gpus": 8, "gpu": "A10G"}),
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 2}}',
                fails=False, options={"model": {**_MODEL_7B}, "gpus": 8, "gpu": "A100-80GB"}),
    ),
    needs_advice=True,
    source="ZeRO paper (arXiv:1910.02054) §5, §7; deepspeed/runtime/zero/",
)


def _lower_stage_fits(ctx):
    current = _configured(ctx)
    # Stages 0-2 move the same volume per step (ZeRO paper §7), so only leaving ZeRO-3 saves
    # communication; moving among 0-2 is not advice worth a review comment.
    if current is None or not current.fits or current.option.stage != 3 or _offloads(current.option):
        return  # with offload configured, offload-not-needed gives the one combined fix
    a = ctx.advice
    found = a.searcher.lowest_fitting_lower_stage()
    if found is None:
        return
    stage = found.stage
    yield Hit(_anchor(ctx),
              f"ZeRO-{stage.option.stage} fits ({a.fmt(stage.per_gpu['total'])} per GPU of {_budget(ctx)}) where the "
              f"configured {_label(current.option)} uses {a.fmt(current.per_gpu['total'])}: it moves 1x instead of "
              "1.5x the data-parallel volume per step (no parameter all-gathers in forward and backward)",
              fix=found.change.patch)


LOWER_STAGE_FITS = Rule(
    code="ZA802",
    name="lower-stage-fits",
    severity=Severity.WARNING,
    summary="ZeRO-3 is configured but a lower stage fits with the headroom.",
    explanation=(
        "ZeRO-3 shards parameters and gathers them again for every forward and backward pass, about "
        "1.5x the communication of data parallelism, ZeRO-1 or ZeRO-2 (ZeRO paper §7). It is also "
        "often larger than ZeRO-2 on small models because of its buffers (DS#3734, DS#4305). When a "
        "lower stage fits, use the lowest one that does."
    ),
    check=_lower_stage_fits,
    examples=(
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3}}',
                fails=True, options={"model": {**_MODEL_7B}, "gpus": 8, "gpu": "A100-80GB"}),
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 2}}',
                fails=False, options={"model": {**_MODEL_7B}, "gpus": 8, "gpu": "A100-80GB"}),
    ),
    needs_advice=True,
    source="ZeRO paper §7; DS#3734, DS#4305",
)


ACTIVATION_SHARE = 0.10


def _activations_dominate(ctx):
    current = _configured(ctx)
    if current is None:
        return
    a = ctx.advice
    acts, states = current.per_gpu["activations"], current.per_gpu["model_states"]
    # Below a tenth of the budget there is nothing to act on (with full offload model
    # states are ~0, so "activations exceed them" alone would always be true).
    if not acts or acts <= states or acts < ACTIVATION_SHARE * a.usable:
        return
    shape = a.estimate.shape
    largest = a.searcher.largest_fitting_micro_batch()
    micro = a.estimate.settings.micro_batch
    mb = (f"the largest micro batch that fits is {largest} (now {micro})" if largest is not None
          else f"even micro batch 1 does not fit (now {micro})")
    savings = []
    for change in a.searcher.checkpointing_changes(a.searcher.configured):
        result = a.searcher.evaluate(change)
        if result is not None:
            saved = acts - result.per_gpu["activations"]
            savings.append(f"{change.shape.activation_checkpointing} checkpointing saves {a.fmt(saved)}")
    if not shape.flash_attention:
        from dataclasses import replace

        from zeroadvisor.advisor.search import Change

        flash = Change("checkpointing", a.searcher.configured, replace(shape, flash_attention=True), None, None, "")
        result = a.searcher.evaluate(flash)
        if result is not None:
            savings.append(f"FlashAttention saves {a.fmt(acts - result.per_gpu['activations'])}")
    fix = None
    if largest is not None and largest < micro:
        fix = a.searcher.micro_batch_patch(largest)
    yield Hit(_anchor(ctx),
              f"activations ({a.fmt(acts)} per GPU) exceed model states ({a.fmt(states)}): no ZeRO stage shrinks "
              f"activations, so a higher stage will not help; {mb}" + ("; " + ", ".join(savings) if savings else ""),
              fix=fix)


ACTIVATIONS_DOMINATE = Rule(
    code="ZA803",
    name="activations-dominate",
    severity=Severity.WARNING,
    summary="Activations take more memory than model states: raising the stage will not help.",
    explanation=(
        "ZeRO partitions model states (parameters, gradients, optimizer states), not activations "
        "(DS#2302: 'ZeRO is designed to solve model states, not activations'). Long sequences without "
        "checkpointing are dominated by activations (Korthikanti et al. 2022). The message names the "
        "largest micro batch that fits and what checkpointing or FlashAttention would save."
    ),
    check=_activations_dominate,
    examples=(
        Example('{"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3}}',
                fails=True, options={"model": {**_MODEL_7B, "activation_checkpointing": "none"}, "gpus": 8,
                                     "gpu": "A100-80GB"}),
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 2}}',
                fails=False, options={"model": {**_MODEL_7B}, "gpus": 8, "gpu": "A100-80GB"}),
    ),
    needs_advice=True,
    source="Korthikanti et al. 2022 (arXiv:2205.05198); DS#2302, DS#2797",
)


def _offloads(option) -> bool:
    return option.offload_optimizer != "none" or option.offload_param != "none"


def _offload_not_needed(ctx):
    current = _configured(ctx)
    if current is None or not _offloads(current.option):
        return
    a = ctx.advice
    try:
        plain = a.estimate.stage(current.option.stage)
    except KeyError:
        return
    if not plain.fits:
        return
    target, also = plain, ""
    if plain.option.stage == 3:  # leaving ZeRO-3 too saves its extra parameter all-gathers
        lower = a.searcher.lowest_fitting_lower_stage()
        if lower is not None:
            target = lower.stage
            also = (f"; ZeRO-{target.option.stage} fits as well ({a.fmt(target.per_gpu['total'])}) and moves 1x "
                    "instead of 1.5x the data-parallel volume, so the fix uses it")
    yield Hit(_anchor(ctx),
              f"offload is configured but ZeRO-{plain.option.stage} without it fits ({a.fmt(plain.per_gpu['total'])} "
              f"per GPU of {_budget(ctx)}): offloading moves the optimizer step to the CPU and tensors over PCIe "
              f"every step (users report steps 10x-50x slower, DS#6834, DS#1635){also}",
              fix=a.searcher.option_patch(target.option))


OFFLOAD_NOT_NEEDED = Rule(
    code="ZA804",
    name="offload-not-needed",
    severity=Severity.WARNING,
    summary="Offload is configured but the same stage fits without it.",
    explanation=(
        "CPU and NVMe offload trade speed for capacity. When the same stage fits in GPU memory without "
        "offload, the trade buys nothing: drop the offload blocks."
    ),
    check=_offload_not_needed,
    examples=(
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 2, '
                '"offload_optimizer": {"device": "cpu"}}}',
                fails=True, options={"model": {"parameters": "1.3B", "sequence_length": 2048}, "gpus": 8,
                                     "gpu": "A100-80GB"}),
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 2}}',
                fails=False, options={"model": {"parameters": "1.3B", "sequence_length": 2048}, "gpus": 8,
                                      "gpu": "A100-80GB"}),
    ),
    needs_advice=True,
    source="DS#1635, DS#6834, DS#3717",
)


def _host_insufficient(ctx):
    current = _configured(ctx)
    a = ctx.advice
    if current is None:
        return
    if a.cpu_memory is not None and current.per_node_cpu > a.cpu_memory:
        yield Hit(_anchor(ctx), f"{_label(current.option)} needs {a.fmt(current.per_node_cpu)} of host RAM per node "
                                f"({a.estimate.cluster.gpus_on_a_node} GPUs' offloaded state and pinned buffers), "
                                f"more than the {a.fmt(a.cpu_memory)} given: the job is killed by the OOM killer or "
                                "fails to pin memory; offload less, use NVMe, or add nodes")
    if a.nvme is not None and current.per_node_nvme > a.nvme:
        yield Hit(_anchor(ctx), f"{_label(current.option)} needs {a.fmt(current.per_node_nvme)} of NVMe per node, "
                                f"more than the {a.fmt(a.nvme)} given")


HOST_MEMORY_INSUFFICIENT = Rule(
    code="ZA805",
    name="host-memory-insufficient",
    severity=Severity.ERROR,
    summary="The offload needs more host RAM (or NVMe) per node than given.",
    explanation=(
        "With offload_optimizer/offload_param on the CPU, every GPU's process keeps its partition of "
        "the fp32 master weights, optimizer states (and parameters) in host RAM, pinned by default; "
        "all GPUs of a node share that RAM. Give --cpu-memory (and --nvme) to check it."
    ),
    check=_host_insufficient,
    examples=(
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3, '
                '"offload_optimizer": {"device": "cpu"}}}',
                fails=True, options={"model": {"parameters": "70B"}, "gpus": 8, "gpu": "A100-80GB",
                                     "cpu_memory": "256GB"}),
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3, '
                '"offload_optimizer": {"device": "cpu"}}}',
                fails=False, options={"model": {"parameters": "70B"}, "gpus": 8, "gpu": "A100-80GB",
                                      "cpu_memory": "2TB"}),
    ),
    needs_advice=True,
    source="deepspeed/runtime/zero/stage3.py, stage_1_and_2.py (CPU offload); DS#3000",
)

# Buffers above this share of the usable memory are worth a review comment (DS#1302: 5e8
# buckets made ZeRO-2 larger than ZeRO-1 on BERT-large; DS#3338: smaller buckets, larger batch).
BUCKET_SHARE = 0.05


def _large_buckets(ctx):
    current = _configured(ctx)
    a = ctx.advice
    if current is None or current.option.stage == 0:
        return
    buffers = current.per_gpu["buffers"]
    if buffers < BUCKET_SHARE * a.usable:
        return
    h = a.estimate.model.hidden_size
    target = h * h if h else 200_000_000
    zero = ctx.get("/zero_optimization")
    zero = zero if isinstance(zero, dict) else {}
    patch = {}
    for key in ("reduce_bucket_size", "allgather_bucket_size"):
        value = zero.get(key)
        if value == "auto":
            continue
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value > target:
            patch[key] = target
    if not patch:
        return
    yield Hit(_anchor(ctx),
              f"communication buffers take {a.fmt(buffers)} per GPU ({buffers / a.usable:.0%} of usable memory): "
              f"reduce/allgather buckets of up to 5e8 elements are GBs by default; {target:,} elements "
              "(hidden_size², what the Hugging Face integration uses for \"auto\") cost far less with little "
              "speed loss", fix={"zero_optimization": patch})


LARGE_BUCKETS = Rule(
    code="ZA806",
    name="large-buckets",
    severity=Severity.WARNING,
    summary="Reduce/allgather buckets cost a large share of GPU memory.",
    explanation=(
        "reduce_bucket_size and allgather_bucket_size default to 5e8 elements, doubled with "
        "overlap_comm (on by default at ZeRO-3), which is several GB per GPU in fp32. Users see ZeRO-2 "
        "or ZeRO-3 use more memory than a lower stage because of it (DS#1302, DS#3338, DS#3734)."
    ),
    check=_large_buckets,
    examples=(
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3}}',
                fails=True, options={"model": {"parameters": "1.3B", "num_layers": 24, "hidden_size": 2048,
                                               "sequence_length": 2048}, "gpus": 8, "gpu": "A10G"}),
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3, '
                '"reduce_bucket_size": 4194304, "allgather_bucket_size": 4194304, '
                '"stage3_prefetch_bucket_size": 3774873}}',
                fails=False, options={"model": {"parameters": "1.3B", "num_layers": 24, "hidden_size": 2048,
                                                "sequence_length": 2048}, "gpus": 8, "gpu": "A10G"}),
    ),
    needs_advice=True,
    source="deepspeed/runtime/zero/config.py defaults; stage_1_and_2.py, stage3.py buffers; DS#1302, DS#3338",
)


def _pinned(ctx):
    current = _configured(ctx)
    a = ctx.advice
    if current is None or not current.per_node_cpu:
        return
    share = f" ({current.per_node_cpu / a.cpu_memory:.0%} of the {a.fmt(a.cpu_memory)} given)" if a.cpu_memory else ""
    yield Hit(_anchor(ctx),
              f"offload keeps {a.fmt(current.per_node_cpu)} per node in host RAM{share}, pinned (page-locked) while "
              "pin_memory is true: the OS cannot swap it and containers need a large enough locked-memory limit "
              "(ulimit -l); set pin_memory: false to trade speed for flexibility")


PINNED_MEMORY = Rule(
    code="ZA807",
    name="pinned-memory",
    severity=Severity.INFO,
    summary="How much host RAM the offload pins per node.",
    explanation=(
        "DeepSpeed allocates offloaded optimizer state and parameter buffers in page-locked memory when "
        "pin_memory is true (the default), for fast copies. Pinned memory cannot be swapped, counts "
        "against the locked-memory limit, and NVMe offload needs pinned swap buffers too (DS#3000)."
    ),
    check=_pinned,
    examples=(
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3, '
                '"offload_optimizer": {"device": "cpu"}}}',
                fails=True, options={"model": {"parameters": "13B"}, "gpus": 8, "gpu": "A100-80GB"}),
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3}}',
                fails=False, options={"model": {"parameters": "13B"}, "gpus": 8, "gpu": "A100-80GB"}),
    ),
    needs_advice=True,
    source="deepspeed/runtime/zero/offload_config.py pin_memory; runtime/swap_tensor/",
)

RULES = (DOES_NOT_FIT, LOWER_STAGE_FITS, ACTIVATIONS_DOMINATE, OFFLOAD_NOT_NEEDED, HOST_MEMORY_INSUFFICIENT,
         LARGE_BUCKETS, PINNED_MEMORY)
