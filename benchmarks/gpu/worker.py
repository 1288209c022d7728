"""One calibration row in this process: load, train steps and save of real DeepSpeed, each phase measured.

    python benchmarks/gpu/worker.py CASES_JSON OUT_JSON     (started by run.py: on the GPU one process per row)
    python benchmarks/gpu/worker.py --allocator              (prints what torch's allocator was started with)

World size 1 (RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT/LOCAL_RANK set by run.py). On CUDA every phase starts
with ``torch.cuda.reset_peak_memory_stats`` and ends with ``max_memory_allocated`` / ``max_memory_reserved``;
without CUDA (the dry run, DS_ACCELERATOR=cpu) those readings are null with the reason, and everything else
is measured the same way: the rows of live tensors (rows.py) at the moments of the last step, the bytes
autograd saves for backward, the host's peak RSS per phase, the step times (after a warm-up step, each
between synchronizations) and the checkpoint's size.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import matrix  # noqa: E402
import rows  # noqa: E402

NO_CUDA = "no CUDA device (dry run: DeepSpeed's CPU accelerator)"


class Meter:
    """Per-phase peaks: the CUDA caching allocator's (or null and why) and the host's (VmHWM, reset per phase)."""

    def __init__(self, torch: Any, cuda: bool):
        self.torch, self.cuda = torch, cuda
        self.host_reset = _reset_hwm()

    def start(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()
            self.torch.cuda.reset_peak_memory_stats()
        self.host_reset = _reset_hwm()
        self.t0 = time.perf_counter()
        self.start_allocated = self.torch.cuda.memory_allocated() if self.cuda else None

    def end(self) -> dict[str, Any]:
        out: dict[str, Any] = {"seconds": None}
        if self.cuda:
            self.torch.cuda.synchronize()
            cuda = self.torch.cuda
            out.update(max_memory_allocated=cuda.max_memory_allocated(), max_memory_reserved=cuda.max_memory_reserved(),
                       allocated_at_start=self.start_allocated, allocated_at_end=cuda.memory_allocated(),
                       reserved_at_end=cuda.memory_reserved(), gpu_reason=None)
        else:
            out.update(max_memory_allocated=None, max_memory_reserved=None, allocated_at_start=None,
                       allocated_at_end=None, reserved_at_end=None, gpu_reason=NO_CUDA)
        out["seconds"] = time.perf_counter() - self.t0
        hwm, rss = _status("VmHWM"), _status("VmRSS")
        out["host_peak_rss"] = hwm if self.host_reset else None
        out["host_rss_at_end"] = rss
        out["host_reason"] = None if self.host_reset else "VmHWM could not be reset (/proc/self/clear_refs)"
        return out


def _reset_hwm() -> bool:
    """Reset the process's peak RSS (Linux: writing 5 to /proc/self/clear_refs), so VmHWM is this phase's."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return _status("VmHWM") is not None
    except OSError:
        return False


