"""When nothing fits on the hardware given (advisor/nofit.py): the ways out in proportion, cheapest first, each
priced with the same estimate, and each one that is a run of its own checked again as that run.

Real estimates throughout (the shipped catalog's config.json files); nothing is mocked.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from zeroadvisor.advisor.check import CheckOptions, CheckResult, check_document, combined_patch
from zeroadvisor.advisor.nofit import CHEAPEST_FIRST, LORA_RANK, NothingFits, WayOut, maker
from zeroadvisor.config import merge_patch as mp
from zeroadvisor.config.source import parse
from zeroadvisor.hardware.gpus import resolve_gpu
from zeroadvisor.memory.cluster import Cluster
from zeroadvisor.model.description import load_model, spec_from_params
from zeroadvisor.model.spec import Checkpointing, TrainingShape
from zeroadvisor.report import Report, render
from zeroadvisor.units import format_bytes

GB = 10**9
FAILING = {"ZA801", "ZA805"}
ZERO2 = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 8, "bf16": {"enabled": True},
         "zero_optimization": {"stage": 2}}
ZERO3 = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 4, "bf16": {"enabled": True},
         "zero_optimization": {"stage": 3}}
SHAPE_7B = TrainingShape(2048, Checkpointing.FULL)


def _check(config: dict, options: CheckOptions) -> CheckResult:
    return check_document(parse(json.dumps(config, indent=2), "ds.json"), options)


def _peft(model: str, method: str):
    return load_model(model, {"method": method, "r": LORA_RANK, "target_modules": None, "quantization": None})[0]


@pytest.fixture(scope="module")
def desktop() -> tuple[CheckOptions, CheckResult]:
    """A full fine-tune of a 7B model on one 24 GB consumer card with a desktop's 32 GB of host RAM."""
    spec, _ = load_model("meta-llama/Llama-2-7b-hf")
    options = CheckOptions(spec, SHAPE_7B, Cluster(gpus=1, gpu=resolve_gpu("RTX-4090"), cpu_memory=32 * GB))
    return options, _check(ZERO2, options)


def _kinds(answer: NothingFits | None) -> list[WayOut]:
    assert answer is not None
    return [way.kind for way in answer.ways]


def test_one_consumer_card_gets_lora_qlora_and_host_ram_first_not_a_cluster(desktop):
    options, result = desktop
    assert {f.code for f in result.findings} & FAILING
    kinds = _kinds(result.nothing_fits)
    assert kinds[:3] == [WayOut.LORA, WayOut.QLORA, WayOut.HOST_RAM], kinds
    assert kinds == sorted(kinds, key=CHEAPEST_FIRST.index)
    assert WayOut.MORE_GPUS not in kinds[:3]
    # the config fix is the cheapest hardware way the config can be written for: host RAM on the same card
    answer = result.nothing_fits
    assert answer is not None and answer.fix is not None and answer.fix.kind == WayOut.HOST_RAM
    assert answer.fix.change.cluster is not None and answer.fix.change.cluster.gpus is None
    grown = answer.fix.change.cluster.cpu_memory
    assert grown is not None and grown > options.cluster.cpu_memory and grown % GB == 0
    assert answer.fix.what.endswith(f"({format_bytes(grown - 32 * GB)} more than the {format_bytes(32 * GB)} given)")
    lead = result.recommendation
    assert lead is not None and lead.advice.outcome is answer.fix.outcome  # type: ignore[union-attr]


@pytest.mark.parametrize("method", [WayOut.LORA, WayOut.QLORA])
def test_the_adapter_run_is_priced_as_its_own_check_prices_it(desktop, method):
    """``--peft lora --lora-r 16`` (the flags the way names), checked again with the way's run written: it fits,
    at the peak the way promised."""
    options, result = desktop
    assert result.nothing_fits is not None
    way = next(w for w in result.nothing_fits.ways if w.kind == method)
    assert f"--peft {method.value} --lora-r {LORA_RANK}" in " ".join(way.settings)
    assert any(s.startswith("LLaMA-Factory: finetuning_type: lora") for s in way.settings)
    assert any(s.startswith("TRL: --use_peft") for s in way.settings)
    assert "quality" in way.trade_off
    assert "not of the ds_config" in (way.trade_off if method == WayOut.LORA else result.nothing_fits.ways[0].trade_off)
    adapted = _peft("meta-llama/Llama-2-7b-hf", method.value)
    base = mp.apply(ZERO2, combined_patch([f for f in result.findings if f.code not in FAILING]))
    written = mp.apply(base, way.outcome.patch) if way.outcome.patch else base
    shape = replace(options.shape, activation_checkpointing=way.change.shape.activation_checkpointing)
    again = _check(written, replace(options, model=adapted, shape=shape))
    assert not {f.code for f in again.findings} & FAILING, [f.message for f in again.findings]
    assert again.estimate is not None and again.estimate.configured is not None
    assert again.estimate.configured.comfortable
    assert again.estimate.configured.peak_gpu == pytest.approx(way.peak_gpu, rel=0.01)
    # the configured rung with the adapters is priced too (fitting or not)
    assert way.configured is not None and way.configured.option.stage == 2


