from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, final

from kernarg._signature import Signature

__all__ = ["BoundLaunch", "Kernel", "KernelNode", "LaunchConfig", "PreparedLaunch", "launch",
           "set_producer_sync"]

Dims = int | tuple[int] | tuple[int, int] | tuple[int, int, int]
ClusterScheduling = Literal["default", "spread", "load_balancing"]
MemSyncDomain = Literal["default", "remote"]
AccessPolicy = tuple[Any, ...] | Mapping[str, Any]
DomainMap = tuple[int, int] | Mapping[str, int]
ClusterSizeMode = Literal["default", "require_portable", "allow_non_portable"]
ShmemMode = Literal["default", "require_portable", "allow_non_portable", "allow_oversized",
                    "prefer_oversized"]

@final
class LaunchConfig:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shmem: int
    cluster: tuple[int, int, int] | None
    cooperative: bool
    pdl: bool
    priority: int | None
    cluster_scheduling: ClusterScheduling | None
    preferred_cluster: tuple[int, int, int] | None
    mem_sync_domain: MemSyncDomain | None
    shmem_carveout: int | None
    access_policy: tuple[int, int, float, str, str] | None
    launch_completion_event: int | None
    programmatic_event: tuple[int, bool] | None
    mem_sync_domain_map: tuple[int, int] | None
    nvlink_util_centric: bool | None
    cluster_size_mode: ClusterSizeMode | None
    shmem_mode: ShmemMode | None
    def __init__(self, grid: Dims, block: Dims, *, shmem: int = 0, cluster: Dims | None = None,
                 cooperative: bool = False, pdl: bool = False,
                 priority: int | None = None,
                 cluster_scheduling: ClusterScheduling | None = None,
                 preferred_cluster: Dims | None = None,
                 mem_sync_domain: MemSyncDomain | None = None,
                 shmem_carveout: int | None = None,
                 access_policy: AccessPolicy | None = None,
                 launch_completion_event: Any = None,
                 programmatic_event: Any = None,
                 mem_sync_domain_map: DomainMap | None = None,
                 nvlink_util_centric: bool | None = None,
                 cluster_size_mode: ClusterSizeMode | None = None,
                 shmem_mode: ShmemMode | None = None) -> None: ...
    @property
    def attributes(self) -> tuple[tuple[str, Any], ...]: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...
    def __replace__(self, **changes: Any) -> LaunchConfig: ...

@final
class PreparedLaunch:
    config: LaunchConfig
    stream: int
    def __call__(self, *args: Any) -> None: ...
    def bind(self, *args: Any) -> BoundLaunch: ...

@final
class BoundLaunch:
    config: LaunchConfig
    stream: int
    closed: bool
    nargs: int
    def __call__(self) -> None: ...
    def close(self) -> None: ...
    def __enter__(self) -> BoundLaunch: ...
    def __exit__(self, *exc: object) -> bool: ...

