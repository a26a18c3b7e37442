"""Hugging Face generation on tpu: a tiny random-weight Llama decoding
greedily with a static KV cache gives the CPU's tokens in every mode, and in
fused mode, once decoding has settled, no token compiles a program of its own."""

import copy

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

import eagertpu

PROMPT = 6
BATCH = 2
# Past this many new tokens, a decode step must run only programs already
# loaded (compiled, or read from the disk cache).
SETTLED = 4


def tiny_llama():
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        # Weights larger than the default 0.02 keep the top two logits apart,
        # so float rounding differences cannot flip a greedy choice.
        initializer_range=0.1,
        bos_token_id=None,
        eos_token_id=None,  # never stops early: every run makes max_new_tokens
        pad_token_id=0,
    )
    model = LlamaForCausalLM(config).eval()
    prompt = torch.randint(3, config.vocab_size, (BATCH, PROMPT), generator=torch.Generator().manual_seed(1))
    return model, prompt


def generate(model, prompt, new_tokens, **kwargs):
    device = next(model.parameters()).device
    return model.generate(
        prompt.to(device),
        attention_mask=torch.ones_like(prompt).to(device),
        max_new_tokens=new_tokens,
        do_sample=False,
        cache_implementation="static",
        disable_compile=True,
        **kwargs,
    )


def cpu_tokens(model, prompt, new_tokens):
    """The CPU's greedy tokens, checked to be a meaningful reference: the
    chosen logit beats the runner-up by a margin far above float32 rounding."""
    out = generate(model, prompt, new_tokens, output_scores=True, return_dict_in_generate=True)
    top2 = torch.stack(out.scores).topk(2, dim=-1).values
    gap = (top2[..., 0] - top2[..., 1]).min().item()
    assert gap > 1e-4, f"the CPU's top two logits are {gap:.2g} apart: greedy tokens are not comparable"
    tokens = out.sequences[:, PROMPT:]
    assert tokens.unique().numel() > 3, f"a degenerate reference: {tokens.tolist()}"
    return tokens


def loaded_programs():
    """Programs compiled so far (a program found in the on-disk cache is used
    at once, whoever compiled it)."""
    return eagertpu.metrics()["compiles"]


@pytest.mark.usefixtures("no_fallbacks")
def test_greedy_generate_with_static_cache_matches_cpu(mode):
    model, prompt = tiny_llama()
    expected = cpu_tokens(model, prompt, 12)
    out = generate(copy.deepcopy(model).to("tpu"), prompt, 12)
    assert out.device.type == "tpu"
    got = out[:, PROMPT:].cpu()
    assert torch.equal(got, expected), f"{mode}: tpu generated\n{got.tolist()}\nthe CPU\n{expected.tolist()}"


class Recompiled(Exception):
    pass


def test_fused_decode_compiles_nothing_strict_mode_does_not_need_after_the_first_tokens():
    """`generate()` grows `input_ids` and `attention_mask` by one token each
    step (`torch.cat`), so programs reading them are new at every token in any
    mode (strict mode too: its single-op programs of the growing tensors).
    Fused mode must add nothing to that: a decode step's calls whose sizes
    changed run alone, as strict mode's programs, and the rest of the step
    keeps its chunks, compiled once, so after the first tokens a fused decode
    step loads no program a strict decode of the same tokens did not already
    compile."""
    model, prompt = tiny_llama()
    new_tokens = 2 * 12
    expected = cpu_tokens(model, prompt, new_tokens)
    tpu_model = copy.deepcopy(model).to("tpu")
    with eagertpu.mode("strict"):
        out = generate(tpu_model, prompt, new_tokens)
        assert torch.equal(out[:, PROMPT:].cpu(), expected)
    # Forward call k (1 is the prefill) makes new token k; it starts once
    # token k-1 has been read back (generate reads a stop flag every token).
    # Programs loaded by each call are counted at the next one's start; the
    # check stops at the first decode step that loads a program past the
    # SETTLED tokens.
    at_call = []
    split = eagertpu.metrics()["chunks_split"]

    def count(module, args, kwargs):
        # A compile queued in the background by a token counts for it.
        eagertpu.wait_for_compiles()
        at_call.append(loaded_programs())
        if len(at_call) > SETTLED + 1 and at_call[-1] > at_call[SETTLED]:
            raise Recompiled

    hook = tpu_model.register_forward_pre_hook(count, with_kwargs=True)
    with eagertpu.mode("fused"):
        try:
            out = generate(tpu_model, prompt, new_tokens)
            eagertpu.sync()
            at_call.append(loaded_programs())
        except Recompiled:
            out = None
        finally:
            hook.remove()
            eagertpu.sync()
    per_token = [b - a for a, b in zip(at_call, at_call[1:])]
    reasons = eagertpu.metrics()["recompile_reasons"][-2:]
    stopped = "stopped there" if out is None else "the last entry includes the final sync"
    assert at_call[-1] == at_call[SETTLED], (
        f"fused decoding compiled new programs after token {SETTLED}: programs compiled by token 1 (the prefill), "
        f"2, ...: {per_token} ({stopped}); latest recompile reasons: {reasons}"
    )
    assert eagertpu.metrics()["chunks_split"] - split >= new_tokens - SETTLED, "decode steps were not split"
    got = out[:, PROMPT:].cpu()
    assert torch.equal(got, expected), f"tpu generated\n{got.tolist()}\nthe CPU\n{expected.tolist()}"