def test_the_host_ram_way_written_and_provisioned_fits(desktop):
    options, result = desktop
    assert result.nothing_fits is not None and result.nothing_fits.fix is not None
    fix = result.nothing_fits.fix
    written = mp.apply(ZERO2, combined_patch(result.findings))
    cluster = replace(options.cluster, cpu_memory=fix.change.cluster.cpu_memory)
    again = _check(written, replace(options, cluster=cluster))
    assert not {f.code for f in again.findings} & FAILING, [f.message for f in again.findings]
    assert again.nothing_fits is None
    assert again.estimate is not None and again.estimate.configured is not None
    assert again.estimate.configured.option == fix.outcome.stage.option


def test_json_and_text_show_the_list(desktop):
    _, result = desktop
    data = json.loads(render("json", Report(result.findings, check=result, path="ds.json")))
    ways = data["nothing_fits"]["ways"]
    assert [w["way"] for w in ways][:3] == ["lora", "qlora", "host-ram"]
    assert data["nothing_fits"]["order"] == [w.value for w in CHEAPEST_FIRST]
    assert [w["config_fix"] for w in ways].count(True) == 1
    assert ways[0]["peak_gpu"] == result.nothing_fits.ways[0].peak_gpu  # type: ignore[union-attr]
    assert "--peft lora --lora-r 16" in " ".join(ways[0]["settings"])
    text = render("text", Report(result.findings, check=result, path="ds.json", width=200))
    head = text.split("\n\n")[0]
    assert "Nothing fits on the hardware given; the ways out, cheapest first: (1) LoRA r=16 (--peft lora)" in head
    assert "(3) give" in head and "of host RAM per node" in head and "(the config fix)" in head
    message = next(f.message for f in result.findings if f.code == "ZA801")
    assert "The ways out, cheapest first: (1) LoRA r=16 on all-linear" in message
    third = message[message.index("(3) "):message.index("(4) ")]
    assert message.index("(2) QLoRA") < message.index("(3) ") and "of host RAM per node" in third
    markdown = render("markdown", Report(result.findings, check=result, path="ds.json"))
    assert r"the ways out, cheapest first: \(1\) LoRA r=16" in markdown  # escaped as Markdown
    html = render("html", Report(result.findings, check=result, path="ds.json"))
    assert '<p id="ways-out">Nothing fits on the hardware given; the ways out, cheapest first: (1) LoRA' in html


def test_70b_on_eight_80gb_cards_gets_its_proportionate_list():
    spec, _ = load_model("meta-llama/Llama-2-70b-hf")
    card = resolve_gpu("A100-SXM4-80GB")
    options = CheckOptions(spec, TrainingShape(4096), Cluster(gpus=8, gpu=card, cpu_memory=256 * GB))
    result = _check(ZERO3, options)
    assert result.advice is not None and result.advice.best is None
    kinds = _kinds(result.nothing_fits)
    assert kinds == sorted(kinds, key=CHEAPEST_FIRST.index)
    assert kinds[:2] == [WayOut.LORA, WayOut.QLORA]
    assert {WayOut.BIGGER_GPU, WayOut.MORE_GPUS} <= set(kinds)
    assert result.nothing_fits is not None
    ways = {way.kind: way for way in result.nothing_fits.ways}
    bigger = ways[WayOut.BIGGER_GPU]
    assert bigger.gpu is not None and maker(bigger.gpu) == "nvidia"
    assert resolve_gpu(bigger.gpu).memory_bytes > card.memory_bytes
    # the smallest such card: no card of the same maker between the two holds the run's least GPU memory
    assert bigger.outcome.stage.comfortable
    more = ways[WayOut.MORE_GPUS]
    assert more.change.cluster is not None and (more.change.cluster.gpus or 0) > 8
    for way in result.nothing_fits.ways:
        assert way.outcome.stage.comfortable, way.kind


