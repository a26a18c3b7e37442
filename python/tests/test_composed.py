"""ATen ops made of other tpu kernels (python/csrc/ops_composed.cpp):
norms, round to decimals, aminmax, renorm, addbmm, angle, scatter with a
reduce, batch norm with running-stat updates, max unpooling, 2-d NLL loss,
channel shuffle, masked_scatter, histc, histogram and bincount, against PyTorch CPU in every
mode, with gradients where PyTorch has them."""

import copy

import pytest
import torch
import torch.nn.functional as F
from helpers import assert_same, check, check_grad, next_op_works, rand

pytestmark = pytest.mark.usefixtures("mode", "no_fallbacks")


def test_norm_and_what_uses_it():
    x, y = rand(3, 4), rand(3, 4)
    for p in [None, 1, 2, 3.5, float("inf")]:
        check(lambda x: torch.norm(x, p=p, dim=1), x)
        check(lambda x: torch.norm(x, p=p, dim=(0, 1), keepdim=True), x)
    check(lambda x: torch.norm(x, p=2, dim=1, dtype=torch.float64), x)
    check(torch.dist, x, y)
    check(lambda x, y: F.pairwise_distance(x, y, p=1.5), x, y)
    check_grad(lambda x, y: F.triplet_margin_loss(x, y, y.flip(0)), x, y)
    check_grad(lambda x: torch.norm(x, p=3, dim=0), x)


@pytest.mark.parametrize("decimals", [0, 2, -1])
def test_round_to_decimals(decimals):
    check(lambda x: torch.round(x, decimals=decimals), rand(5, 7) * 100)
    check(lambda x: torch.round(x, decimals=decimals), rand(6, dtype=torch.float64) * 1000)


def test_aminmax_renorm_addbmm_angle():
    x = rand(3, 5)
    check(torch.aminmax, x)
    check(lambda x: torch.aminmax(x, dim=1, keepdim=True), x)
    check(lambda x: torch.aminmax(x, dim=0), rand(4, 2, dtype=torch.int64))
    check(lambda x: torch.renorm(x, p=2, dim=0, maxnorm=1.0), x)
    check(lambda x: torch.renorm(x, p=1, dim=1, maxnorm=0.5), x)
    check_grad(lambda x: torch.renorm(x, p=2, dim=0, maxnorm=1.0), x)
    m, b1, b2 = rand(3, 4), rand(5, 3, 2), rand(5, 2, 4)
    check(torch.addbmm, m, b1, b2)
    check(lambda m, a, b: torch.addbmm(m, a, b, beta=0.5, alpha=2.0), m, b1, b2)
    check(lambda m, a, b: torch.addbmm(m, a, b, beta=0), torch.full((3, 4), float("nan")), b1, b2)
    check_grad(torch.addbmm, m, b1, b2)
    v = torch.tensor([-2.0, 0.0, 3.0, float("nan"), -0.5])
    check(torch.angle, v)
    check(torch.angle, torch.tensor([-3, 0, 4]))


@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_scatter_with_reduce(reduce):
    x = rand(3, 5)
    index = torch.tensor([[0, 1, 2, 0, 0], [2, 0, 0, 1, 2]])
    check(lambda x, i, s: x.scatter(0, i, s, reduce=reduce), x, index, rand(2, 5))
    check(lambda x, i: x.scatter(0, i, 1.5, reduce=reduce), x, index)
    check(lambda x, i, s: x.scatter_(1, i, s, reduce=reduce), x, index[:, :3], rand(2, 3))


