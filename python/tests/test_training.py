"""Unchanged PyTorch training loops on tpu: 20 steps in every mode, losses
matching the same loop on the CPU, and no op falling back to the CPU."""

import copy
import json

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import eagertpu
from helpers import run_python

pytestmark = pytest.mark.usefixtures("mode", "no_fallbacks")

STEPS = 20


def train(model, make_opt, batches, device, loss_fn):
    model = copy.deepcopy(model).to(device)
    opt = make_opt(model.parameters())
    losses = []
    for x, y in batches:
        opt.zero_grad()
        loss = loss_fn(model(x.to(device)), y.to(device))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, model


def compare(model, make_opt, batches, loss_fn=F.cross_entropy, rtol=1e-3, atol=1e-4):
    cpu, cpu_model = train(model, make_opt, batches, "cpu", loss_fn)
    tpu, tpu_model = train(model, make_opt, batches, "tpu", loss_fn)
    assert cpu[-1] < cpu[0], "the CPU run does not learn: a useless test"
    torch.testing.assert_close(torch.tensor(tpu), torch.tensor(cpu), rtol=rtol, atol=atol)
    for (name, p), q in zip(tpu_model.named_parameters(), cpu_model.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=rtol * 10, atol=atol * 10, msg=lambda m: f"{name}: {m}")


def mlp():
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 4))


def classification(n_in, classes, batch=32):
    """One batch, seen every step, labelled by a random linear teacher."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(batch, n_in, generator=g)
    y = (x @ torch.randn(n_in, classes, generator=g)).argmax(1)
    return [(x, y)] * STEPS


def test_mlp_sgd():
    compare(mlp(), lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), classification(16, 4))


def test_mlp_adamw():
    compare(mlp(), lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1), classification(16, 4))


def test_mlp_adamw_foreach_off_and_amsgrad():
    compare(mlp(), lambda p: torch.optim.AdamW(p, lr=1e-2, foreach=False, amsgrad=True), classification(16, 4))


def test_mlp_regression_with_clipping_and_scheduler():
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    g = torch.Generator().manual_seed(2)
    x = torch.randn(32, 8, generator=g)
    batches = [(x, x.sum(1, keepdim=True).sin())] * STEPS

    def make_opt(params):
        return torch.optim.Adam(params, lr=1e-2)

    def loss_fn(out, y):
        return F.mse_loss(out, y)

    compare(model, make_opt, batches, loss_fn)


class Encoder(nn.Module):
    def __init__(self, vocab=40, width=32, classes=5):
        super().__init__()
        self.embed = nn.Embedding(vocab, width, padding_idx=0)
        layer = nn.TransformerEncoderLayer(width, 4, 64, dropout=0.0, activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, classes)

    def forward(self, tokens):
        h = self.encoder(self.embed(tokens), src_key_padding_mask=tokens == 0)
        return self.head(self.norm(h).mean(1))


def test_transformer_encoder():
    g = torch.Generator().manual_seed(3)
    tokens = torch.randint(1, 40, (8, 10), generator=g)
    tokens[:, 7:] = 0  # padding
    batches = [(tokens, tokens[:, 0] % 5)] * STEPS
    compare(Encoder(), lambda p: torch.optim.AdamW(p, lr=3e-3), batches, rtol=2e-3, atol=2e-4)


class CausalLM(nn.Module):
    def __init__(self, vocab=32, width=32, seq=12):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.pos = nn.Parameter(torch.randn(seq, width) * 0.02)
        # No in-projection bias: the key bias's gradient is zero in exact
        # arithmetic (softmax ignores a per-row constant), so Adam would turn
        # rounding noise into full-size steps on both devices.
        self.attn = nn.MultiheadAttention(width, 4, batch_first=True, bias=False)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(approximate="tanh"), nn.Linear(4 * width, width))
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.embed.weight  # tied

    def forward(self, tokens):
        h = self.embed(tokens) + self.pos
        a = self.ln1(h)
        mask = torch.triu(torch.ones(tokens.shape[1], tokens.shape[1], dtype=torch.bool, device=h.device), 1)
        h = h + self.attn(a, a, a, attn_mask=mask, need_weights=False)[0]
        h = h + self.mlp(self.ln2(h))
        return self.head(h)


def test_causal_lm_with_tied_weights():
    g = torch.Generator().manual_seed(4)
    t = torch.randint(0, 32, (4, 13), generator=g)
    batches = [(t[:, :-1], t[:, 1:])] * STEPS

    def loss_fn(logits, y):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

    compare(CausalLM(), lambda p: torch.optim.AdamW(p, lr=3e-3), batches, loss_fn, rtol=2e-3, atol=2e-4)


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(16 * 4 * 4, 10))

    def forward(self, x):
        return self.head(self.features(x))


def test_small_cnn_with_batch_norm():
    g = torch.Generator().manual_seed(5)
    x = torch.randn(16, 1, 16, 16, generator=g)
    y = torch.randint(0, 10, (16,), generator=g)
    model = SmallCNN()
    compare(model, lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9), [(x, y)] * STEPS, rtol=2e-3, atol=2e-4)
    # the running statistics were updated the same way
    cpu, cpu_model = train(model, lambda p: torch.optim.SGD(p, lr=0.05), [(x, y)] * 3, "cpu", F.cross_entropy)
    tpu, tpu_model = train(model, lambda p: torch.optim.SGD(p, lr=0.05), [(x, y)] * 3, "tpu", F.cross_entropy)
    bn_cpu, bn_tpu = cpu_model.features[1], tpu_model.features[1]
    torch.testing.assert_close(bn_tpu.running_mean.cpu(), bn_cpu.running_mean, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(bn_tpu.running_var.cpu(), bn_cpu.running_var, rtol=1e-4, atol=1e-5)
    assert bn_tpu.num_batches_tracked.item() == 3
    tpu_model.eval()
    cpu_model.eval()
    torch.testing.assert_close(tpu_model(x.to("tpu")).detach().cpu(), cpu_model(x).detach(), rtol=1e-3, atol=1e-4)


def test_dropout_model_learns():
    """Dropout draws differ from the CPU's generator, so only learning is compared."""
    g = torch.Generator().manual_seed(6)
    x = torch.randn(64, 16, generator=g)
    y = (x @ torch.randn(16, 4, generator=g)).argmax(1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 4)).to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(40):
        opt.zero_grad()
        loss = F.cross_entropy(model(x.to("tpu")), y.to("tpu"))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] / 3, losses


