"""torch.compile on tpu (backend "tpu"): compiled functions, modules and whole
training steps give the CPU's values in every mode; each graph call is one
chunk, compiled once and replayed after; graph breaks, recompiles and errors
behave as users expect; a second process loads the programs from the disk
cache; the default backend (Inductor) refuses at once, naming "tpu"."""

import copy
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from helpers import assert_same, next_op_works, run_python, tpu

import eagertpu
from eagertpu.dynamo import dynamo_stats


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def counts():
    m = eagertpu.metrics()
    return {
        "compiles": m["compiles"],
        "graph_calls": m["compiled_graph_calls"],
        "graph_chunks": m["chunks"]["graph"],
        "replayed": m["replayed_chunks"],
        "direct": m["direct_graph_calls"],
        "ops": m["ops_recorded"],
    }


def since(before):
    now = counts()
    return {k: now[k] - before[k] for k in now}


def chain(x, y):
    for _ in range(10):
        x = (x * 1.01 + y).tanh()
    return x.sum(0), x * 2


def test_compiled_function_matches_cpu_and_replays(mode):
    x, y = torch.randn(8, 16), torch.randn(16)
    expected = chain(x, y)
    compiled = torch.compile(chain, backend="tpu")
    before = counts()
    assert_same(compiled(tpu(x), tpu(y)), expected)
    first = since(before)
    for _ in range(2):
        assert_same(compiled(tpu(x), tpu(y)), expected)
    d = since(before)
    if mode == "debug":
        # Debug mode runs a graph's ops one by one, as every op.
        assert d["graph_calls"] == 0 and d["direct"] == 0
        return
    assert d["graph_calls"] == 3
    # The first call is one chunk, compiled at once (or loaded from disk);
    # the later ones run that program directly on the inputs: no op recorded.
    assert first["graph_chunks"] >= 1 and d["compiles"] <= 1
    assert d["direct"] == 2
    assert d["ops"] - first["ops"] <= 4  # the inputs' transfers, not the graph's ops


def test_direct_calls_follow_new_input_values_and_fall_back_on_new_types(mode):
    compiled = torch.compile(chain, backend="tpu", dynamic=False)
    y = torch.randn(16)
    for i in range(4):
        x = torch.randn(8, 16)
        assert_same(compiled(tpu(x), tpu(y)), chain(x, y), what=f"call {i}")
    # A graph input computed by pending eager ops is launched first.
    x = torch.randn(8, 16)
    assert_same(compiled(tpu(x) * 2 - 1, tpu(y)), chain(x * 2 - 1, y))
    # A non-contiguous input (a view): runs through a scope, still right.
    xt = torch.randn(16, 8)
    assert_same(compiled(tpu(xt).t(), tpu(y)), chain(xt.t(), y))


def test_views_in_and_out_of_direct_calls_match_cpu(mode):
    # A graph reading views of its inputs and returning views of its inputs
    # and of its results: after the first call it runs directly, each view
    # input read from its allocation, each view output made again.
    def f(a, w):
        h = a @ w.t()
        return h, a, w.t(), h[:, 1:], h.sum(0)

    compiled = torch.compile(f, backend="tpu", dynamic=False)
    before = counts()
    for i in range(3):
        a, w = torch.randn(4, 6), torch.randn(5, 6)
        w_tpu = tpu(w)
        got = compiled(tpu(a), w_tpu)
        for k, (g, e) in enumerate(zip(got, f(a, w))):
            assert_same(g, e, what=f"call {i}, output {k}")
            assert g.shape == e.shape and g.stride() == e.stride(), (k, g.stride(), e.stride())
        # The view outputs are views of the input they came from.
        assert got[2].untyped_storage().data_ptr() == w_tpu.untyped_storage().data_ptr()
    if mode != "debug":
        assert since(before)["direct"] == 2
    # A view input: read from its allocation at its own offset. Another
    # offset (same sizes and strides) is another view: through a scope, then
    # directly while it stays.
    base = torch.randn(10, 6)
    rows = tpu(base)
    for i in (0, 3, 3, 5, 5, 5):
        got = compiled(rows[i : i + 4], w_tpu)
        for k, (g, e) in enumerate(zip(got, f(base[i : i + 4], w))):
            assert_same(g, e, what=f"rows {i}, output {k}")
        assert got[1].untyped_storage().data_ptr() == rows.untyped_storage().data_ptr()
    if mode != "debug":
        assert since(before)["direct"] == 2 + 3


