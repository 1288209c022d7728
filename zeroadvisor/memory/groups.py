"""The other models' own GPUs: what one GPU of each Ray actor group holds (issue 35 item 2).

OpenRLHF's Ray trainer (``openrlhf.cli.train_ppo_ray``) puts the reference, reward and critic models on GPUs of
their own unless ``--colocate_all_models``: one ``PPORayActorGroup`` per model, each of ``--X_num_nodes`` x
``--X_num_gpus_per_node`` GPUs (1 x 8 by default), one GPU per Ray actor (openrlhf/cli/train_ppo_ray.py train and
its argparse defaults @ v0.8.5; the same groups @ v0.5.9.post1). ``--colocate_actor_ref`` puts the reference on the
actor's GPUs instead (memory/method.py on_policy_gpus: counted there), ``--colocate_critic_reward`` the reward model
on the critic's (one group holding both: ``GroupPeak.shares``); the DeepSpeed launcher's entry points
(``train_dpo``, ``train_kto``, ``train_ppo`` before Ray) build every model in the policy's process. Their memory is
not on the actor's cards, but a group that cannot hold its model makes the run fail all the same, so each group is
judged on its own GPUs and the run's verdict is the worst over the actor's world and the groups (memory/verdict.py
judge, PhasePeak.group).

What one GPU of a group holds, as the code at those releases prepares and runs it:

* **reference** (``ReferenceModelActor``): an ``Actor`` (the causal LM) prepared with ``get_ds_eval_config``:
  ZeRO stage 3 kept where the actor's ``--zero_stage`` is 3, else stage 0 (a whole copy), no optimizer, the
  parameters on the host with ``--ref_reward_offload`` (stage 3 only); its ``forward`` runs under no_grad on one
  micro batch of ``--micro_rollout_batch_size`` sequences of prompt + generation
  (experience_maker.py make_experience_batch / make_experience @ v0.8.5; generate_samples @ v0.5.9.post1), and
  ``Actor.forward`` computes the full-vocabulary logits over the whole sequence, upcasts them
  (``output["logits"].to(torch.float32)``, from v0.5.6) and takes ``log_probs_from_logits`` (a fused cross
  entropy, or chunked logsumexp: nothing of the logits' size beyond them): the bf16 logits and their fp32 copy
  are live at once (openrlhf/models/actor.py forward, openrlhf/models/utils.py log_probs_from_logits @ v0.8.5).
  Before v0.5.6 no upcast and a full log_softmax in the model dtype: twice the logits in bf16.
* **reward** (``RewardModelActor``): ``get_llm_for_sequence_regression``, the same eval config and micro batch;
  a scalar value head, no vocabulary logits (openrlhf/models/model.py _get_reward_model forward @ v0.8.5).
* **critic** (``CriticModelActor``, PPO with ``--advantage_estimator gae``): trained on its own GPUs with the
  actor's training config (get_ds_train_config), so its model states are the policy's arithmetic over the
  critic's parameters and its group (memory/method.py critic_terms); its step's activations as the actor's
  (a scalar head, no LM head), or its no-grad rollout forward where that is larger.

Each no-grad forward holds the residual stream (the layer's input and output, 2 x rows x tokens x hidden) and
the larger of one layer's MLP intermediates (gate, up and their product, 3 x rows x tokens x ffn) and, for the
reference, the logits. Every group also has its CUDA context (the same allowance as the actor's ranks). Not
counted: vLLM engines on GPUs of their own (their share, ``--vllm_gpu_memory_utilization``, is vLLM's by
construction), the groups' host RAM, and the critic's optimizer-step temporaries and DeepSpeed buffers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from packaging.version import Version

from zeroadvisor.config.method import MethodSetup, ray_group
from zeroadvisor.memory import bytes as B
from zeroadvisor.memory.buffers import CONTEXT_KEY, CUDA_CONTEXT_BYTES, gathered_terms
from zeroadvisor.memory.generation import OPENRLHF_FP32_LOGITS, OPENRLHF_ROLLOUT_BATCH
from zeroadvisor.memory.method import (
    critic_loaded,
    critic_spec,
    critic_terms,
    frozen_model_terms,
    frozen_models,
    frozen_stage,
    on_policy_gpus,
    split_degree,
    tensor_split,
)
from zeroadvisor.memory.options import Option
from zeroadvisor.memory.parallel import Parallel, parallel_activations
from zeroadvisor.memory.settings import Settings
from zeroadvisor.memory.terms import Term
from zeroadvisor.model.spec import ModelSpec, TrainingShape
from zeroadvisor.vocab import Device, Method, ModelRole, Resource, TermKind

FP32_BYTES = 4
GROUP_SOURCE = "openrlhf/cli/train_ppo_ray.py train (a PPORayActorGroup per model, 1 GPU per actor) @ v0.8.5"
FROZEN_SOURCE = ("openrlhf/trainer/ray/launcher.py ReferenceModelActor, RewardModelActor (init_model_from_pretrained: "
                 "get_ds_eval_config, stage 3 kept else 0; forward under no_grad) @ v0.5.9.post1, v0.8.5")
FORWARD_SOURCE = ("openrlhf/trainer/ppo_utils/experience_maker.py make_experience_batch (micro_rollout_batch_size) "
                  "@ v0.8.5; openrlhf/models/actor.py Actor.forward (logits .to(torch.float32)), "
                  "openrlhf/models/utils.py log_probs_from_logits @ v0.8.5")
GATHERED_GRAD = "gathered_grad"  # memory/buffers.py gathered_terms: the largest full gradient, none when frozen
CRITIC_SOURCE = "openrlhf/trainer/ray/ppo_critic.py CriticModelActor (get_ds_train_config, training_step) @ v0.8.5"


@dataclass(frozen=True, slots=True)
class GroupPeak:
    """One GPU of a model's own group: the role, the group's GPUs and what one of them holds (``terms``)."""

    role: ModelRole
    gpus: int
    terms: tuple[Term, ...]
    shares: tuple[ModelRole, ...] = ()  # the other models on the same GPUs (--colocate_critic_reward: reward)

    @property
    def gpu(self) -> int:
        return sum(t.nbytes for t in self.terms if t.device == Resource.GPU)

    @property
    def gpu_bound(self) -> int:
        return sum(t.upper for t in self.terms if t.device == Resource.GPU)

    @property
    def rows(self) -> dict[str, int]:
        """The GPU bytes by row (the model's own row, gathered parameters, activations, overhead)."""
        out: dict[str, int] = {}
        for t in self.terms:
            if t.device == Resource.GPU:
                out[t.row] = out.get(t.row, 0) + t.nbytes
        return out

    @property
    def flags(self) -> str:
        """The flags that move what one GPU of the group holds (train_ppo_ray's argparse @ v0.8.5)."""
        if self.role == ModelRole.CRITIC:
            return ("--critic_num_nodes / --critic_num_gpus_per_node (its states partition over them), "
                    "--micro_train_batch_size, --micro_rollout_batch_size"
                    + (", and for the reward model beside it ZeRO-3 (--zero_stage 3) or --ref_reward_offload, or "
                       "without --colocate_critic_reward GPUs of its own" if self.shares else ""))
        return ("--micro_rollout_batch_size (its forward), and for its weights ZeRO-3 (--zero_stage 3) over more "
                f"GPUs in its group (--{'ref' if self.role == ModelRole.REFERENCE else 'reward'}_num_gpus_per_node) "
                "or --ref_reward_offload")

    @property
    def words(self) -> str:
        """Where it is, for the verdict: "on the reference model's own GPU (1 of its group)"."""
        where = (f"on each of the {self.role} model's own {self.gpus} GPUs" if self.gpus > 1
                 else f"on the {self.role} model's own GPU")
        return where + "".join(f" (with the {role} model)" for role in self.shares)



def own_groups(setup: MethodSetup) -> bool:
    """Whether some other model runs on GPUs of its own: OpenRLHF's Ray trainer, each model not colocated with the
    actor (memory/method.py on_policy_gpus)."""
    return setup.method != Method.SFT and not all(on_policy_gpus(setup, role) for role in ModelRole)


def group_gpus(setup: MethodSetup, role: ModelRole) -> int:
    """The GPUs of the role's group: its flags, else train_ppo_ray's defaults (1 node x 8)."""
    nodes, per = ray_group(setup, role)  # config/method.py: train_ppo_ray's defaults where the flags are silent
    return nodes * per


def forward_bytes(spec: ModelSpec, rows: int, tokens: int, w: int, logits_per: int) -> tuple[int, str]:
    """A no-grad forward's peak: the residual stream and the larger of one layer's MLP intermediates and the
    logits (``logits_per`` bytes per token and vocabulary entry; 0: a scalar head)."""
    h, ffn, V = spec.hidden_size or 0, spec.intermediate_size or 0, spec.vocab_size or 0
    residual = 2 * rows * tokens * h * w
    layer = 3 * rows * tokens * ffn * w
    logits = logits_per * rows * tokens * V
    formula = (f"residual 2 × {rows} × {tokens} × h × {w} B + max(MLP 3 × {rows} × {tokens} × ffn × {w} B"
               + (f", logits {logits_per} B × {rows} × {tokens} × V {V:,})" if logits_per else ")"))
    return residual + max(layer, logits), formula


def group_peaks(setup: MethodSetup, policy: ModelSpec, auxiliary: dict[ModelRole, ModelSpec], s: Settings,
                option: Option, shape: TrainingShape, layout: Parallel, notes: list[str]) -> list[GroupPeak]:
    """One GPU of each model's own group for ``option`` (the module docstring); [] where the models share the
    actor's cards."""
    if not own_groups(setup):
        return []
    w = B.nbytes(s.precision)
    rows = setup.generation.rollout_batch_size or OPENRLHF_ROLLOUT_BATCH
    tokens = shape.sequence_length
    release = setup.release
    critic = critic_loaded(setup) and not on_policy_gpus(setup, ModelRole.CRITIC)
    # --colocate_critic_reward: the reward model's actors in the critic's placement group (train_ppo_ray.py @ v0.8.5,
    # which asserts the two groups' sizes equal): one GPU holds both
    with_critic = critic and bool(setup.colocate_critic_reward)
    out: list[GroupPeak] = []
    beside_critic: _Frozen | None = None
    for role, whole in frozen_models(setup, policy, auxiliary):
        if on_policy_gpus(setup, role):
            continue
        shared = with_critic and role == ModelRole.REWARD
        # --ds_tensor_parallel_size splits this model too; ZeRO partitions it over the group's data-parallel ranks
        spec = tensor_split(setup, whole, layout.tensor, notes)
        N = max(group_gpus(setup, ModelRole.CRITIC if shared else role) // split_degree(setup, layout.tensor), 1)
        states = frozen_model_terms(role, spec, s, option, N, setup, False, layout.tensor)
        gathered: list[Term] = []
        if frozen_stage(setup, role, option) == 3:
            offload = any(t.device == Resource.CPU for t in states)
            # the forward's gathered layers (the eval config's stage3_* are "auto": DeepSpeed's defaults, as the
            # actor's); no gradient: the model is frozen
            gathered = [t for t in gathered_terms(s, Option(3, Device.NONE, Device.CPU if offload else Device.NONE),
                                                  spec.parameters, N, spec, []) if t.key != GATHERED_GRAD]
        forward = _frozen_forward(role, spec, rows, tokens, w, release) if tokens else None
        if forward is None:
            notes.append(f"{role.value} group: its rollout forward not counted without a sequence length")
        if shared:
            beside_critic = _Frozen(states, gathered, forward)
        else:
            out.append(GroupPeak(role, N, (*states, *gathered, *([forward] if forward else []), _context())))
    if critic:
        out += _critic_group(setup, policy, auxiliary, s, option, shape, layout, rows, beside_critic, notes)
    return out


@dataclass(frozen=True, slots=True)
class _Frozen:
    """A frozen model's terms on a GPU it shares with the critic: its states, its gathered layers, its forward."""

    states: list[Term]
    gathered: list[Term]
    forward: Term | None


def _frozen_forward(role: ModelRole, spec: ModelSpec, rows: int, tokens: int, w: int,
                    release: Version | None) -> Term:
    """A frozen model's no-grad rollout forward (the module docstring)."""
    reference = role == ModelRole.REFERENCE
    per = (2 * w if release is not None and release < OPENRLHF_FP32_LOGITS else w + FP32_BYTES) if reference else 0
    nbytes, formula = forward_bytes(spec, rows, tokens, w, per)
    what = (f"{role.value} forward under no_grad at --micro_rollout_batch_size {rows} × {tokens} tokens"
            + (": full-vocabulary logits and their fp32 copy" if reference and per != 2 * w
               else ": full-vocabulary logits and their log_softmax" if reference else ": a scalar head"))
    return Term("activations", Resource.GPU, nbytes, f"{role.value}_forward", what, formula,
                FORWARD_SOURCE if reference else FROZEN_SOURCE, kind=TermKind.BOUND)


def _critic_group(setup: MethodSetup, policy: ModelSpec, auxiliary: dict[ModelRole, ModelSpec], s: Settings,
                  option: Option, shape: TrainingShape, layout: Parallel, rows: int, beside: _Frozen | None,
                  notes: list[str]) -> list[GroupPeak]:
    """The critic trained on its own group with the actor's config (CRITIC_SOURCE): its states over the group,
    its gathered layers at stage 3, and the larger of its training step's activations (scalar head) and its
    no-grad rollout forward. ``beside``: the reward model's terms where --colocate_critic_reward puts it on the
    same GPUs; its states stay, its forward runs before the critic's (make_experience: one model after another),
    so the larger of the forwards and the critic's step is counted."""
    spec = tensor_split(setup, critic_spec(setup, policy, auxiliary, []), layout.tensor, notes)
    N = max(group_gpus(setup, ModelRole.CRITIC) // split_degree(setup, layout.tensor), 1)
    terms = critic_terms(spec, s, option, N, [])
    gathered = gathered_terms(s, option, spec.parameters, N, spec, [])
    reward_forward = beside.forward if beside is not None else None
    if beside is not None:
        # the two models gather their layers at different moments (the reward's forward, the critic's forward and
        # step): the larger set is counted
        if sum(t.nbytes for t in beside.gathered) > sum(t.nbytes for t in gathered):
            gathered = beside.gathered
        terms += beside.states
    terms += gathered
    if shape.sequence_length:
        head = replace(spec, lm_head=False)
        step = parallel_activations(head, shape, s.micro_batch, s.precision, layout).nbytes
        forward, formula = forward_bytes(spec, rows, shape.sequence_length, B.nbytes(s.precision), 0)
        larger = max(step, forward, reward_forward.nbytes if reward_forward is not None else 0)
        also = (f", reward forward {reward_forward.nbytes:,} B" if reward_forward is not None else "")
        terms.append(Term("activations", Resource.GPU, larger, "critic_group_activations",
                          "critic: the larger of its training step's activations (scalar head) and its no-grad "
                          f"rollout forward at --micro_rollout_batch_size {rows}"
                          + (" and the reward model's (--colocate_critic_reward)" if reward_forward else ""),
                          f"max(step {step:,} B, {formula}{also})", CRITIC_SOURCE, kind=TermKind.BOUND))
    notes.append("critic group: its optimizer-step temporaries and DeepSpeed buffers are not counted (a lower bound)")
    return [GroupPeak(ModelRole.CRITIC, N, (*terms, _context()), shares=(ModelRole.REWARD,) if beside else ())]


def _context() -> Term:
    return Term("overhead", Resource.GPU, CUDA_CONTEXT_BYTES, CONTEXT_KEY, "CUDA context, NCCL and cuBLAS "
                "workspaces", "1 GiB per process", "memory/buffers.py CUDA_CONTEXT_BYTES", kind=TermKind.ALLOWANCE)