def test_batch_norm_with_update():
    x, w, b = rand(4, 3, 5), rand(3), rand(3)
    mean, var = rand(3), rand(3).abs() + 0.5
    check(lambda x, w, b, m, v: torch.ops.aten._batch_norm_with_update(x, w, b, m, v, 0.1, 1e-5)[:3], x, w, b, mean, var)
    check_grad(lambda x, w, b: torch.ops.aten._batch_norm_with_update(x, w, b, torch.zeros(3, device=x.device),
                                                                      torch.ones(3, device=x.device), 0.1, 1e-5)[0],
               x, w, b)


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_max_unpool_inverts_max_pool(dims):
    pool = [F.max_pool1d, F.max_pool2d, F.max_pool3d][dims - 1]
    unpool = [F.max_unpool1d, F.max_unpool2d, F.max_unpool3d][dims - 1]
    x = rand(2, 3, *([6] * dims))
    values, indices = pool(x, 2, return_indices=True)
    check(lambda v, i: unpool(v, i, 2), values, indices)
    check(lambda v, i: unpool(v, i, 2, output_size=[7] * dims), values, indices)
    check(lambda v, i: unpool(v, i, 2), values[0], indices[0])  # no batch dim
    check_grad(lambda v: unpool(v, indices.to(v.device), 2), values)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_over_images(reduction):
    logits = rand(2, 4, 3, 5)
    target = torch.randint(0, 4, (2, 3, 5))
    target[0, 0, 0] = -100
    check_grad(lambda x: F.cross_entropy(x, target.to(x.device), reduction=reduction), logits)
    weight = rand(4).abs()
    check_grad(lambda x: F.nll_loss(F.log_softmax(x, 1), target.to(x.device), weight=weight.to(x.device),
                                    reduction=reduction), logits)


def test_channel_shuffle_masked_scatter_histc():
    x = rand(2, 6, 3, 2)
    check(lambda x: F.channel_shuffle(x, 3), x)
    check(lambda x: F.channel_shuffle(x, 2), rand(1, 4, 5))
    with pytest.raises(RuntimeError, match="divisible by groups"):
        F.channel_shuffle(x.to("tpu"), 4)
    mask = rand(3, 4) > 0
    check(lambda x, m, s: x.masked_scatter(m, s), rand(3, 4), mask, rand(20))
    check(lambda x, m, s: x.masked_scatter_(m, s), rand(3, 4), mask[0], rand(12))  # the mask broadcasts
    check_grad(lambda x, s: x.masked_scatter(mask.to(x.device), s), rand(3, 4), rand(12))
    v = rand(50)
    check(lambda v: torch.histc(v, bins=7), v)
    check(lambda v: torch.histc(v, bins=4, min=-1, max=1), v)
    check(lambda v: torch.histc(v, bins=3, min=2, max=2), torch.tensor([1.5, 2.0, 2.5, 3.5]))
    check(lambda v: torch.histc(v, bins=5), torch.full((4,), 3.0))
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        torch.histc(v.to("tpu"), bins=3, min=1, max=0)
    next_op_works()


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, float("inf")])
def test_cdist_and_pdist_with_gradients(p):
    x1, x2 = rand(2, 5, 3), rand(2, 4, 3)
    x2[0, 1] = x1[0, 2]  # a zero distance: its gradient is 0
    check(lambda a, b: torch.cdist(a, b, p=p), x1, x2, rtol=1e-4, atol=1e-5)
    check(lambda a, b: torch.cdist(a, b, p=p), x1[0], x2[0], rtol=1e-4, atol=1e-5)
    check(lambda x: F.pdist(x, p=p), x1[1], rtol=1e-4, atol=1e-5)
    if p != 0.0:
        check_grad(lambda a, b: torch.cdist(a, b, p=p), x1, x2, rtol=1e-3, atol=1e-4)
        check_grad(lambda x: F.pdist(x, p=p), x1[1], rtol=1e-3, atol=1e-4)