def mlp_with_adamw():
    """A 6-16-3 MLP on the CPU and its copy on tpu, each with AdamW, and a
    training step `step(device, x, y)` of either (its loss)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
    model_tpu = copy.deepcopy(model).to("tpu")
    models = {"cpu": model, "tpu": model_tpu}
    opts = {d: torch.optim.AdamW(m.parameters(), lr=1e-2) for d, m in models.items()}

    def step(dev, x, y):
        opts[dev].zero_grad()
        loss = F.mse_loss(models[dev](x), y)
        loss.backward()
        opts[dev].step()
        return loss

    return model, model_tpu, opts, step


def test_a_compiled_training_step_with_adamw_runs_each_graph_directly(mode, no_fallbacks):
    # The whole step compiled with the default AdamW (capturable=False): as
    # on CUDA, dynamo keeps the optimizer's step counts on the device, so the
    # forward, the backward and the optimizer's graph all run directly.
    model, model_tpu, opts, step = mlp_with_adamw()
    compiled = torch.compile(step, backend="tpu")
    g = torch.Generator().manual_seed(5)
    for i in range(6):
        if i == 3:
            before = counts()
        x, y = torch.randn(8, 6, generator=g), torch.randn(8, 3, generator=g)
        want = step("cpu", x, y).item()
        got = compiled("tpu", tpu(x), tpu(y)).item()
        assert got == pytest.approx(want, rel=1e-5), i
    for (name, p), q in zip(model_tpu.named_parameters(), model.parameters()):
        assert_same(p, q, rtol=1e-5, atol=1e-6, what=name)
    state = opts["tpu"].state[model_tpu[0].weight]
    assert state["step"].device.type == "tpu" and state["step"].item() == 6
    if mode != "debug":
        assert since(before)["direct"] == 3 * 3, since(before)


def test_a_compiled_optimizer_step_donates_the_state_it_updates(mode, no_fallbacks):
    # The optimizer's graph updates every parameter and its AdamW state; its
    # direct calls donate each one's buffer to its new value (as a TPU user
    # needs: the state not held twice) unless something else still holds
    # the old value: a clone of a weight, an unlaunched op reading one.
    model, model_tpu, opts, step = mlp_with_adamw()
    compiled = torch.compile(step, backend="tpu")
    updated = 4 * len(list(model.parameters()))  # each parameter, its two moments and step count
    g = torch.Generator().manual_seed(5)

    def run(i):
        x, y = torch.randn(8, 6, generator=g), torch.randn(8, 3, generator=g)
        want = step("cpu", x, y).item()
        before = eagertpu.metrics()["donated_buffers"]
        got = compiled("tpu", tpu(x), tpu(y)).item()
        assert got == pytest.approx(want, rel=1e-5), i
        return eagertpu.metrics()["donated_buffers"] - before

    for i in range(2):
        run(i)
    eagertpu.wait_for_compiles()  # the donating program, compiled in the background
    donated = [run(i) for i in range(2, 4)]
    # Held elsewhere: a clone of the first weight (the same value), and an
    # op reading the second weight (launched when the step's first graph is
    # called: it blocks that donation only if it still runs then).
    first, second = model_tpu[0].weight, model_tpu[2].weight
    held, held_want = first.detach().clone(), model[0].weight.detach().clone()
    doubled, doubled_want = second.detach() * 2, model[2].weight.detach() * 2
    donated.append(run(4))
    donated.append(run(5))
    assert_same(held, held_want, rtol=1e-5, atol=1e-6, what="a clone taken before the step")
    assert_same(doubled, doubled_want, rtol=1e-5, atol=1e-6, what="an op read before the step")
    for (name, p), q in zip(model_tpu.named_parameters(), model.parameters()):
        assert_same(p, q, rtol=1e-5, atol=1e-6, what=name)
    for p, q in zip(model_tpu.parameters(), model.parameters()):
        for key in ("exp_avg", "exp_avg_sq"):
            assert_same(opts["tpu"].state[p][key], opts["cpu"].state[q][key], rtol=1e-5, atol=1e-6, what=key)
    if mode == "debug":
        assert donated == [0, 0, 0, 0]  # no direct calls: each op runs alone
    else:
        assert donated[:2] == [updated, updated] and donated[3] == updated, donated
        assert updated - 2 <= donated[2] <= updated - 1, donated


def test_a_compiled_step_with_dropout_runs_directly_and_samples_as_eager(mode, no_fallbacks):
    # Dropout in a compiled training step: after the first call each graph
    # runs directly, drawing new keys from the tpu generator in the order
    # its kernels drew them; so the losses, the weights and the generator's
    # state are those of the same step run eagerly from the same seed.
    def train(compiled):
        torch.manual_seed(0)
        model = nn.Sequential(
            nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 16), nn.ReLU(), nn.Dropout(0.5),
            nn.Linear(16, 3),
        ).to("tpu")
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        g = torch.Generator().manual_seed(1)
        x, y = tpu(torch.randn(8, 6, generator=g)), tpu(torch.randn(8, 3, generator=g))

        def step():
            opt.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            return loss

        run = torch.compile(step, backend="tpu") if compiled else step
        torch.tpu.manual_seed(7)
        before = counts()
        losses = [run().item() for _ in range(6)]
        return losses, list(model.parameters()), torch.tpu.get_rng_state(), since(before)

    want, want_weights, want_state, _ = train(False)
    got, weights, state, calls = train(True)
    assert got == pytest.approx(want, rel=1e-5)
    for p, q in zip(weights, want_weights):
        assert_same(p, q.cpu(), rtol=1e-5, atol=1e-6)
    assert torch.equal(state, want_state), "the compiled steps drew as many keys as the eager ones"
    # The masks do change from step to step: the eager losses are not those
    # of one fixed mask (they would be with a key compiled in).
    assert len(set(want)) == len(want)
    if mode != "debug":
        assert calls["direct"] == 5 * 3, calls


def test_compiled_dropout_draws_a_new_mask_at_every_call(mode):
    p = 0.25
    drop = torch.compile(lambda x: F.dropout(x, p, training=True), backend="tpu")
    ones = tpu(torch.ones(64, 64))
    masks = []
    for _ in range(4):
        out = drop(ones).cpu()
        # Kept elements scaled by 1 / (1 - p), the rest zero.
        assert torch.all((out == 0) | torch.isclose(out, torch.tensor(1 / (1 - p)))), out.unique()
        kept = (out != 0).float().mean().item()
        assert abs(kept - (1 - p)) < 0.03, kept  # 4096 draws: sd 0.007
        masks.append(out != 0)
    for i in range(4):
        for j in range(i):
            assert not torch.equal(masks[i], masks[j]), (i, j)


def test_inputs_sharing_an_allocation_at_capture_must_share_it_to_run_directly(mode):
    # Captured with a and b one allocation (b = a.t()), the program reads
    # both from it; called with two allocations (dynamo does not recompile),
    # it must not run directly on the first one's contents.
    def g(a, b):
        return a * 2 + b

    compiled = torch.compile(g, backend="tpu", dynamic=False)
    m = torch.randn(4, 4)
    mt = tpu(m)
    for _ in range(3):
        assert_same(compiled(mt, mt.t()), g(m, m.t()))
    m1, m2 = torch.randn(4, 4), torch.randn(4, 4)
    assert_same(compiled(tpu(m1), tpu(m2).t()), g(m1, m2.t()))
    assert_same(compiled(mt, mt.t()), g(m, m.t()))


def test_a_compiled_module_trains_with_direct_forward_and_backward(mode, no_fallbacks):
    # Forward and backward graphs save views (the input, a weight's
    # transpose) and return gradients as views of their sums: both run
    # directly after the first step, on each step's new values.
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
    model_tpu = copy.deepcopy(model).to("tpu")
    compiled = torch.compile(model_tpu, backend="tpu")
    opt, opt_tpu = (torch.optim.SGD(m.parameters(), lr=0.1) for m in (model, model_tpu))
    before = counts()
    g = torch.Generator().manual_seed(4)
    for step in range(5):
        x = torch.randn(8, 6, generator=g)
        for m, o, dev in ((model, opt, "cpu"), (compiled, opt_tpu, "tpu")):
            o.zero_grad()
            m(x.to(dev)).square().mean().backward()
            o.step()
        for (name, p), q in zip(model_tpu.named_parameters(), model.parameters()):
            assert_same(p.grad, q.grad, rtol=1e-5, atol=1e-6, what=f"step {step}: {name}.grad")
            assert_same(p, q, rtol=1e-5, atol=1e-6, what=f"step {step}: {name}")
    if mode != "debug":
        # Forward and backward, each step after the first.
        assert since(before)["direct"] == 8


def test_backend_alias_eagertpu():
    x = torch.randn(5)
    assert_same(torch.compile(lambda t: t.sin() * 3, backend="eagertpu")(tpu(x)), x.sin() * 3)


def convnet():
    torch.manual_seed(0)
    # No bias before BatchNorm: its true gradient is 0, and AdamW would move
    # it by lr in the direction of rounding noise, differently per device.
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1, bias=False),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(8 * 8 * 8, 10),
    )


def train(device, compile_module=False, compile_step=False, steps=4):
    model = convnet().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    forward = torch.compile(model, backend="tpu") if compile_module else model
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(4, 3, 8, 8, generator=g), torch.randint(0, 10, (4,), generator=g)

    def step(xb, yb):
        opt.zero_grad()
        loss = F.cross_entropy(forward(xb), yb)
        loss.backward()
        opt.step()
        return loss

    if compile_step:
        step = torch.compile(step, backend="tpu")
    losses = [step(x.to(device), y.to(device)).item() for _ in range(steps)]
    return losses, model


@pytest.mark.parametrize("what", ["module", "step"])
def test_compiled_training_matches_cpu(mode, what, no_fallbacks):
    ref_losses, ref_model = train("cpu")
    before = counts()
    losses, model = train("tpu", compile_module=what == "module", compile_step=what == "step")
    assert losses == pytest.approx(ref_losses, rel=1e-4, abs=1e-5)
    for (name, p), q in zip(model.state_dict().items(), ref_model.state_dict().values()):
        assert_same(p, q, rtol=1e-4, atol=1e-4, what=name)
    if mode != "debug":
        assert since(before)["graph_calls"] >= 8  # forward and backward, each step


class TinyTransformer(nn.Module):
    """Embedding, one pre-norm encoder layer (attention with a causal mask,
    GELU feed-forward), a head: the ops of a small language model."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(16, 16)
        # No biases: the key projection's bias has a true gradient of 0 (the
        # softmax ignores it), which AdamW turns into lr-sized steps along
        # rounding noise, differently per device.
        self.layer = nn.TransformerEncoderLayer(
            16, 2, 32, dropout=0.0, activation="gelu", batch_first=True, norm_first=True, bias=False
        )
        self.head = nn.Linear(16, 16)

    def forward(self, tokens):
        mask = nn.Transformer.generate_square_subsequent_mask(tokens.shape[1], device=tokens.device)
        return self.head(self.layer(self.embed(tokens), src_mask=mask, is_causal=True))


class TinyLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(6, 8, num_layers=2, batch_first=True)
        self.head = nn.Linear(8, 16)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out)


def train_sequence_model(make, device, compiled, steps=3):
    torch.manual_seed(0)
    model = make().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    forward = torch.compile(model, backend="tpu") if compiled else model
    g = torch.Generator().manual_seed(2)
    if make is TinyTransformer:
        x = torch.randint(0, 16, (2, 5), generator=g)
    else:
        x = torch.randn(2, 5, 6, generator=g)
    y = torch.randint(0, 16, (2, 5), generator=g)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(forward(x.to(device)).flatten(0, 1), y.to(device).flatten())
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, model


@pytest.mark.parametrize(
    "make, allow_rnn", [(TinyTransformer, False), (TinyLSTM, False), (TinyLSTM, True)], ids=["transformer", "lstm", "lstm_traced"]
)
def test_compiled_sequence_models_train_as_on_cpu(mode, make, allow_rnn, no_fallbacks):
    ref_losses, ref_model = train_sequence_model(make, "cpu", compiled=False)
    before, breaks = counts(), dynamo_stats()["graph_breaks"]
    with torch._dynamo.config.patch(allow_rnn=allow_rnn):
        losses, model = train_sequence_model(make, "tpu", compiled=True)
    assert losses == pytest.approx(ref_losses, rel=1e-4, abs=1e-5)
    for (name, p), q in zip(model.state_dict().items(), ref_model.state_dict().values()):
        assert_same(p, q, rtol=1e-4, atol=1e-4, what=name)
    reasons = dynamo_stats()["graph_break_reasons"]
    if make is TinyLSTM and not allow_rnn:
        # As on CUDA: dynamo leaves nn.LSTM to eager mode unless allow_rnn.
        assert any("does not support RNN, GRU, or LSTM" in r for r in reasons), reasons
    else:
        assert dynamo_stats()["graph_breaks"] == breaks, reasons
        if mode != "debug":
            assert since(before)["graph_calls"] >= 6  # forward and backward, each step


