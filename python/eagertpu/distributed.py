"""torch.distributed on `tpu`: the `eagertpu` c10d backend.

`import eagertpu` registers it for device `tpu`, so

    dist.init_process_group("cpu:gloo,tpu:eagertpu", store=..., rank=r, world_size=n)

runs collectives on `tpu` tensors through EagerTPU's runtime (and CPU tensors,
barriers of CPU groups and object collectives through gloo). Ranks are threads
of one process, each driving its own device (PyTorch's threaded process group
pattern, `torch.testing._internal.distributed.multi_threaded_pg`): global rank
`g` runs on `tpu:g % device_count`, and `EAGERTPU_DEVICE_COUNT=N` gives N
devices on the CPU plugin. Subgroups (`dist.new_group`) are groups of their
ranks' devices. Ranks that are processes (`torchrun`) work too: the CPU
plugin cannot run a collective across processes, so each collective copies
its tensors to the host and runs on c10d's gloo (counted as host transfers).

Every collective first meets the other ranks: they must call the same
collective with the same dtype and shape, or every rank fails with an error
listing each rank's call and line; a rank missing after the timeout
(`init_process_group(timeout=...)`, or `EAGERTPU_COLLECTIVE_TIMEOUT` (300 s)
when none is given) fails the others with an error naming it. Never a hang.
"""

import os
from datetime import timedelta

import torch
import torch.distributed as dist

from . import _backend

NAME = "eagertpu"


def _timeout_seconds(timeout: timedelta | None) -> float:
    """0 (the runtime's EAGERTPU_COLLECTIVE_TIMEOUT) unless the user chose one."""
    from torch.distributed.constants import default_pg_timeout

    if timeout is None or timeout == default_pg_timeout:
        return 0.0
    return timeout.total_seconds()


def _create(opts, backend_options):
    """c10d's creator (extended API): rank `opts.group_rank`'s backend.

    Ranks that are threads of one process share a group of its devices: group
    rank 0 makes it (one runtime handle per rank) and leaves each rank's
    handle in the group's store. Ranks in different processes (`torchrun`)
    run each collective with c10d's gloo on host copies of their tensors."""
    store, rank, size = opts.store, opts.group_rank, opts.group_size
    ranks = list(opts.global_ranks_in_group) or list(range(size))
    # The n-th creation of this group's backend on a rank pairs with the
    # others' n-th, even when a store outlives one init_process_group.
    generation = store.add(f"eagertpu/joined/{rank}", 1)
    prefix = f"eagertpu/{generation}"
    store.set(f"{prefix}/pid/{rank}", str(os.getpid()))
    pids = [int(store.get(f"{prefix}/pid/{r}")) for r in range(size)]
    if len(set(pids)) == size and size > 1:
        gloo = dist.ProcessGroupGloo(dist.PrefixStore(f"{prefix}/gloo", store), rank, size, opts.timeout)
        return _backend.staged_backend(gloo, rank, size)
    if len(set(pids)) != 1:
        raise RuntimeError(
            f"eagertpu: the ranks of a group are threads of one process or each a process of its own; "
            f"got ranks in processes {pids}"
        )
    if rank == 0:
        count = torch.tpu.device_count()
        devices = [g % count for g in ranks]
        handles = _backend.group_new(devices, _timeout_seconds(opts.timeout))
        for r in range(1, size):
            store.set(f"{prefix}/handle/{r}", str(handles[r]))
        return _backend.backend(handles[0], 0, size)
    return _backend.backend(int(store.get(f"{prefix}/handle/{rank}")), rank, size)


def set_pjrt_store(store, node_id: int, num_nodes: int) -> None:
    """Makes this process node `node_id` of `num_nodes` of a multi-process job
    whose PJRT clients find each other through `store` (a c10d Store, such as
    the TCPStore torchrun makes): libtpu and the CUDA plugin call it while
    their client starts, so the job runs on PJRT's own distributed runtime.
    The CPU plugin takes it and never calls it. Call it before the first
    `tpu` op (the runtime starts then), once per process."""
    _backend.set_distributed_store(store, node_id, num_nodes)


def check_pjrt_store(timeout: timedelta = timedelta(seconds=60)) -> None:
    """Calls the store given to `set_pjrt_store` as a plugin's client does
    when it starts: this node puts its key, then reads every node's. Run on
    every node, it proves the store reaches them all; a node missing after
    `timeout` is an error naming it."""
    _backend.check_distributed_store(int(timeout.total_seconds() * 1000))


def register() -> None:
    """Registers the backend for `tpu` (done by `import eagertpu`)."""
    if NAME.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(NAME, _create, extended_api=True, devices=["tpu"])
    dist.Backend.default_device_backend_map["tpu"] = NAME


def spawn_threads(fn, world_size: int, args=(), backend: str = "cpu:gloo,tpu:eagertpu", timeout=None):
    """Runs `fn(rank, *args)` on `world_size` threads, each a rank of a new
    default process group (`backend`) on device `tpu:rank % device_count`,
    as `torch.multiprocessing.spawn` runs processes. Returns each rank's
    result, in rank order. When ranks fail, raises the error of the rank
    that failed first, after every thread has ended: a failed rank leaves
    the group, so the others fail at the collective they wait at (or call
    next) with an error naming it, or return."""
    import threading
    import time

    from torch.testing._internal.distributed import multi_threaded_pg

    store = dist.HashStore()
    results: list = [None] * world_size
    errors: list = [None] * world_size
    failed_at: list = [None] * world_size
    kwargs = {} if timeout is None else {"timeout": timeout}

    def rank_main(rank: int) -> None:
        try:
            torch.tpu.set_device(rank % torch.tpu.device_count())
            dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, **kwargs)
            try:
                results[rank] = fn(rank, *args)
            except BaseException:
                # Before the group is destroyed, which fails the others.
                failed_at[rank] = time.monotonic()
                raise
            finally:
                dist.destroy_process_group()
        except BaseException as e:  # noqa: BLE001 - re-raised by the caller's thread
            errors[rank] = e
            failed_at[rank] = failed_at[rank] or time.monotonic()

    torch._C._distributed_c10d._set_thread_isolation_mode(True)
    multi_threaded_pg._install_threaded_pg()
    try:
        threads = [threading.Thread(target=rank_main, args=(r,), name=f"rank{r}") for r in range(world_size)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        multi_threaded_pg._uninstall_threaded_pg()
        torch._C._distributed_c10d._set_thread_isolation_mode(False)
    failed = [r for r in range(world_size) if errors[r] is not None]
    if failed:
        first = min(failed, key=lambda r: failed_at[r])
        raise RuntimeError(f"rank {first} failed: {errors[first]}") from errors[first]
    return results
