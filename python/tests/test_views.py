"""Views and writes through views behave exactly as on the CPU: every view
shares its base's storage, and an in-place op on a view changes the base."""

import pytest
import torch
from helpers import assert_same, check, rand

pytestmark = pytest.mark.usefixtures("mode")


def both(x):
    return x.clone(), x.to("tpu")


def same(a_tpu, a_cpu):
    assert_same(a_tpu, a_cpu)


@pytest.mark.usefixtures("no_fallbacks")
def test_slicing_assignment():
    c, t = both(rand(4, 6))
    for x in (c, t):
        x[1:3, ::2] = 7.0
        x[0] = x[3] * 2
        x[:, -1] += 1
        x[2, 1:4] = torch.arange(3.0).to(x.device)
    same(t, c)


@pytest.mark.usefixtures("no_fallbacks")
def test_assignment_from_cpu_into_a_tpu_view():
    c, t = both(rand(3, 4))
    src = rand(4)
    c[1] = src
    t[1] = src  # copy_ from the CPU into a view
    same(t, c)


@pytest.mark.usefixtures("no_fallbacks")
def test_transpose_contiguous_and_views_of_views():
    c, t = both(rand(3, 4, 5))
    for x in (c, t):
        y = x.transpose(0, 2).contiguous()
        assert y.is_contiguous()
    check(lambda x: x.transpose(0, 2).contiguous(), c)
    check(lambda x: x.permute(1, 2, 0)[1:, ::2].reshape(-1), c)
    check(lambda x: x[1].t()[2:, 1], c)
    check(lambda x: x.unsqueeze(1).expand(3, 2, 4, 5).contiguous(), c)
    check(lambda x: x.narrow(2, 1, 3).select(0, 2).flatten(), c)
    check(lambda x: x.view(3, 20)[:, 5:15].view(3, 2, 5), c)
    check(lambda x: torch.diagonal(x, dim1=1, dim2=2), c)
    check(lambda x: x.unfold(2, 2, 1), c)


@pytest.mark.usefixtures("no_fallbacks")
def test_in_place_on_views_changes_the_base():
    c, t = both(rand(4, 5))
    for x in (c, t):
        x.view(-1)[3:9].mul_(-2)
        x.t()[1].zero_()
        x[:, 2:4].add_(torch.ones(4, 2, device=x.device))
        x.diagonal().fill_(9)
        v = x[1:3]
        v[:, 0] = v[:, 1]
        x.unsqueeze(0)[0, 3].clamp_(max=0)
    same(t, c)


@pytest.mark.usefixtures("no_fallbacks")
def test_detach_and_data_share_storage():
    c, t = both(rand(3))
    for x in (c, t):
        x.requires_grad_(True)
        x.detach().mul_(2)
        x.data.add_(1)
    same(t.detach(), c.detach())
    p = torch.nn.Parameter(rand(2, 2).to("tpu"))
    new = rand(2, 2)
    p.data = new.to("tpu")
    assert_same(p.detach(), new)


@pytest.mark.usefixtures("no_fallbacks")
def test_resize_and_set():
    c, t = both(torch.arange(6.0))
    for x in (c, t):
        x.resize_(2, 3)
    same(t, c)
    for x in (c, t):
        x.resize_(4, 4)  # grows: the new elements are uninitialized, so only compare the old ones
    same(t.view(-1)[:6], c.view(-1)[:6])
    a, b = both(rand(5))
    s_c, s_t = torch.empty(0), torch.empty(0, device="tpu")
    s_c.set_(a)
    s_t.set_(b)
    same(s_t, s_c)
    s_t.add_(1)  # shares b's storage now
    same(b, a + 1)
    s_t.set_(b.untyped_storage(), 1, (2, 2), (1, 2))
    same(s_t, (a + 1).as_strided((2, 2), (1, 2), 1))


@pytest.mark.usefixtures("no_fallbacks")
def test_advanced_indexing():
    x = rand(5, 6, 7)
    i, j = torch.tensor([0, 4, -1, 2]), torch.tensor([[1, 2], [4, 0]])
    check(lambda x, i: x[i], x, i)
    check(lambda x, i: x[:, i], x, i)
    check(lambda x, i, j: x[i[:2], :, j[0]], x, i, j)  # not adjacent: the index dims go first
    check(lambda x, j: x[j, j], x, j)
    check(lambda x, j: x[1:, j], x, j)
    check(lambda x, i: x[i.cpu()], x, i)  # CPU indices are allowed, as with CUDA


@pytest.mark.usefixtures("no_fallbacks")
def test_index_put_and_index_add():
    x = rand(5, 6)
    i = torch.tensor([0, 3, 3, -1])
    check(lambda x, i: x.index_put_((i,), torch.tensor(2.0).to(x.device)), x, i)
    check(lambda x, i, v: x.index_put((i, i), v, accumulate=True), x, i, rand(4))
    check(lambda x, i, v: x.index_put_((i[:2],), v), x, i, rand(2, 6))
    check(lambda x, i, v: x.index_add(1, i.abs(), v, alpha=2), x, i, rand(5, 4))

    def setitem(x, i):
        x[:, i[:2]] = -1.0
        return x

    check(setitem, x, i)