def test_nonzero_static_and_combinations():
    x = torch.tensor([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]])
    for size in [0, 2, 3, 5]:
        check(lambda x: torch.nonzero_static(x, size=size), x)
        check(lambda x: torch.nonzero_static(x, size=size, fill_value=7), x)
    check(lambda x: torch.nonzero_static(x, size=4), rand(2, 3, 4) > 0)
    check(lambda x: torch.nonzero_static(x, size=3), torch.zeros(5))
    check(lambda x: torch.combinations(x, r=2), rand(5))
    check(lambda x: torch.combinations(x, r=3, with_replacement=True), rand(4))


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_multi_margin_loss_with_gradients(p, reduction):
    x, y = rand(6, 4), torch.tensor([0, 3, 1, 1, 2, 0])
    w = rand(4).abs()
    check_grad(lambda x: F.multi_margin_loss(x, y.to(x.device), p=p, margin=0.7, reduction=reduction), x)
    check_grad(lambda x: F.multi_margin_loss(x, y.to(x.device), p=p, weight=w.to(x.device), reduction=reduction), x)
    check_grad(lambda x: F.multi_margin_loss(x, torch.tensor(2, device=x.device), p=p, reduction=reduction), rand(4))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_unique_and_unique_consecutive(dtype):
    x = torch.tensor([[3, 1, 1], [2, 3, 3], [0, 0, 5]]).to(dtype)
    for sorted_ in [True, False]:
        check(lambda x: torch.unique(x, sorted=sorted_), x)
        check(lambda x: torch.unique(x, sorted=sorted_, return_inverse=True, return_counts=True), x)
    check(lambda x: torch.unique(x, return_counts=True), torch.tensor([], dtype=dtype))
    check(lambda x: torch.unique_consecutive(x), x)
    check(lambda x: torch.unique_consecutive(x, return_inverse=True, return_counts=True), x)
    rows = torch.tensor([[1, 2], [1, 2], [3, 4], [1, 2]]).to(dtype)
    check(lambda x: torch.unique_consecutive(x, return_inverse=True, return_counts=True, dim=0), rows)
    check(lambda x: torch.unique_consecutive(x, return_counts=True, dim=1), rows.t())


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_unique_along_a_dim_sorts_slices_lexicographically(dtype):
    g = torch.Generator().manual_seed(3)
    x = torch.randint(0, 3, (40, 3, 2), generator=g).to(dtype)
    for dim in [0, 1, -1]:
        check(lambda x: torch.unique(x, dim=dim), x)
        check(lambda x: torch.unique(x, dim=dim, return_inverse=True, return_counts=True), x)
    # Edge lists, the common case: distinct (src, dst) pairs.
    edges = torch.tensor([[2, 0], [1, 5], [2, 0], [0, 7], [1, 5], [1, 4]]).to(dtype)
    check(lambda x: torch.unique(x, dim=0, return_inverse=True, return_counts=True), edges)
    check(lambda x: torch.unique(x, dim=0, return_counts=True), torch.empty(0, 3, dtype=dtype))


def test_unique_along_a_dim_names_empty_dims_as_the_cpu():
    for shape, words in [((3, 0), "aren't selected"), ((0, 0), "more than one")]:
        with pytest.raises(RuntimeError, match=words):
            torch.unique(torch.empty(shape, device="tpu"), dim=0)
    next_op_works()


def test_unique_of_bools_and_nans():
    check(lambda x: torch.unique(x, return_inverse=True, return_counts=True), torch.tensor([True, False, True]))
    # NaNs are each their own value, as on the CPU.
    check(lambda x: torch.unique(x, return_counts=True), torch.tensor([float("nan"), 1.0, float("nan"), 1.0]))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_multilabel_margin_loss_with_gradients(reduction):
    x = rand(3, 5)
    y = torch.tensor([[3, 0, -1, 1, 1], [4, 1, 2, 0, 3], [-1, 2, 2, 2, 2]])  # the labels end at the first -1
    check(lambda x, y: torch.ops.aten.multilabel_margin_loss_forward(x, y, ["none", "mean", "sum"].index(reduction)),
          x, y)
    check_grad(lambda x: F.multilabel_margin_loss(x, y.to(x.device), reduction=reduction), x)
    check_grad(lambda x: F.multilabel_margin_loss(x, y[0].to(x.device), reduction=reduction), x[0])


def test_histogram_matches_the_cpu():
    x = rand(50)
    x[3] = 1e6  # far out: outside a given range, and widens the default one
    edges = torch.tensor([-2.0, -0.5, 0.0, 0.25, 3.0])
    for kwargs in [dict(bins=7), dict(bins=4, range=(-1.0, 1.0)), dict(bins=5, density=True)]:
        check(lambda t, **kw: torch.histogram(t, **kw), x, **kwargs)
    check(lambda t, w: torch.histogram(t, bins=3, weight=w), x, rand(50).abs())
    check(lambda t, e: torch.histogram(t, e), x, edges)
    # Elements exactly on edges (the last bin is closed), one value only.
    on_edges = torch.tensor([-1.0, 0.0, 0.5, 1.0, 1.0])
    check(lambda t: torch.histogram(t, bins=4, range=(-1.0, 1.0)), on_edges)
    check(lambda t: torch.histogram(t, bins=3), torch.full((4,), 2.0))
    # Two and three dims, bin counts or edges per dim, weights, density.
    p = rand(40, 2)
    check(lambda t: torch.histogramdd(t, bins=[3, 4]), p)
    check(lambda t, w: torch.histogramdd(t, bins=[2, 3], weight=w, density=True), p, rand(40).abs())
    check(lambda t: torch.histogramdd(t, bins=[2, 2, 2], range=[-1.0, 1.0, -1.0, 1.0, 0.0, 1.0]), rand(6, 5, 3))
    check(lambda t, a, b: torch.histogramdd(t, [a, b]), p, torch.tensor([-1.0, 0.0, 2.0]),
          torch.tensor([-3.0, -1.0, 0.5, 1.0]))
    with pytest.raises(RuntimeError, match="not finite"):
        torch.histogram(torch.tensor([1.0, float("nan")], device="tpu"), bins=3)
    next_op_works()