def test_a_parameter_count_lists_no_training_method_and_says_why():
    options = CheckOptions(spec_from_params("70B"), TrainingShape(),
                           Cluster(gpus=8, gpu=resolve_gpu("A10G"), cpu_memory=256 * GB))
    result = _check({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
                     "zero_optimization": {"stage": 3}}, options)
    answer = result.nothing_fits
    assert answer is not None and answer.ways
    assert not {WayOut.LORA, WayOut.QLORA} & set(_kinds(answer))
    assert "config.json" in answer.no_method
    assert "LoRA/QLoRA are not priced" in next(f.message for f in result.findings if f.code == "ZA801")


def test_a_qlora_run_is_offered_no_training_method_and_a_lora_run_qlora_only():
    card = resolve_gpu("T4")
    options = CheckOptions(_peft("meta-llama/Llama-2-70b-hf", "qlora"), TrainingShape(4096),
                           Cluster(gpus=1, gpu=card, cpu_memory=64 * GB))
    result = _check(ZERO3, options)
    assert result.nothing_fits is not None
    assert not {WayOut.LORA, WayOut.QLORA} & set(_kinds(result.nothing_fits))
    lora = replace(options, model=_peft("meta-llama/Llama-2-13b-hf", "lora"),
                   cluster=Cluster(gpus=1, gpu=resolve_gpu("RTX-3080-10GB"), cpu_memory=16 * GB))
    result = _check(ZERO3, lora)
    assert result.nothing_fits is not None
    assert WayOut.LORA not in _kinds(result.nothing_fits)


def test_a_run_that_fits_has_no_ways_out():
    spec, _ = load_model("meta-llama/Llama-2-7b-hf")
    options = CheckOptions(spec, SHAPE_7B, Cluster(gpus=8, gpu=resolve_gpu("A100-SXM4-80GB")))
    result = _check(ZERO2, options)
    assert result.nothing_fits is None
    assert "nothing_fits" not in json.loads(render("json", Report(result.findings, check=result, path="ds.json")))


def test_maker_keeps_the_software_stack():
    assert maker("MI300X") == "amd" and maker("GAUDI3-128GB") == "intel"
    assert maker("H100-SXM5-80GB") == maker("RTX-4090") == "nvidia"


# -- the preference/RL trainer's own switches (issue 35 item 3) ---------------------------------------------------
def _method_check(setup, gpu: str = "L40S", config: dict | None = None, liger: bool = False) -> CheckResult:
    """Qwen2.5-1.5B trained in full on one card with 16 GB of host RAM (no room for offload): the SFT twin fits."""
    spec, _ = load_model("Qwen/Qwen2.5-1.5B")
    shape = TrainingShape(2048, Checkpointing.FULL, method=setup, liger_kernel=liger)
    options = CheckOptions(spec, shape, Cluster(gpus=1, gpu=resolve_gpu(gpu), cpu_memory=16 * GB))
    return _check(config or {**ZERO2, "optimizer": {"type": "AdamW"}}, options)


def test_dpo_whose_reference_copy_binds_is_told_precompute_ref_log_probs_first():
    from zeroadvisor.config.method import MethodSetup
    from zeroadvisor.vocab import Method, TrainerFamily

    assert _method_check(MethodSetup()).nothing_fits is None  # the SFT twin fits
    # TRL 1.9.0 copies the optimizer block into the reference engine's config: a 14 B/param copy at stage 0
    dpo = MethodSetup(method=Method.DPO, trainer=TrainerFamily.TRL, trainer_version="1.9.0")
    result = _method_check(dpo)
    kinds = _kinds(result.nothing_fits)
    assert kinds[0] == WayOut.PRECOMPUTE_REF and kinds.index(WayOut.PRECOMPUTE_REF) < kinds.index(WayOut.LORA)
    way = result.nothing_fits.ways[0]
    assert "precompute_ref_log_probs: true" in " ".join(way.settings)
    # priced as its own check prices it: the same run with the switch fits, with no reference row, at the peak
    again = _method_check(replace(dpo, precompute_ref_log_probs=True),
                          config=mp.apply({**ZERO2, "optimizer": {"type": "AdamW"}}, way.outcome.patch or {}))
    assert again.nothing_fits is None and not [f for f in again.findings if f.code in FAILING]
    configured = again.estimate.configured
    assert not configured.per_gpu.get("reference_model")
    assert abs(configured.peak_gpu - way.peak_gpu) <= 0.01 * way.peak_gpu
    # already precomputing, or a method without a reference model: not offered
    for setup in (replace(dpo, precompute_ref_log_probs=True), MethodSetup(method=Method.ORPO)):
        answer = _method_check(setup).nothing_fits
        assert answer is None or WayOut.PRECOMPUTE_REF not in _kinds(answer)


