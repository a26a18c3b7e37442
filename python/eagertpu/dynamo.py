"""torch.compile on tpu: the dynamo backend `"tpu"` (also `"eagertpu"`).

    model = torch.compile(model, backend="tpu")

Dynamo captures FX graphs; aot_autograd turns each into ATen forward and
backward graphs (functionalized: a graph mutates nothing, its updated inputs
come back as outputs that aot_autograd copies into place). Each graph call
then runs through the runtime's own op set, the same kernels, inference and
error messages as eager mode, as one chunk: the runtime opens a graph scope
(`eagertpu_graph_begin`), in which nothing but the graph's end cuts, and
compiles that chunk at once through the one compile cache (memory and disk: a
restarted process loads it and compiles nothing). The graph's later calls are
bound to its program by trace-guarded replay (no graph is built, hashed or
looked up again), or, when its first call allowed it (`GraphCall._capture`),
run that program directly on the inputs' buffers with no op dispatched
(`_backend.graph_run`). A direct call donates the buffers of the inputs
the graph updates (an optimizer's state, `_updated_inputs`) to their new
values when nothing else holds them. In debug mode a graph's ops run one by
one, as every op does there.

Graph breaks run in the current eager mode between graphs. Dynamo's own
counters (graph breaks, recompiles and their reasons) are in `dynamo_stats()`,
and `eagertpu.metrics()["compiled_graph_calls"]` counts graph calls.

The default backend (Inductor) has no code generator for this device:
`torch.compile(model)` on tpu tensors fails at its first call with an error
naming `backend="tpu"` (`_refuse_inductor`).
"""

import ctypes
import itertools
import linecache
import re
import sys
import threading

import torch

from . import _backend, _lib

_next_id = itertools.count(1)
_id_lock = threading.Lock()


def _new_id() -> int:
    with _id_lock:
        return next(_next_id)


def _device_index(example_inputs) -> int:
    """The tpu device a graph runs on: its first tpu input's (else the current one)."""
    for x in example_inputs:
        if isinstance(x, torch.Tensor) and x.device.type == "tpu":
            return x.device.index or 0
    return torch.tpu.current_device()


# The user's line of each statement of a graph's generated code:
# {(code filename, line): "file:line"}; the backend's error origins read it
# (`user_line`), so an error in a compiled graph names the line of the user's
# model that the failing op came from, not the generated code.
_user_lines: dict = {}
_FRAME = re.compile(r'File "([^"]+)", line (\d+)')
_ASSIGNS = re.compile(r"^\s+(\w+) = ")


def _map_user_lines(gm: torch.fx.GraphModule) -> None:
    gm.code  # a lazy graph module generates its code when it is read
    filename = gm.forward.__code__.co_filename
    traces = {n.name: n.meta.get("stack_trace") for n in gm.graph.nodes}
    for lineno, text in enumerate(linecache.getlines(filename), start=1):
        m = _ASSIGNS.match(text)
        trace = traces.get(m.group(1)) if m else None
        frames = _FRAME.findall(trace or "")
        if frames:
            file, line = frames[-1]
            _user_lines[(filename, lineno)] = f"{file}:{line}"


def user_line(filename: str, lineno: int):
    """The user's `file:line` behind line `lineno` of a compiled graph's code, or None."""
    return _user_lines.get((filename, lineno))


def _updated_inputs(kind: str) -> list:
    """The inputs a forward or inference graph being compiled updates, as
    (input, output) pairs: aot_autograd's metadata for it (in the tracing
    context while its compiler runs) lists the inputs whose data it mutates,
    and its first outputs are their new values, which aot_autograd's wrapper
    copies into them after each call. The runtime donates such an input to
    its output when nothing else holds it, and only after seeing that the
    input holds the output of the call before (the copy made). A backward
    graph updates nothing (the context then still holds its forward's)."""
    if kind == "backward":
        return []
    context = torch._guards.TracingContext.try_get()
    meta = getattr(context, "fw_metadata", None)
    if meta is None:
        return []
    updates = []
    for output, k in enumerate(meta.mutated_inp_runtime_indices):
        info = meta.input_info[k]
        if info.mutates_data and not info.mutates_metadata and not info.mutates_storage_metadata:
            updates.append((k, output))
    return updates