class Kernel:
    signature: Signature | None
    name: str
    device: int
    @classmethod
    def from_ptx(cls, ptx: str | bytes, name: str, *, signature: Signature | None = None,
                 device: int = 0, entry: str | None = None) -> Kernel: ...
    @classmethod
    def from_cubin(cls, cubin: bytes, name: str, *, signature: Signature | None = None,
                   device: int = 0, entry: str | None = None) -> Kernel: ...
    @classmethod
    def from_source(cls, source: str, name: str, options: Sequence[str] = ...,
                    *, device: int = 0, headers: Mapping[str, str] | None = None) -> Kernel: ...
    @classmethod
    def from_source_many(cls, source: str, names: Sequence[str], options: Sequence[str] = ...,
                         *, device: int = 0,
                         headers: Mapping[str, str] | None = None) -> dict[str, Kernel]: ...
    @classmethod
    def from_handle(cls, handle: Any, *, signature: Any = None, name: str = ...,
                    device: int | None = None) -> Kernel: ...
    @property
    def handle(self) -> int: ...
    def max_cooperative_blocks(self, block: Dims, shmem: int = 0) -> int: ...
    def max_active_blocks_per_sm(self, block: Dims, shmem: int = 0) -> int: ...
    def available_shmem(self, block: Dims, blocks_per_sm: int = 1) -> int: ...
    def max_active_clusters(self, grid: Dims, block: Dims, cluster: Dims | None = None,
                            shmem: int = 0) -> int: ...
    def max_potential_cluster_size(self, grid: Dims, block: Dims, shmem: int = 0,
                                   non_portable: bool = False) -> int: ...
    def max_potential_block_size(self, shmem: int | Callable[[int], int] = 0,
                                 block_limit: int = 0) -> tuple[int, int]: ...
    def get_global(self, name: str) -> tuple[int, int]: ...
    @property
    def attributes(self) -> dict[str, int]: ...
    @property
    def module_handle(self) -> int | None: ...
    @property
    def param_layout(self) -> tuple[tuple[int, int], ...] | None: ...
    def launch(self, grid: Dims, block: Dims, *args: Any, stream: Any = None, shmem: int = 0,
               cluster: Dims | None = None, cooperative: bool = False, pdl: bool = False,
               priority: int | None = None,
               cluster_scheduling: ClusterScheduling | None = None,
               preferred_cluster: Dims | None = None,
               mem_sync_domain: MemSyncDomain | None = None,
               shmem_carveout: int | None = None,
               access_policy: AccessPolicy | None = None,
               launch_completion_event: Any = None,
               programmatic_event: Any = None,
               mem_sync_domain_map: DomainMap | None = None,
               nvlink_util_centric: bool | None = None,
               cluster_size_mode: ClusterSizeMode | None = None,
               shmem_mode: ShmemMode | None = None) -> None: ...
    def prepare(self, grid: Dims, block: Dims, *, stream: Any = None, shmem: int = 0,
                cluster: Dims | None = None, cooperative: bool = False, pdl: bool = False,
                priority: int | None = None,
                cluster_scheduling: ClusterScheduling | None = None,
                preferred_cluster: Dims | None = None,
                mem_sync_domain: MemSyncDomain | None = None,
                shmem_carveout: int | None = None,
                access_policy: AccessPolicy | None = None,
                launch_completion_event: Any = None,
                programmatic_event: Any = None,
                mem_sync_domain_map: DomainMap | None = None,
                nvlink_util_centric: bool | None = None,
                cluster_size_mode: ClusterSizeMode | None = None,
                shmem_mode: ShmemMode | None = None) -> PreparedLaunch: ...
    def __getitem__(self, config: tuple[Any, ...]) -> PreparedLaunch: ...
    def graph_node(self, graph: Any, grid: Dims, block: Dims, *args: Any, after: Any = (),
                   shmem: int = 0, stream: Any = None, cluster: Dims | None = None,
                   cooperative: bool = False, pdl: bool = False, priority: int | None = None,
                   cluster_scheduling: ClusterScheduling | None = None,
                   preferred_cluster: Dims | None = None,
                   mem_sync_domain: MemSyncDomain | None = None,
                   shmem_carveout: int | None = None,
                   access_policy: AccessPolicy | None = None,
                   mem_sync_domain_map: DomainMap | None = None,
                   after_launch: Any = (),
                   nvlink_util_centric: bool | None = None,
                   cluster_size_mode: ClusterSizeMode | None = None,
                   shmem_mode: ShmemMode | None = None,
                   device_updatable: bool = False) -> KernelNode: ...
    def nodes_in(self, graph: Any) -> list[KernelNode]: ...

@final
class KernelNode:
    kernel: Kernel
    config: LaunchConfig
    device_updatable: bool
    @property
    def handle(self) -> int: ...
    @property
    def graph(self) -> int: ...
    @property
    def device_node(self) -> int | None: ...
    def set_args(self, *args: Any, stream: Any = None, grid: Dims | None = None,
                 block: Dims | None = None, shmem: int | None = None) -> None: ...
    def set_exec_args(self, graph_exec: Any, *args: Any, stream: Any = None,
                      grid: Dims | None = None, block: Dims | None = None,
                      shmem: int | None = None) -> None: ...
    def set_enabled(self, graph_exec: Any, enabled: bool) -> None: ...
    def is_enabled(self, graph_exec: Any) -> bool: ...

def launch(stream: Any, config: Any, kernel: Any, *args: Any) -> None: ...
def device_arch(device: int = 0) -> str: ...
def set_producer_sync(enabled: bool) -> bool: ...