def test_bincount_matches_the_cpu():
    x = torch.randint(0, 12, (200,))
    check(torch.bincount, x)
    check(torch.bincount, x.to(torch.int32))
    check(lambda t: torch.bincount(t, minlength=20), x)
    check(lambda t: torch.bincount(t, minlength=3), torch.tensor([], dtype=torch.long))
    for w in [rand(200), rand(200, dtype=torch.float64), rand(200).half(), torch.randint(0, 5, (200,))]:
        check(torch.bincount, x, w)  # int64 counts; float32 for float32 weights, else float64
    for bad in [torch.tensor([-1, 2]), torch.tensor([[1]]), torch.tensor([1.0])]:
        with pytest.raises(RuntimeError, match="1-d non-negative integral"):
            torch.bincount(bad.to("tpu"))
    with pytest.raises(RuntimeError, match="same length"):
        torch.bincount(x.to("tpu"), rand(3).to("tpu"))
    next_op_works()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_frexp_matches_the_cpu(dtype):
    x = torch.tensor([0.0, -0.0, 1.0, 0.5, 0.75, -3.0, 1024.0, 1e-30, 3e38, -1e-20, 7.0 - 2**-20,
                      float("inf"), -float("inf"), float("nan")]).to(dtype)
    x = torch.cat([x, rand(40, dtype=dtype) * 1000])
    check(torch.frexp, x)
    if dtype == torch.float64:
        check(torch.frexp, torch.tensor([1e300, -2.0**-1000, 2.0**1023], dtype=dtype))
    with pytest.raises(RuntimeError, match="floating-point"):
        torch.frexp(torch.ones(2, dtype=torch.int64, device="tpu"))


@pytest.mark.parametrize("causal", [False, True])
def test_cpu_flash_attention_entry_matches_the_cpu_with_gradients(causal):
    op = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    q, k, v = rand(2, 3, 4, 8), rand(2, 3, 6, 8), rand(2, 3, 6, 8)
    check(lambda q, k, v: op(q, k, v, is_causal=causal), q, k, v, rtol=1e-4, atol=1e-5)
    check(lambda q, k, v: op(q, k, v, scale=0.3), q, k, v, rtol=1e-4, atol=1e-5)
    check(lambda q, k, v, m: op(q, k, v, attn_mask=m), q, k, v, rand(4, 6), rtol=1e-4, atol=1e-5)
    check_grad(lambda q, k, v: op(q, k, v, is_causal=causal)[0], q, k, v, rtol=1e-4, atol=1e-5)
    mask = rand(4, 6)
    check_grad(lambda q, k, v: op(q, k, v, attn_mask=mask.to(q.device))[0], q, k, v, rtol=1e-4, atol=1e-5)
    # As the CPU: a mask of another dtype than the query's is refused.
    with pytest.raises(RuntimeError, match="same data type as query"):
        op(q.to("tpu"), k.to("tpu"), v.to("tpu"), attn_mask=torch.ones(4, 6, dtype=torch.bool, device="tpu"))


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
def test_segment_reduce_matches_the_cpu_with_gradients(reduce):
    data = rand(6, 3)
    data[4, 0] = 0.0  # a zero in a segment (prod's gradient)
    data[3, 1] = data[2, 1]  # a tie (max/min share the gradient)
    lengths = torch.tensor([2, 0, 4])
    for kwargs in [dict(), dict(initial=0.5)]:
        check(lambda d: torch.segment_reduce(d, reduce, lengths=lengths.to(d.device), **kwargs), data)
        check(lambda d: torch.segment_reduce(d, reduce, offsets=torch.tensor([0, 2, 2, 6], device=d.device),
                                             **kwargs), data)
        check_grad(lambda d: torch.segment_reduce(d, reduce, lengths=lengths.to(d.device), **kwargs), data,
                   rtol=1e-4, atol=1e-5)
    # Along axis 1, lengths per row.
    batched = torch.tensor([[1, 2], [3, 0]])
    check(lambda d: torch.segment_reduce(d, reduce, lengths=batched.to(d.device), axis=1), rand(2, 3, 2))
    with pytest.raises(RuntimeError, match="sum to data.size"):
        torch.segment_reduce(data.to("tpu"), reduce, lengths=torch.tensor([1, 1], device="tpu"))