def test_precompute_ref_log_probs_is_not_offered_beside_trl_s_liger_loss_that_refuses_it():
    """TRL 0.29 to 1.13 raise "Liger DPO loss does not support precomputing reference log probabilities." where
    use_liger_kernel runs its Liger loss: the switch is never the way out there, and the assumed input says so."""
    from zeroadvisor.config.method import MethodSetup
    from zeroadvisor.vocab import Method, TrainerFamily

    dpo = MethodSetup(method=Method.DPO, trainer=TrainerFamily.TRL, trainer_version="1.9.0")
    result = _method_check(dpo, liger=True)
    answer = result.nothing_fits
    assert answer is not None and WayOut.PRECOMPUTE_REF not in _kinds(answer)
    assumed = [f.message for f in result.findings if f.code == "ZA808" and "precomputed" in f.message]
    assert assumed and "refused by TRL 1.9.0 beside its Liger loss" in assumed[0]
    # TRL 1.14 precomputes with its chunked log-probs: not refused there
    later = _method_check(replace(dpo, trainer_version="1.14.0"), liger=True)
    assert not [f for f in later.findings if "refused by TRL" in f.message]


def test_grpo_with_colocated_vllm_is_told_server_mode_before_lora():
    from zeroadvisor.config.method import Generation, MethodSetup
    from zeroadvisor.vocab import Method, TrainerFamily, VllmMode

    gen = Generation(use_vllm=True, vllm_mode=VllmMode.COLOCATE, vllm_gpu_memory_utilization=0.3,
                     max_prompt_length=512, max_completion_length=1024, num_generations=8)
    grpo = MethodSetup(method=Method.GRPO, trainer=TrainerFamily.TRL, beta=0.04, generation=gen)
    kinds = _kinds(_method_check(grpo, config=ZERO2).nothing_fits)
    assert WayOut.VLLM_SERVER in kinds and kinds.index(WayOut.VLLM_SERVER) < kinds.index(WayOut.LORA)
    server = replace(grpo, generation=replace(gen, vllm_mode=VllmMode.SERVER))
    answer = _method_check(server, config=ZERO2).nothing_fits
    assert answer is None or WayOut.VLLM_SERVER not in _kinds(answer)


def _grpo(share: float, trainer=None):
    from zeroadvisor.config.method import Generation, MethodSetup
    from zeroadvisor.vocab import Method, TrainerFamily, VllmMode

    gen = Generation(use_vllm=True, vllm_mode=VllmMode.COLOCATE, vllm_gpu_memory_utilization=share,
                     max_prompt_length=512, max_completion_length=1024, num_generations=8)
    return MethodSetup(method=Method.GRPO, trainer=trainer or TrainerFamily.TRL, generation=gen)