def adamw_loop(device, steps, read_every, snapshot_at=None):
    """A 16-32-4 MLP trained with AdamW on `device`, the loss read every
    `read_every` steps. Compiles queued are waited for before the step before
    `snapshot_at` (which then runs the programs ready, leaving replay plans),
    and the metrics taken before step `snapshot_at` and after the last step
    (before the final sync). Returns
    the losses read, the model and the snapshots."""
    torch.manual_seed(0)
    base = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    x, y = classification(16, 4)[0]
    model = base.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    xd, yd = x.to(device), y.to(device)
    logged, snapshots = [], []
    for i in range(steps):
        if snapshot_at is not None and i == snapshot_at - 1:
            eagertpu.wait_for_compiles()
        if i == snapshot_at:
            snapshots.append(eagertpu.metrics())
        opt.zero_grad()
        loss = F.cross_entropy(model(xd), yd)
        loss.backward()
        opt.step()
        if i % read_every == read_every - 1:
            logged.append(loss.item())
    # The last snapshot is what the loop launched: a loop reading its loss
    # every step is cut where the loss is computed, so the last step's rest
    # is the final sync's chunk, seen once.
    end = eagertpu.metrics()
    eagertpu.sync()
    return logged, model, snapshots + [end]


def test_adamw_logging_every_10_steps_is_cut_at_its_period_and_settles():
    """AdamW's step size changes at every step (bias correction), a lifted
    scalar: the fused loop's cuts must not depend on it. Read every 10 steps,
    the loop is cut at its period (not by the window's op limit), compiles
    nothing once warm, and trains as on the CPU."""
    if eagertpu.get_mode() != "fused":
        pytest.skip("cuts are fused mode's")
    want, cpu_model, _ = adamw_loop("cpu", 80, 10)
    got, tpu_model, (steady, end) = adamw_loop("tpu", 80, 10, snapshot_at=40)
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=1e-3, atol=1e-4)
    for p, q in zip(tpu_model.parameters(), cpu_model.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-2, atol=1e-3)
    cuts = {k: end["chunks"][k] - steady["chunks"][k] for k in end["chunks"]}
    assert cuts["period"] >= 10 and cuts["window_ops"] == 0, cuts
    assert end["chunk_keys"] == steady["chunk_keys"], (steady["chunk_keys"], end["chunk_keys"])
    assert end["compiles"] == steady["compiles"], (steady["compiles"], end["compiles"])