@pytest.mark.usefixtures("no_fallbacks")
def test_boolean_masks_sync_with_the_host():
    import eagertpu

    x = rand(4, 5)
    before = sum(eagertpu.host_syncs().values())
    check(lambda x: x[x > 0], x)

    def setmask(x):
        x[x < 0] = 0.0
        return x

    check(setmask, x)
    check(lambda x: torch.masked_select(x, x > 0.5), x)
    check(lambda x: torch.nonzero(x > 0), x)
    check(lambda x: x[:, x[0] > 0], x)
    assert sum(eagertpu.host_syncs().values()) > before  # data-dependent shapes read the mask, as on CUDA
    assert torch.equal(x.to("tpu"), x.to("tpu").clone()) and not torch.equal(x.to("tpu"), x.to("tpu") + 1)


@pytest.mark.usefixtures("no_fallbacks")
def test_a_whole_tensor_read_in_its_own_shape_records_no_view_op():
    import eagertpu

    a, b = rand(4, 4), rand(4, 4)
    ta, tb = a.to("tpu"), b.to("tpu")
    before = eagertpu.metrics()["ops_recorded"]
    out = ta + tb
    assert eagertpu.metrics()["ops_recorded"] - before == 1, "a + b of 4x4 tensors is one runtime op"
    assert_same(out, a + b)
    # The same storage read in other shapes, partly written, then whole again.
    c, t = (a + b), out
    for x in (c, t):
        flat = x.view(16)
        flat[3:7] = 2.0
        x.view(2, 8)[1].mul_(3)
        x.t()[0].add_(1)
    same(t, c)
    same(t.view(8, 2)[::2], c.view(8, 2)[::2])
    same(t.view(torch.int32), c.view(torch.int32))
    for x in (c, t):
        x.resize_(20)
    same(t[:16], c[:16])


@pytest.mark.usefixtures("no_fallbacks")
def test_a_view_read_records_the_same_ops_whatever_the_cuts_and_a_transpose_is_one_op(mode):
    import eagertpu

    def recorded(fn):
        before = eagertpu.metrics()["ops_recorded"]
        out = fn()
        return out, eagertpu.metrics()["ops_recorded"] - before

    # A bias gradient: written as a [1, n] sum, read as [n] by each optimizer
    # op. Every read records its reshape, whether or not the trace was cut
    # since the last one: a step's ops must not depend on where the window
    # cut it, or a long step cut at the window's limit never repeats.
    g = rand(8, 5)
    summed = g.to("tpu").sum(0, keepdim=True)
    flat = summed.view(5)
    (doubled, tripled), uncut = recorded(lambda: (flat * 2, flat * 3))
    assert uncut == 4, uncut  # two reshapes, two products
    same(doubled, g.sum(0) * 2)
    same(tripled, g.sum(0) * 3)
    (doubled, _, tripled), cut = recorded(lambda: (flat * 2, eagertpu.sync(), flat * 3))
    assert cut == uncut, (cut, uncut)
    same(tripled, g.sum(0) * 3)
    summed.copy_(summed * 4)  # written as [1, 5] again
    same(flat, g.sum(0) * 4)
    same(summed, g.sum(0, keepdim=True) * 4)
    # A weight's transpose (a linear layer's w.t()) is one permute, not a
    # flattening and an as_strided; a strided view is not a permutation.
    w, m = rand(3, 4), rand(3, 2)
    tw, tm = w.to("tpu"), m.to("tpu")
    wt, ops = recorded(lambda: tw.t() @ tm)
    assert ops == 2, ops  # the permute and the product
    same(wt, w.t() @ m)
    same(tw.t()[::2], w.t()[::2])
    same(tw.view(2, 6).t(), w.view(2, 6).t())
    x = rand(2, 1, 3)
    same(x.to("tpu").permute(2, 1, 0) * 1, x.permute(2, 1, 0))


@pytest.mark.usefixtures("no_fallbacks")
def test_dtype_views_reinterpret_bits_on_the_device():
    import eagertpu

    c, t = both(rand(3, 4))
    t.add_(0)  # the storage now holds a float32 value on the device
    syncs = eagertpu.metrics()["host_syncs"]
    views = {}
    for dtype in (torch.uint8, torch.int8, torch.int16, torch.bfloat16, torch.int32, torch.int64, torch.float64):
        views[dtype] = (t.view(dtype) + 0, c.view(dtype) + 0) if dtype != torch.float64 else (t.view(dtype), c.view(dtype))
    ints = t.view(torch.uint8).to(torch.int32) * 2 + 1
    assert eagertpu.metrics()["host_syncs"] == syncs, "reading a storage as another dtype syncs nothing"
    for dtype, (a, b) in views.items():
        assert torch.equal(a.cpu().view(torch.uint8), b.view(torch.uint8)), dtype
    assert torch.equal(ints.cpu(), c.view(torch.uint8).to(torch.int32) * 2 + 1)
    # Writes through a dtype view change the floats bit for bit.
    for x in (c, t):
        x.view(torch.int32)[0, :2] = 0x3F800000  # 1.0f
        x.view(torch.uint8)[2, :4] = torch.tensor([0, 0, 0x20, 0x41], dtype=torch.uint8).to(x.device)  # 10.0f
    same(t, c)
    # bool <-> uint8 of 0/1 bytes.
    mask = torch.tensor([1, 0, 1, 1], dtype=torch.uint8)
    assert torch.equal(mask.to("tpu").view(torch.bool).cpu(), mask.view(torch.bool))