@pytest.mark.parametrize("reduction", ["sum", "mean", "max"])
def test_embedding_bag_matches_the_cpu_with_gradients(reduction):
    weight = rand(10, 4)
    indices = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0])
    offsets = torch.tensor([0, 4, 4, 6])  # an empty bag
    # include_last_offset: the offsets end with the number of indices (CSR).
    csr = torch.tensor([0, 4, 4, 6, 9])
    for o, kwargs in [(offsets, dict()), (offsets, dict(padding_idx=2)), (csr, dict(include_last_offset=True))]:
        check(lambda w: F.embedding_bag(indices.to(w.device), w, o.to(w.device), mode=reduction, **kwargs), weight)
        check_grad(lambda w: F.embedding_bag(indices.to(w.device), w, o.to(w.device), mode=reduction, **kwargs),
                   weight, rtol=1e-4, atol=1e-5)
    # 2-d input (bags of equal size), and per-sample weights (sum only).
    check(lambda w: F.embedding_bag(torch.tensor([[1, 2, 3], [4, 4, 0]], device=w.device), w, mode=reduction), weight)
    if reduction == "sum":
        psw = rand(9)
        check_grad(lambda w, p: F.embedding_bag(indices.to(w.device), w, offsets.to(w.device), mode="sum",
                                                per_sample_weights=p), weight, psw, rtol=1e-4, atol=1e-5)
        check_grad(lambda w: F.embedding_bag(indices.to(w.device), w, offsets.to(w.device), mode="sum",
                                             scale_grad_by_freq=True), weight, rtol=1e-4, atol=1e-5)
    bag = torch.nn.EmbeddingBag(10, 4, mode=reduction)
    tpu_bag = copy.deepcopy(bag).to("tpu")
    assert_same(tpu_bag(indices.to("tpu"), offsets.to("tpu")), bag(indices, offsets), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("affine", [True, False])
def test_group_norm_gradients_match_the_cpu(affine):
    norm = torch.nn.GroupNorm(2, 6, affine=affine)
    if affine:
        with torch.no_grad():
            norm.weight.copy_(rand(6))
            norm.bias.copy_(rand(6))
    x = rand(3, 6, 4, 5)
    tpu_norm = copy.deepcopy(norm).to("tpu")
    xc, xt = x.clone().requires_grad_(), x.to("tpu").requires_grad_()
    g = rand(3, 6, 4, 5)
    norm(xc).backward(g)
    tpu_norm(xt).backward(g.to("tpu"))
    assert_same(xt.grad, xc.grad, rtol=1e-4, atol=1e-5)
    if affine:
        assert_same(tpu_norm.weight.grad, norm.weight.grad, rtol=1e-4, atol=1e-5)
        assert_same(tpu_norm.bias.grad, norm.bias.grad, rtol=1e-4, atol=1e-5)
    check_grad(lambda t: F.group_norm(t, 3), rand(2, 6, 7), rtol=1e-4, atol=1e-5)


def test_tensor_unfold_and_unique_backwards_match_the_cpu():
    for dim, size, step in [(0, 2, 1), (1, 3, 2), (-1, 2, 3), (1, 5, 5)]:
        check_grad(lambda t: t.unfold(dim, size, step), rand(6, 7), rtol=1e-5, atol=1e-6)
    check_grad(lambda t: t.unfold(0, 1, 1), torch.tensor(2.5), rtol=1e-5, atol=1e-6)
    x = torch.tensor([3, 1, 3, 2, 1])
    check(lambda t: torch._unique(t, sorted=True, return_inverse=True), x)
    check_grad(lambda t: t.index_fill(0, torch.tensor([1, 1, 3], device=t.device), 2.0), rand(5, 3))