def test_a_settled_training_loop_is_replayed_and_trains_as_on_the_cpu():
    """Once an AdamW loop (loss read every step) settles, each of its chunks
    matches the plan its last occurrence left, op for op, and runs that
    program without a graph being built or looked up (trace-guarded replay);
    the losses are the CPU's, and the report says so."""
    if eagertpu.get_mode() != "fused":
        pytest.skip("replay is fused mode's")
    want, _, _ = adamw_loop("cpu", 30, 1)
    got, _, (settled, end) = adamw_loop("tpu", 30, 1, snapshot_at=11)
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=1e-3, atol=1e-4)
    delta = {k: end[k] - settled[k] for k in ("replayed_chunks", "replayed_ops", "replay_misses", "executions")}
    assert delta["replayed_chunks"] == delta["executions"] > 0, delta
    assert delta["replayed_ops"] >= 19 * 50 and delta["replay_misses"] == 0, delta
    assert "replayed" in eagertpu.metrics_report()


# An AdamW loop, run in child processes on tpu and here on the CPU.
SMALL_ADAMW_LOOP = """
import torch, torch.nn as nn, torch.nn.functional as F


def train(device):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(8, 64, generator=g).to(device), torch.randint(0, 10, (8,), generator=g).to(device)
    losses = []
    for _ in range(8):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach().cpu().flatten().tolist() for p in model.parameters()]
"""

DETERMINISTIC_CHILD = SMALL_ADAMW_LOOP + """
import json
import eagertpu
torch.use_deterministic_algorithms(SETTING == "on")
losses, weights = train("tpu")
print(json.dumps({"losses": losses, "weights": weights, "disk_hits": eagertpu.metrics()["disk_hits"]}))
"""


def deterministic_run(cache_dir, setting):
    proc = run_python(f"SETTING = {setting!r}\n" + DETERMINISTIC_CHILD, EAGERTPU_MODE="fused",
                      EAGERTPU_CACHE_DIR=str(cache_dir), EAGERTPU_LOG="error")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_deterministic_fused_training_gives_the_same_bits_with_a_cold_or_warm_cache(tmp_path):
    """A fused program may round differently from its ops run one by one (XLA
    contracts a multiply and an add of two ops into a fused multiply-add), so
    when a chunk is promoted can change a run's last bits: a cold cache
    compiles in the background, a warm one loads the program at first sight.
    With torch.use_deterministic_algorithms(True), promotion happens at the
    hot sighting whatever the cache has: a cold and a warm run give the same
    bits, and the same values as the CPU to rounding."""
    if eagertpu.get_mode() != "fused":
        pytest.skip("runs its own fused-mode processes")
    cold = deterministic_run(tmp_path / "cache", "on")
    warm = deterministic_run(tmp_path / "cache", "on")
    assert warm["disk_hits"] > 0, warm["disk_hits"]
    assert cold["losses"] == warm["losses"], (cold["losses"], warm["losses"])
    assert cold["weights"] == warm["weights"]
    loop = {}
    exec(SMALL_ADAMW_LOOP, loop)
    want, _ = loop["train"]("cpu")
    torch.testing.assert_close(torch.tensor(cold["losses"]), torch.tensor(want), rtol=1e-4, atol=1e-5)