def _status(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def build_model(case: dict[str, Any], torch: Any, device: str) -> tuple[Any, dict[str, Any]]:
    """The Llama of the row from a LlamaConfig, random weights in bf16 on the CPU (nothing downloaded); LoRA
    adapters on it, or for QLoRA the same model saved and reloaded 4-bit through bitsandbytes."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(**{k: v for k, v in case["model"].items() if k not in ("architectures", "model_type")},
                      attn_implementation="sdpa", use_cache=False)
    previous = torch.get_default_dtype()
    # torch_autocast trains an fp32 model (DeepSpeed's engine keeps the module's dtype without bf16/fp16)
    torch.set_default_dtype(torch.float32 if case["precision"] == "autocast" else torch.bfloat16)
    try:
        model = LlamaForCausalLM(cfg)
    finally:
        torch.set_default_dtype(previous)
    info: dict[str, Any] = {"parameters": sum(p.numel() for p in model.parameters()), "quantized": None}
    if case["peft"] == "qlora":
        from transformers import BitsAndBytesConfig

        with tempfile.TemporaryDirectory() as tmp:
            model.save_pretrained(tmp)
            del model
            quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                       bnb_4bit_compute_dtype=torch.bfloat16)
            model = LlamaForCausalLM.from_pretrained(tmp, quantization_config=quant, dtype=torch.bfloat16,
                                                     device_map={"": device})
        info["quantized"] = "bitsandbytes nf4 (load_in_4bit)"
    if case["freeze_embeddings"]:  # without PEFT: the input embedding and the (untied) head make no gradient
        model.get_input_embeddings().requires_grad_(False)
        model.get_output_embeddings().requires_grad_(False)
    if case["checkpointing"]:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if case["peft"] in ("lora", "qlora"):
        from peft import LoraConfig, get_peft_model

        r = case["lora_r"]
        model = get_peft_model(model, LoraConfig(r=r, lora_alpha=2 * r, lora_dropout=0.0,
                                                 target_modules=list(matrix.LORA_TARGETS), task_type="CAUSAL_LM"))
    model.train()
    trainable = [p.numel() for p in model.parameters() if p.requires_grad]
    info["trainable_parameters"] = sum(trainable)
    info["largest_trainable_parameter"] = max(trainable, default=0)
    return model, info


def skip_reason(case: dict[str, Any]) -> str | None:
    """Why this row cannot run here (recorded, never silent), None when it can."""
    if case["peft"] == "qlora" and importlib.util.find_spec("bitsandbytes") is None:
        return ("bitsandbytes is not importable: QLoRA's 4-bit base needs it (benchmarks/gpu/prepare.sh carries a "
                "slimmed wheel to the GPU machine; pip install bitsandbytes elsewhere)")
    return None


class Probe:
    """The instrumented step's readings: row snapshots at DeepSpeed's moments (rows.py) and the bytes autograd
    saves for backward (``saved_tensors_hooks``, once per storage, parameters excluded)."""

    def __init__(self, engine: Any, torch: Any):
        self.engine, self.torch = engine, torch
        self.on = False
        self.points: list[dict[str, dict[str, int]]] = []
        self.saved: dict[tuple[str, int], int] = {}
        inner = getattr(engine.optimizer, "optimizer", None)
        # entering the base optimizer's step (master weights, states and the gradients it consumes), and, as
        # benchmarks/calibrate.py takes them (instance attributes shadow the methods DeepSpeed calls on self):
        # the reduction and the gradient epilogue (stage 1/2: full gradients and the reduce bucket alive) and
        # each free_grad_in_param_list in step() (the reduced partition next to its fp32 copy). No stage-3
        # forward moments: at world size 1 the partition is the whole tensor and nothing is gathered.
        self.wrap(inner if inner is not None and hasattr(inner, "step") else engine.optimizer, "step")
        for moment in ("reduce_gradients", "independent_gradient_partition_epilogue", "free_grad_in_param_list"):
            self.wrap(engine.optimizer, moment)
        # stage 3's gradient side (the terms memory/buffers.py sizes by the trainable parameters): each full
        # gradient as its hook hands it to the IPG bucket (the largest: gathered_grad), the gradients reduced
        # together (what reduce_scatter_coalesced flattens into one copy: reduce_scatter_copy); instance
        # attributes shadow the methods stage3.py calls on self (the second by its mangled name)
        self.largest_grad = self.largest_reduce = self.grads_seen = 0
        self.watch(engine.optimizer, "reduce_independent_p_g_buckets_and_remove_grads", self.note_grad)
        self.watch(engine.optimizer, "_DeepSpeedZeroOptimizer_Stage3__avg_scatter_grads", self.note_reduce)

    def watch(self, obj: Any, name: str, note: Any) -> None:
        original = getattr(obj, name, None)
        if original is None:
            return

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            if self.on:
                note(*args)
            return original(*args, **kwargs)

        setattr(obj, name, wrapped)

    def note_grad(self, param: Any, *_: Any) -> None:
        if param.grad is not None:
            self.grads_seen += 1
            self.largest_grad = max(self.largest_grad, param.grad.numel() * param.grad.element_size())

    def note_reduce(self, params: list[Any], *_: Any) -> None:
        self.largest_reduce = max(self.largest_reduce, sum(p.grad.numel() * p.grad.element_size() for p in params
                                                           if p.grad is not None))

    def gradient_side(self) -> dict[str, Any] | None:
        """Stage 3's measured gradient-side bytes (None at stages 0-2, where these terms are not stage 3's)."""
        # stage_1_and_2.py has a method of the same name (and list-valued bucket buffers): stage 3 by its own
        if not hasattr(self.engine.optimizer, "_DeepSpeedZeroOptimizer_Stage3__avg_scatter_grads"):
            return None
        buckets = getattr(self.engine.optimizer, "ipg_buckets", None)
        ipg = sum(b.buffer.untyped_storage().nbytes() for b in (buckets or {}).values()
                  if getattr(b, "buffer", None) is not None)
        return {"largest_full_grad_bytes": self.largest_grad, "largest_reduce_bytes": self.largest_reduce,
                "ipg_bucket_bytes": ipg, "full_grads_seen": self.grads_seen}

    def wrap(self, obj: Any, name: str) -> None:
        original = getattr(obj, name, None)
        if original is None:
            return

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            self.mark()
            return original(*args, **kwargs)

        setattr(obj, name, wrapped)

    def mark(self) -> None:
        if self.on:
            self.points.append(rows.snapshot(self.engine))

    def pack(self, t: Any) -> Any:
        if self.on and not isinstance(t, self.torch.nn.Parameter):
            st = t.untyped_storage()
            self.saved[(t.device.type, st.data_ptr())] = st.nbytes()
        return t

    def hooks(self) -> Any:
        if not self.on:
            return contextlib.nullcontext()
        return self.torch.autograd.graph.saved_tensors_hooks(self.pack, lambda t: t)

    def saved_by_device(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for (device, _), n in self.saved.items():
            out[device] = out.get(device, 0) + n
        return out


def _gpu(torch: Any) -> dict[str, Any]:
    torch.cuda.init()
    torch.zeros(1, device="cuda")  # the CUDA context exists now: what it takes is read before any model
    free, total = torch.cuda.mem_get_info()
    return {"name": torch.cuda.get_device_name(), "total": total, "cuda": torch.version.cuda,
            "context_bytes": total - free - torch.cuda.memory_reserved()}


def _load(case: dict[str, Any], torch: Any, device: str) -> tuple[Any, dict[str, Any]]:
    """Build the model on the host; deepspeed.initialize moves, flattens and partitions it."""
    import logging

    model, info = build_model(case, torch, device)
    import deepspeed

    logging.getLogger("DeepSpeed").setLevel(logging.ERROR)
    deepspeed.utils.logger.setLevel(logging.ERROR)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=matrix.ds_config(case))
    return engine, info


def _steps(case: dict[str, Any], engine: Any, torch: Any, cuda: bool, probe: Probe) -> dict[str, Any]:
    """A warm-up step, the timed steps, then one instrumented step (untimed)."""
    generator = torch.Generator().manual_seed(1)
    losses: list[float] = []

    def one_step() -> float:
        shape = (case["micro_batch"], case["seq_len"])
        ids = torch.randint(0, case["model"]["vocab_size"], shape, generator=generator).to(engine.device)
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        with probe.hooks():
            loss = engine(input_ids=ids, labels=ids).loss
        engine.backward(loss)
        probe.mark()
        engine.step()
        if cuda:
            torch.cuda.synchronize()
        losses.append(float(loss))
        return time.perf_counter() - t0

    warmup = one_step()
    times = [one_step() for _ in range(case["steps"])]
    probe.on = True
    one_step()
    probe.on = False
    return {"warmup_s": warmup, "step_times_s": times, "step_time_s": statistics.median(times),
            "tokens_per_step": case["micro_batch"] * case["seq_len"], "losses": losses}


def allocator_state(torch: Any) -> dict[str, Any]:
    """PYTORCH_CUDA_ALLOC_CONF as this process has it, and whether CUDA was already initialised when it was read:
    the caching allocator takes the variable at CUDA's first use, so a value set later changes nothing."""
    return {"env": os.environ.get(matrix.ALLOC_CONF_ENV), "cuda_initialized": bool(torch.cuda.is_initialized())}


