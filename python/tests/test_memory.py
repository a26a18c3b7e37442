"""torch.tpu's memory statistics, shaped as torch.cuda's: live, peak and
accumulated bytes and allocations from the runtime's storage table; reserved
bytes and free memory from the plugin where it reports them (on the XLA CPU
plugin, whose device memory is the host's, from the host)."""

import os

import pytest
import torch

import eagertpu
from helpers import next_op_works

MIB = 1 << 20


def test_allocated_peak_and_accumulated_follow_the_tensors():
    torch.tpu.synchronize()
    torch.tpu.reset_peak_memory_stats()
    torch.tpu.reset_accumulated_memory_stats()
    base = torch.tpu.memory_allocated()
    assert torch.tpu.max_memory_allocated() == base
    x = torch.empty(MIB, device="tpu")  # 4 MiB
    y = torch.empty(MIB // 2, device="tpu")  # 2 MiB
    assert torch.tpu.memory_allocated() == base + 6 * MIB
    del x
    assert torch.tpu.memory_allocated() == base + 2 * MIB
    assert torch.tpu.max_memory_allocated() == base + 6 * MIB
    stats = torch.tpu.memory_stats()
    assert stats["allocated_bytes.all.current"] == base + 2 * MIB
    assert stats["allocated_bytes.all.peak"] == base + 6 * MIB
    assert stats["allocated_bytes.all.allocated"] == 6 * MIB
    assert stats["allocated_bytes.all.freed"] == 4 * MIB
    assert stats["allocation.all.allocated"] == 2 and stats["allocation.all.freed"] == 1
    # Nothing is cached: reserved is what is allocated on the CPU plugin.
    assert torch.tpu.memory_reserved() == torch.tpu.memory_allocated()
    assert stats["reserved_bytes.all.peak"] == base + 6 * MIB
    torch.tpu.reset_peak_memory_stats()
    assert torch.tpu.max_memory_allocated() == base + 2 * MIB
    torch.tpu.reset_accumulated_memory_stats()
    assert torch.tpu.memory_stats()["allocation.all.allocated"] == 0
    del y
    assert torch.tpu.memory_allocated() == base
    assert "allocated" in torch.tpu.memory_summary()


def test_the_cpu_plugins_free_memory_is_the_hosts():
    free, total = torch.tpu.mem_get_info()
    assert total == os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert 0 < free <= total
    props = torch.tpu.get_device_properties(0)
    assert props.name == torch.tpu.get_device_name() == "cpu"
    assert props.total_memory == total and props.platform == "cpu"


def test_empty_cache_runs_pending_work_and_frees_nothing_live():
    x = torch.ones(1000, device="tpu") * 3
    before = torch.tpu.memory_allocated()
    torch.tpu.empty_cache()
    assert torch.tpu.memory_allocated() == before
    assert x.sum().item() == 3000


def test_a_bad_reset_is_an_error_naming_what_it_takes():
    with pytest.raises(RuntimeError, match="expected 1 .peaks. or 2"):
        eagertpu._lib.memory_reset(0, 3)
    with pytest.raises(RuntimeError, match="device"):
        eagertpu._lib.memory_usage(99)
    next_op_works()


def test_the_old_cached_names_and_the_oom_error_are_torch_cudas():
    x = torch.ones(MIB, device="tpu")
    assert torch.tpu.memory_cached() == torch.tpu.memory_reserved() >= x.nbytes
    assert torch.tpu.max_memory_cached() == torch.tpu.max_memory_reserved()
    del x
    torch.tpu.reset_max_memory_cached()
    assert torch.tpu.max_memory_allocated() == torch.tpu.memory_allocated()
    assert torch.tpu.OutOfMemoryError is torch.OutOfMemoryError