class GraphCall:
    """One aot_autograd graph (forward or backward) as a boxed callable: each
    call is one graph scope of the runtime."""

    def __init__(self, gm: torch.fx.GraphModule, example_inputs, kind: str):
        # In the instance's __dict__, which functools.wraps copies to the
        # wrappers aot_autograd puts around a backward.
        self._boxed_call = True
        self.gm = gm
        self.kind = kind
        self.id = _new_id()
        self.device = _device_index(example_inputs)
        # After the first call, the runtime may call the graph's program
        # directly (`_capture`): `direct` is True then.
        self.captured = False
        self.direct = False
        self.out_type = tuple
        self.updates = _updated_inputs(kind)
        _map_user_lines(gm)

    def __call__(self, *args):
        # aot_autograd calls it boxed (one list, `_boxed_call`), except through
        # wrappers that drop the attribute (the backward's): then unboxed. An
        # aot graph's arguments are tensors and numbers, never a list.
        if len(args) == 1 and type(args[0]) is list:
            args = args[0]
        if self.direct:
            out = self._call_direct(args)
            if out is not None:
                return out
        out, opened = self._call_in_scope(args)
        if opened and not self.captured:  # (debug mode opens no scope)
            self.captured = True
            self._capture(args, out)
        return out

    def _capture(self, args, out) -> None:
        """After the first call: asks the runtime to call the graph directly
        from now on (`_backend.graph_capture`: inputs on the device, read
        from their allocations as the same views at each call; outputs views
        of inputs or of new allocations, made again at each call)."""
        if not isinstance(out, (tuple, list)):
            return
        try:
            captured = _backend.graph_capture(self.device, self.id, args, list(out), self.updates)
        except TypeError:  # an argument that is not a tensor (a Python number)
            return
        if captured:
            self.direct = True
            self.out_type = type(out)

    def _call_direct(self, args):
        try:
            called, outs = _backend.graph_run(self.device, self.id, args)
        except TypeError:  # an argument that is not a tensor
            called = False
        if not called:
            # Another device, another view, or the inputs' types changed:
            # through a scope, then captured again.
            self.direct, self.captured = False, False
            return None
        return tuple(outs) if self.out_type is tuple else outs

    def _call_in_scope(self, args):
        opened = ctypes.c_int32(0)
        _lib.check(_lib.ffi.eagertpu_graph_begin(ctypes.c_int64(self.device), ctypes.c_uint64(self.id), ctypes.byref(opened)))
        try:
            out = self.gm(*args)
        except BaseException:
            # The scope closes even so: the ops recorded before the failing one run.
            _lib.ffi.eagertpu_graph_end(ctypes.c_int64(self.device))
            raise
        _lib.check(_lib.ffi.eagertpu_graph_end(ctypes.c_int64(self.device)))
        return out, opened.value != 0


def _compiler(kind):
    def compile_graph(gm: torch.fx.GraphModule, example_inputs):
        return GraphCall(gm, example_inputs, kind)

    compile_graph.__name__ = f"eagertpu_{kind}_compiler"
    return compile_graph


def _decompositions() -> dict:
    """ATen ops the graphs are decomposed from: those the tpu kernels have no
    lowering of but whose decomposition they run (BatchNorm's functional
    forms, which aot_autograd produces for a module in training)."""
    from torch._decomp import get_decompositions

    aten = torch.ops.aten
    return get_decompositions(
        [
            aten._native_batch_norm_legit,
            aten._native_batch_norm_legit_functional,
            aten._native_batch_norm_legit_no_training,
        ]
    )


def _make_backend():
    from torch._dynamo.backends.common import aot_autograd

    return aot_autograd(
        decompositions=_decompositions(),
        fw_compiler=_compiler("forward"),
        bw_compiler=_compiler("backward"),
        inference_compiler=_compiler("inference"),
        # The graph stays functional: an input it updates (optimizer state,
        # BatchNorm's running stats) comes back as an output, copied into
        # place by aot_autograd's wrapper, through the tpu copy_ kernel.
        keep_inference_input_mutations=False,
    )


def _keep_optimizer_steps_on_tpu() -> None:
    """Dynamo traces an optimizer's step with `capturable=True` and, for
    CUDA and XPU parameters only, creates the optimizer's state with its
    step counts on the device; on tpu they would stay CPU tensors, updated
    by CPU ops inside the graph, which keep the graph off the direct call.
    This makes tpu parameters get what CUDA's get."""
    from torch._dynamo.variables.optimizer import OptimizerVariable

    original = OptimizerVariable._safe_to_set_capturable
    if getattr(original, "_eagertpu", False):
        return

    def safe_to_set_capturable(self, group) -> bool:
        params = group.get("params", [])
        if params and all(isinstance(p, torch.Tensor) and p.device.type == "tpu" for p in params):
            return "capturable" in group and all(p not in self.value.state for p in params)
        return original(self, group)

    safe_to_set_capturable._eagertpu = True
    OptimizerVariable._safe_to_set_capturable = safe_to_set_capturable