def test_grpo_with_vllm_colocated_is_told_the_largest_lower_utilization_that_fits():
    """Qwen2.5-1.5B, GRPO with vLLM colocated at 0.9 of an A100-80GB (axolotl's and ms-swift's default): the run
    fits in training but not beside 0.9 of the card. vLLM's floor there is 0.04 (bf16 weights 3.09 GB and one
    1536-token request's KV cache, 2 x 28 layers x 2 heads x 128 x 2 B x 1536 = 44 MB, over 85.9 GB)."""
    from zeroadvisor.vocab import TrainerFamily

    config = ZERO2
    result = _method_check(_grpo(0.9), gpu="A100-SXM4-80GB", config=config)
    kinds = _kinds(result.nothing_fits)
    assert WayOut.VLLM_UTILIZATION in kinds and kinds == sorted(kinds, key=CHEAPEST_FIRST.index)
    assert kinds.index(WayOut.VLLM_UTILIZATION) < kinds.index(WayOut.VLLM_SERVER)
    way = next(w for w in result.nothing_fits.ways if w.kind == WayOut.VLLM_UTILIZATION)
    share = float(way.what.split()[1])
    assert 0.04 <= share < 0.9 and way.settings == (f"TRL: vllm_gpu_memory_utilization: {share:g} (GRPOConfig)",)
    assert "slower" in way.what and "throughput" in way.trade_off
    assert way.short().startswith(f"vllm_gpu_memory_utilization {share:g} instead of 0.9: ")
    # exactly the run priced: the config with the way's patch at that share fits, at the way's peak
    patched = mp.apply(config, way.outcome.patch or {})
    again = _method_check(_grpo(share), gpu="A100-SXM4-80GB", config=patched)
    assert again.nothing_fits is None and not [f for f in again.findings if f.code in FAILING]
    assert abs(again.estimate.configured.peak_gpu - way.peak_gpu) <= 0.01 * way.peak_gpu
    # and the largest such share: the configured rung fits at it and not a hundredth above
    assert way.configured is not None and way.configured.comfortable
    above = _method_check(_grpo(round(share + 0.01, 2)), gpu="A100-SXM4-80GB", config=config)
    assert not above.estimate.configured.comfortable
    # the trainer's own file says it: ms-swift's flag
    swift = _method_check(_grpo(0.9, TrainerFamily.MS_SWIFT), gpu="A100-SXM4-80GB", config=config).nothing_fits
    assert any(s.startswith("ms-swift: --vllm_gpu_memory_utilization ")
               for w in swift.ways if w.kind == WayOut.VLLM_UTILIZATION for s in w.settings)


def test_no_lower_utilization_where_the_run_misses_even_at_vllms_floor():
    """On an L40S (48 GB) the same run needs 37.8 GiB (bound) without vLLM: with vLLM's floor of 0.07 of the card it
    still misses, so only server mode (and the rest) is offered; nor where the floor is above the share set."""
    kinds = _kinds(_method_check(_grpo(0.3), config=ZERO2).nothing_fits)
    assert WayOut.VLLM_SERVER in kinds and WayOut.VLLM_UTILIZATION not in kinds
    answer = _method_check(_grpo(0.05), config=ZERO2).nothing_fits  # 0.05 < the floor 0.07
    assert answer is None or WayOut.VLLM_UTILIZATION not in _kinds(answer)


def _swift_lora_grpo_72b(version: str | None = None, batches: int | None = None, options: bool = False):
    """ms-swift GRPO, LoRA on Qwen2.5-72B at ZeRO-3 over 8 x A100-80GB, vLLM in server mode, 200 GB of host RAM:
    the weight sync gathers the whole 145 GB model on every GPU (memory/generation.py vllm_sync_moment)."""
    from zeroadvisor.config.method import Generation, MethodSetup
    from zeroadvisor.vocab import Method, TrainerFamily, VllmMode

    spec = _peft("Qwen/Qwen2.5-72B", "lora")
    gen = Generation(use_vllm=True, vllm_mode=VllmMode.SERVER, max_prompt_length=1024, max_completion_length=1024,
                     num_generations=8, move_model_batches=batches)
    setup = MethodSetup(method=Method.GRPO, trainer=TrainerFamily.MS_SWIFT, trainer_version=version, beta=0.0,
                        generation=gen)
    given = CheckOptions(spec, TrainingShape(2048, Checkpointing.FULL, method=setup),
                         Cluster(gpus=8, gpu=resolve_gpu("A100-SXM4-80GB"), cpu_memory=200 * GB))
    return given if options else _check(ZERO3, given)