def run(case: dict[str, Any]) -> dict[str, Any]:
    import torch

    allocator = allocator_state(torch)
    if allocator["env"] != case["alloc_conf"]:  # run.py's worker_env sets it; a mismatch measures the wrong run
        raise RuntimeError(f"{matrix.ALLOC_CONF_ENV} is {allocator['env']!r}, the row wants {case['alloc_conf']!r}")
    cuda = os.environ.get("DS_ACCELERATOR") != "cpu" and torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    out: dict[str, Any] = {"case": case, "device": device, "skipped": skip_reason(case), "allocator": allocator}
    if out["skipped"] is None and case["peft"] == "qlora" and not cuda:
        out["skipped"] = "QLoRA's 4-bit layers (bitsandbytes Linear4bit) are measured on CUDA only"
    if out["skipped"] is not None:
        return out
    if cuda:
        out["gpu"] = _gpu(torch)
    meter = Meter(torch, cuda)

    meter.start()
    engine, out["model"] = _load(case, torch, device)
    out["load"] = meter.end()
    out["optimizer"] = {"engine": type(engine.optimizer).__name__,
                        "base": type(engine.basic_optimizer).__name__ if engine.basic_optimizer is not None else None}

    probe = Probe(engine, torch)
    meter.start()
    steps = _steps(case, engine, torch, cuda, probe)
    out["step"] = {**meter.end(), **steps}
    out["rows"] = rows.row_max(probe.points)
    out["saved_for_backward"] = probe.saved_by_device()
    out["gradient_side"] = probe.gradient_side()

    out["save"] = None
    if case["save"]:  # engine.save_checkpoint (model and optimizer states) to a scratch folder
        with tempfile.TemporaryDirectory(dir=os.environ.get("GPU_KIT_SCRATCH") or None) as tmp:
            meter.start()
            engine.save_checkpoint(tmp, tag="calibration")
            out["save"] = meter.end()
            out["save"]["checkpoint_bytes"] = sum(f.stat().st_size for f in Path(tmp).rglob("*") if f.is_file())
    return out


def main(argv: list[str]) -> None:
    """``worker.py CASES_JSON OUT_JSON``: the rows in order (one on the GPU; the dry run passes them all to one
    process, since a fresh process per row only matters for CUDA's peaks), one result each."""
    if argv[:1] == ["--allocator"]:  # what run.py's environment gives torch's allocator (tests/test_gpu_kit.py)
        import torch

        print(json.dumps(allocator_state(torch)))
        return
    cases, out_path = json.loads(argv[0]), Path(argv[1])
    results = []
    for case in cases:
        t0 = time.perf_counter()
        try:
            result = run(case)
        except Exception as err:  # noqa: BLE001 - a row that fails is recorded with its traceback; the rest go on
            result = {"case": case, "error": f"{type(err).__name__}: {err}",
                      "traceback": traceback.format_exc()[-4000:]}
        result["wall_s"] = time.perf_counter() - t0
        results.append(result)
        out_path.write_text(json.dumps(results))  # after each row: a later crash keeps the rows before it
        print(f"row {case['name']!r}: {result.get('error') or result.get('skipped') or 'measured'} "
              f"[{result['wall_s']:.1f}s]", flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    # skip interpreter teardown: gloo/NCCL destructors sometimes abort after the result is written
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