_aot_backend = None
_backend_lock = threading.Lock()


def backend(gm: torch.fx.GraphModule, example_inputs, **kwargs):
    """The dynamo backend (`torch.compile(model, backend="tpu")`)."""
    global _aot_backend
    with _backend_lock:
        if _aot_backend is None:
            _keep_optimizer_steps_on_tpu()
            _aot_backend = _make_backend()
    return _aot_backend(gm, example_inputs, **kwargs)


def dynamo_stats() -> dict:
    """Dynamo's counters for this process: graphs captured, graph breaks by
    reason, recompiles with the guard that failed (all 0 until something is
    compiled: dynamo is not imported for this)."""
    # Read from dynamo's module if it is loaded: never imported for this.
    utils = sys.modules.get("torch._dynamo.utils")
    if utils is None:
        return {"graphs_captured": 0, "graph_breaks": 0, "graph_break_reasons": {}, "recompiles": 0, "recompile_reasons": []}
    counters, guard_failures = utils.counters, utils.guard_failures

    stats = counters["stats"]
    breaks = dict(counters["graph_break"])
    # Each recompile, with the guard that failed: "f: tensor 'x' size
    # mismatch at index 0. expected 4, actual 6" (dynamo's explainer).
    reasons = [f"{code.co_name}: {r}" for code, rs in guard_failures.items() for r in rs]
    return {
        "graphs_captured": stats.get("unique_graphs", 0),
        "graph_breaks": sum(breaks.values()),
        "graph_break_reasons": breaks,
        "recompiles": len(reasons),
        "recompile_reasons": reasons,
    }


def report() -> str:
    """The torch.compile lines of `eagertpu.metrics_report()`."""
    stats = dynamo_stats()
    text = (
        f"torch.compile       {stats['graphs_captured']} graphs captured, "
        f"{stats['graph_breaks']} graph breaks, {stats['recompiles']} recompiles\n"
    )
    for reason, n in stats["graph_break_reasons"].items():
        text += f"  graph break ({n}x): {reason.splitlines()[0]}\n"
    for reason in stats["recompile_reasons"]:
        text += f"  recompiled: {reason}\n"
    return text


INDUCTOR_MESSAGE = (
    "torch.compile's default backend (Inductor) has no code generator for the tpu device "
    "(EagerTPU); compile with torch.compile(model, backend=\"tpu\"), which lowers each graph "
    "through EagerTPU's op set to one StableHLO program"
)


class _Refusing(type):
    # Inductor reads class attributes (`supports_caching`) before it makes one.
    def __getattr__(cls, name):
        raise RuntimeError(INDUCTOR_MESSAGE)


class _RefusedScheduling(metaclass=_Refusing):
    """Inductor's scheduling and wrapper code generator for tpu: refuse at
    their first use, naming the backend to use."""

    def __init__(self, *args, **kwargs):
        raise RuntimeError(INDUCTOR_MESSAGE)


def _refuse_inductor(common) -> None:
    """Registers `_RefusedScheduling` for tpu in Inductor's device table
    (`torch._inductor.codegen.common`), before Inductor registers its own
    (Pallas, which needs JAX and a TorchTPU device)."""
    if common.get_scheduling_for_device("tpu") is None:
        common.register_backend_for_device("tpu", _RefusedScheduling, _RefusedScheduling)


class _InductorHook:
    """A meta path finder that calls `_refuse_inductor` once Inductor's device
    table is imported: importing Inductor at `import eagertpu` would cost
    about 2 s to every user, compiling or not."""

    NAME = "torch._inductor.codegen.common"

    def find_spec(self, fullname, path, target=None):
        if fullname != self.NAME:
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        exec_module = spec.loader.exec_module

        def exec_then_refuse(module):
            exec_module(module)
            _refuse_inductor(module)

        spec.loader.exec_module = exec_then_refuse
        sys.meta_path[:] = [f for f in sys.meta_path if f is not self]
        return spec


def install_inductor_hook() -> None:
    module = sys.modules.get(_InductorHook.NAME)
    if module is not None:
        _refuse_inductor(module)
    elif not any(isinstance(f, _InductorHook) for f in sys.meta_path):
        sys.meta_path.insert(0, _InductorHook())