def test_a_weight_sync_that_binds_is_told_move_model_batches_first():
    """ms-swift's own answer to the sync's gather (its GRPO docs: "Gather model weights in batches", PR #3692): the
    fewest groups at which the run fits, first of the ways out, priced as its own check prices it; not in 3.12.1 to
    3.12.5, which gather the whole model whatever the groups (ms-swift#7986)."""
    result = _swift_lora_grpo_72b()
    kinds = _kinds(result.nothing_fits)
    assert kinds[0] == WayOut.MOVE_MODEL_BATCHES and kinds == sorted(kinds, key=CHEAPEST_FIRST.index)
    way = result.nothing_fits.ways[0]
    (setting,) = way.settings
    groups = int(setting.rsplit(" ", 1)[1])
    assert setting == f"ms-swift: --move_model_batches {groups}" and "slower weight sync" in way.trade_off
    # exactly the run priced: with that many groups and the way's patch the run fits, at the way's peak
    again = _check(mp.apply(ZERO3, way.outcome.patch or {}), _swift_lora_grpo_72b(batches=groups, options=True))
    assert again.nothing_fits is None and not [f for f in again.findings if f.code in FAILING]
    assert abs(again.estimate.configured.peak_gpu - way.peak_gpu) <= 0.01 * way.peak_gpu
    if groups > 2:  # the fewest: half as many groups do not fit
        assert _swift_lora_grpo_72b(batches=groups // 2).nothing_fits is not None
    assert WayOut.MOVE_MODEL_BATCHES not in _kinds(_swift_lora_grpo_72b(version="3.12.3").nothing_fits)


def test_precompute_ref_log_probs_is_never_priced_at_zero_3_where_trl_refuses_it(monkeypatch):
    """Qwen2.5-7B DPO on 8 x 32 GiB at ZeRO-3 with an optimizer block: the reference engine TRL builds from it binds,
    and precompute_ref_log_probs at ZeRO-3 would fit. TRL 1.9.0 runs that, so it is the first way out; TRL 0.21's
    DPOTrainer refuses it under ZeRO-3 and no lower stage fits, so it is not offered (it would be without the
    refusal)."""
    from zeroadvisor.config.method import MethodSetup
    from zeroadvisor.memory import method as method_memory
    from zeroadvisor.vocab import Method, TrainerFamily

    spec, _ = load_model("Qwen/Qwen2.5-7B")

    def ways(release: str) -> list[tuple[WayOut, int]]:
        dpo = MethodSetup(method=Method.DPO, trainer=TrainerFamily.TRL, trainer_version=release)
        options = CheckOptions(spec, TrainingShape(1024, Checkpointing.FULL, method=dpo),
                               Cluster(gpus=8, gpu_memory=32 * 2**30, cpu_memory=64 * GB))
        answer = _check({**ZERO3, "optimizer": {"type": "AdamW"}}, options).nothing_fits
        assert answer is not None
        return [(way.kind, way.outcome.change.option.stage) for way in answer.ways]

    assert ways("1.9.0")[0] == (WayOut.PRECOMPUTE_REF, 3)
    assert all(kind != WayOut.PRECOMPUTE_REF or stage < 3 for kind, stage in ways("0.21.0"))
    assert WayOut.PRECOMPUTE_REF not in [kind for kind, _ in ways("0.21.0")]
    monkeypatch.setattr(method_memory, "TRL_PRECOMPUTE_ZERO3", {})
    assert ways("0.21.0")[0] == (WayOut.PRECOMPUTE_REF, 3)


def test_a_long_context_run_is_told_activation_offloading_before_hardware():
    """Qwen2.5-1.5B at 524,288 tokens on one H100 (Liger: no logits): the layer inputs full recomputation keeps
    bind and no stage or offload of the states fits; moving them to pinned host memory (transformers' offload,
    torch's save_on_cpu) does, at the cost of host RAM and slower steps: offered first, priced as its own check
    prices it. Not offered where the run already offloads them or does not checkpoint every layer."""
    spec, _ = load_model("Qwen/Qwen2.5-1.5B")

    def check(**shape_kw) -> CheckResult:
        shape = TrainingShape(524288, Checkpointing.FULL, flash_attention=True, liger_kernel=True, **shape_kw)
        return _check({**ZERO2, "optimizer": {"type": "AdamW"}},
                      CheckOptions(spec, shape, Cluster(gpus=1, gpu=resolve_gpu("H100-SXM5-80GB"),
                                                        cpu_memory=1024 * GB)))

    answer = check().nothing_fits
    kinds = _kinds(answer)
    assert kinds[0] == WayOut.ACTIVATION_OFFLOAD and kinds.index(WayOut.ACTIVATION_OFFLOAD) < \
        kinds.index(WayOut.BIGGER_GPU)
    way = answer.ways[0]
    assert "gradient_checkpointing_kwargs: {offload: true}" in " ".join(way.settings)
    assert way.outcome.stage.per_node_cpu and "host" in way.trade_off
    from zeroadvisor.vocab import ActivationOffload

    again = check(activation_offload=ActivationOffload.SAVE_ON_CPU)
    assert again.estimate.configured.per_gpu["activations"] < check().estimate.configured.per_gpu["activations"]
    offered = again.nothing_fits
    assert offered is None or WayOut.ACTIVATION_OFFLOAD not in _kinds(offered)