class WithBreak(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(6, 6), nn.Linear(6, 3)

    def forward(self, x):
        h = self.a(x).relu()
        torch._dynamo.graph_break()
        return self.b(h).softmax(-1)


def test_graph_break_inside_a_model_runs_eagerly_between_graphs(mode):
    torch.manual_seed(0)
    model = WithBreak()
    x = torch.randn(4, 6)
    expected = model(x)
    compiled = torch.compile(copy.deepcopy(model).to("tpu"), backend="tpu")
    breaks = dynamo_stats()["graph_breaks"]
    assert_same(compiled(tpu(x)), expected.detach())
    assert_same(compiled(tpu(x)), expected.detach())
    assert dynamo_stats()["graph_breaks"] > breaks
    assert eagertpu.metrics()["dynamo"]["graph_breaks"] > breaks
    assert "graph break" in eagertpu.metrics_report()


def test_recompile_for_a_new_batch_size_names_the_input():
    compiled = torch.compile(lambda x: (x * 2).sum(0), backend="tpu", dynamic=False)
    for batch in (4, 6):
        x = torch.randn(batch, 3)
        assert_same(compiled(tpu(x)), (x * 2).sum(0))
    stats = dynamo_stats()
    assert stats["recompiles"] >= 1
    assert any("size mismatch at index 0. expected 4, actual 6" in r for r in stats["recompile_reasons"]), stats
    assert "recompiled: " in eagertpu.metrics_report() and "expected 4, actual 6" in eagertpu.metrics_report()


def lookup(i, w):
    y = F.embedding(i, w)  # the line a bad index is blamed on
    return (y * 2).sum()


def test_bad_index_in_a_compiled_graph_names_the_op_and_the_users_line(mode):
    w = torch.randn(10, 4)
    compiled = torch.compile(lookup, backend="tpu")
    before = counts()
    for ids in ([1, 2], [0, 9], [5, 5]):
        ok = torch.tensor(ids)
        assert_same(compiled(tpu(ok), tpu(w)), lookup(ok, w))
    if mode != "debug":
        # Its index checks are in its program's flag: called directly too.
        assert since(before)["direct"] == 2
    # An eager index op's check pending beside the graph's: both are read,
    # the graph's flag blames the graph's op.
    eager = F.embedding(tpu(torch.tensor([3])), tpu(w))
    with pytest.raises(RuntimeError) as info:
        compiled(tpu(torch.tensor([1, 12])), tpu(w)).item()
    message = str(info.value)
    assert "index" in message and "out of range" in message and "size 10" in message, message
    line = lookup.__code__.co_firstlineno + 1
    assert f"{__file__}:{line}" in message, message
    # The process goes on: the next call and the next op are right.
    assert_same(eager, w[3:4])
    other = torch.tensor([3, 4])
    assert_same(compiled(tpu(other), tpu(w)), lookup(other, w))
    next_op_works()


def test_default_backend_on_tpu_names_the_backend_to_use():
    with pytest.raises(Exception) as info:
        torch.compile(lambda x: x * 2 + 1)(torch.ones(3, device="tpu"))
    assert 'backend="tpu"' in str(info.value), str(info.value)
    next_op_works()


def test_generate_with_a_static_cache_compiled_by_hugging_face(mode):
    from test_generate import generate, tiny_llama
    from transformers import CompileConfig

    model, prompt = tiny_llama()
    expected = generate(model, prompt, 6)
    on_tpu = copy.deepcopy(model).to("tpu")
    before = counts()
    got = on_tpu.generate(
        prompt.to("tpu"),
        attention_mask=torch.ones_like(prompt).to("tpu"),
        max_new_tokens=6,
        do_sample=False,
        cache_implementation="static",
        compile_config=CompileConfig(backend="tpu"),
    )
    assert torch.equal(got.cpu(), expected)
    if mode != "debug":
        # Hugging Face compiles the decode step: every token after the first.
        assert since(before)["graph_calls"] >= 4


DISK_CACHE_RUN = """
    import json, torch, eagertpu
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 2)).to("tpu")
    compiled = torch.compile(model, backend="tpu")
    x = torch.randn(4, 8, device="tpu", requires_grad=True)
    out = compiled(x)
    out.sum().backward()
    m = eagertpu.metrics()
    print(json.dumps({"compiles": m["compiles"], "disk_hits": m["disk_hits"],
                      "graph_calls": m["compiled_graph_calls"], "out": out.detach().cpu().tolist()}))
"""


def test_a_second_process_loads_compiled_graphs_from_the_disk_cache(tmp_path):
    import json

    runs = []
    for _ in range(2):
        r = run_python(DISK_CACHE_RUN, EAGERTPU_CACHE_DIR=str(tmp_path), EAGERTPU_MODE="fused")
        assert r.returncode == 0, r.stderr
        runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    first, second = runs
    assert first["compiles"] > 0 and first["graph_calls"] == 2
    assert second["compiles"] == 0, second
    assert second["disk_hits"] > 0 and second["graph_calls"] == 2
    assert second["out"] == first["out"]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
