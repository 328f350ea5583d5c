"""LoRA adapters on one replica: GPU slots and a host cache, both least-recently-used, and what a load costs.

vLLM serves LoRA adapters from a fixed number of GPU slots (--max-loras, default 1) backed by a host-memory
cache (--max-cpu-loras, default = max-loras); one batch can hold requests of at most max_loras distinct
adapters (vllm/v1/core/sched/scheduler.py skips a waiting request whose adapter would be one too many). An
adapter that is not in a GPU slot is copied in before the step that needs it runs (the worker's
`set_active_adapters`), evicting the least recently used slot; one not in the host cache is first read
from disk. When the adapters in use outnumber the slots, loads repeat every few steps: the cache thrashes.

Load time = adapter bytes / bandwidth. Adapter bytes: rank r on every attention and MLP projection of
every layer, r * (d_in + d_out) bf16 elements per projection (Llama-3.1-8B at r=16: 84 MB). Bandwidths:
host to device 24 GB/s, PCIe Gen4 x16 at 32 GB/s per direction times the 0.75 efficiency that
profiles.LINKS uses for PCIe; disk to host 2 GB/s (assumed: one NVMe SSD, a cold page cache).
"""

from __future__ import annotations

from collections import OrderedDict

from mypy_extensions import mypyc_attr

from engine_model.profiles import ModelProfile

H2D_BYTES_PER_S = 24e9
DISK_BYTES_PER_S = 2e9
BF16_BYTES = 2


def adapter_bytes(model: ModelProfile, rank: int) -> int:
    """Bytes of one LoRA adapter of `rank` on q, k, v, o and the MLP projections (gate, up, down) of every
    layer: rank * (d_in + d_out) bf16 elements per projection (the A and B matrices)."""
    h, q, kv, inter = model.hidden, model.q_dim, model.kv_dim, model.intermediate
    per_layer = (h + q) + 2 * (h + kv) + (q + h) + 3 * (h + inter)
    return rank * per_layer * model.num_layers * BF16_BYTES


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class AdapterCache:
    """GPU slots and host cache of one replica. Adapter ids are positive ints (0 is the base model).

    Invariants: len(gpu) <= slots; len(host) <= max(host_slots, slots) (vLLM requires max_cpu_loras >=
    max_loras); every adapter in a GPU slot is also in the host cache."""

    def __init__(self, slots: int, host_slots: int, bytes_per_adapter: int) -> None:
        self.slots = slots
        self.host_slots = max(host_slots, slots)
        self.bytes_per_adapter = bytes_per_adapter
        # bytes of adapters whose rank differs from max_lora_rank (the others weigh bytes_per_adapter)
        self.sizes: dict[int, int] = {}
        self.gpu: OrderedDict[int, None] = OrderedDict()
        self.host: OrderedDict[int, None] = OrderedDict()
        self.loads_total = 0  # copies into a GPU slot
        self.disk_loads_total = 0  # of those, adapters read from disk first
        self.load_s_total = 0.0

    def load_time_s(self, from_disk: bool, nbytes: int = -1) -> float:
        """Seconds to copy an adapter of `nbytes` (default bytes_per_adapter) into a GPU slot, reading it
        from disk first when `from_disk`."""
        size = self.bytes_per_adapter if nbytes < 0 else nbytes
        t = size / H2D_BYTES_PER_S
        return t + size / DISK_BYTES_PER_S if from_disk else t

    def activate(self, adapters: set[int]) -> float:
        """Make every adapter of a step (at most `slots` distinct, the scheduler's cap) resident; returns the
        seconds spent loading, which the step waits for."""
        spent = 0.0
        for a in sorted(adapters):
            if a in self.gpu:
                self.gpu.move_to_end(a)
                continue
            if len(self.gpu) >= self.slots:
                victim = next((v for v in self.gpu if v not in adapters), None)
                if victim is None:  # more adapters than slots: the scheduler should not allow it
                    raise ValueError(f"a step needs {len(adapters)} adapters; {self.slots} slots")
                del self.gpu[victim]
            from_disk = a not in self.host
            if from_disk:
                if len(self.host) >= self.host_slots:
                    self.host.popitem(last=False)
                self.host[a] = None
                self.disk_loads_total += 1
            else:
                self.host.move_to_end(a)
            self.gpu[a] = None
            self.loads_total += 1
            spent += self.load_time_s(from_disk, self.sizes.get(a, self.bytes_per_adapter))
        self.load_s_total += spent
        return spent
