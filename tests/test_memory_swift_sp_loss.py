"""ms-swift's own sequence parallel computes the loss itself (memory/parallel.py parallel_activations).

swift/trainers/sequence_parallel/ulysses.py prepare_trainer sets ``compute_loss_func = loss_scale_sp_func``;
utils.py loss_scale_sp_func runs ``CrossEntropyLoss(reduction='none')`` on ``outputs.logits`` as lm_head returns
them (the model dtype), where transformers' ForCausalLMLoss upcasts them (``logits.float()``). So the loss peak's
three vocabulary-wide tensors (log_softmax's output, NllLossBackward's gradient, LogSoftmaxBackward's) are 3 × 2 B
per token and vocabulary entry in bf16 instead of 3 × 4 B; the int64 labels are the same either way.
"""

from __future__ import annotations

import dataclasses

from zeroadvisor.config.method import MethodSetup
from zeroadvisor.memory.parallel import Parallel, parallel_activations
from zeroadvisor.model.hf import spec_from_hf_config
from zeroadvisor.model.spec import Checkpointing, TrainingShape
from zeroadvisor.vocab import TrainerFamily

QWEN2 = {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "hidden_size": 128,
         "intermediate_size": 352, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
         "vocab_size": 1000, "max_position_embeddings": 8192, "tie_word_embeddings": False,
         "torch_dtype": "bfloat16", "attention_dropout": 0.0}
S, SP, V = 8192, 4, 1000
SWIFT = MethodSetup(trainer=TrainerFamily.MS_SWIFT)


def _acts(method=None, sp=SP):
    shape = TrainingShape(sequence_length=S, activation_checkpointing=Checkpointing.NONE, flash_attention=True)
    if method is not None:
        shape = dataclasses.replace(shape, method=method)
    return parallel_activations(spec_from_hf_config(QWEN2), shape, 1, "bf16", Parallel(data=1, sequence=sp))


def test_swift_sequence_parallel_keeps_the_loss_in_bf16():
    tokens = S // SP
    plain, swift = _acts(), _acts(SWIFT)
    assert plain.logits - swift.logits == (3 * 4 - 3 * 2) * tokens * V  # fp32 upcast vs the logits' bf16
    assert swift.logits == 3 * 2 * tokens * V + 8 * tokens  # + the int64 labels nll_loss keeps
    assert plain.nbytes - swift.nbytes == plain.logits - swift.logits
    assert any("ms-swift sequence parallel" in n for n in swift.notes)


def test_other_trainers_and_no_sequence_parallel_keep_the_upcast():
    assert _acts(MethodSetup(trainer=TrainerFamily.LLAMA_FACTORY)).logits == _acts().logits
    assert _acts(SWIFT, sp=1).logits == _acts(sp=1).logits  # without its sequence parallel the Trainer's loss runs
