"""``python -m kernarg bench [--quick] [--json PATH]`` and ``python -m kernarg info``."""
from __future__ import annotations

import argparse
import os
import sys
import traceback


def _info() -> int:
    import kernarg
    from kernarg import _stream

    print(f"kernarg {kernarg.__version__} (Python {sys.version.split()[0]})")
    print(_default_stream_line(_stream))
    try:
        from kernarg import _launch

        sync = "on" if _launch._producer_sync_default() else "off"
        print(f"waits for producer streams: {sync}; {_launch._ENV_PRODUCER_SYNC}="
              f"{os.environ.get(_launch._ENV_PRODUCER_SYNC, '<unset>')}")
    except ImportError:
        pass
    try:
        from cuda.bindings import driver
    except ImportError:
        print("cuda.bindings is not installed: no driver information")
        return 0
    print(_bindings_line())
    has_nvrtc = _nvrtc_line()
    try:
        (err,) = driver.cuInit(0)
    except Exception as exc:   # the driver library itself could not be loaded
        if _stream._env_stopped(exc):
            print(f"the CUDA driver was not loaded: {_stream._ENV_PER_THREAD} (above)")
        else:
            print(f"no CUDA driver/GPU found ({type(exc).__name__}: {exc})")
        return 0
    if err != driver.CUresult.CUDA_SUCCESS:
        print(f"no CUDA driver/GPU found (cuInit: {err.name})")
        return 0
    _, version = driver.cuDriverGetVersion()
    print(f"CUDA driver {version // 1000}.{version % 1000 // 10}; {_driver_keywords(version)}")
    _, count = driver.cuDeviceGetCount()
    attr = driver.CUdevice_attribute
    for i in range(count):
        _, dev = driver.cuDeviceGet(i)
        _, name = driver.cuDeviceGetName(256, dev)
        _, major = driver.cuDeviceGetAttribute(
            attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
        _, minor = driver.cuDeviceGetAttribute(
            attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
        label = name.split(b"\0")[0].decode()
        line = f"device {i}: {label} (compute capability {major}.{minor})"
        if has_nvrtc:
            from kernarg._nvrtc import target_arch

            target = target_arch(major * 10 + minor)
            line += ("; Kernel.from_source loads " + (
                f"{target} machine code" if target.startswith("sm_")
                else f"PTX (this NVRTC has no sm_{major}{minor})"))
        print(line)
        print(f"  launch keywords it takes: {_features(driver, dev)}")
    return 0


def _driver_keywords(version: int) -> str:
    """Which of the launch keywords that the driver's version decides (cuda.h 12.4 added
    graph_node's device_updatable, 13.0 nvlink_util_centric, 13.2 the others) a driver of CUDA
    ``version`` (13020 for 13.2) takes."""
    from kernarg._launch import _NEWER_ATTRIBUTES

    newer = _NEWER_ATTRIBUTES.values()
    takes = [name for name, needed in newer if version >= needed]
    lacks = [f"{name} (CUDA {needed // 1000}.{needed % 1000 // 10}+)" for name, needed in newer
             if version < needed]
    return "; ".join((["takes the launch keywords of newer drivers " + ", ".join(takes)]
                      if takes else []) + (["too old for " + ", ".join(lacks)] if lacks else []))


def _features(driver, dev) -> str:
    """Which of the launch keywords that depend on the device ``dev`` takes, with its limits;
    what the driver does not say counts as not taken."""
    attr = driver.CUdevice_attribute

    def get(name):
        err, value = driver.cuDeviceGetAttribute(getattr(attr, f"CU_DEVICE_ATTRIBUTE_{name}"), dev)
        return value if err == driver.CUresult.CUDA_SUCCESS else 0

    domains = get("MEM_SYNC_DOMAIN_COUNT")
    window = get("MAX_ACCESS_POLICY_WINDOW_SIZE")
    features = [("cluster", get("CLUSTER_LAUNCH") > 0),
                ("cooperative", get("COOPERATIVE_LAUNCH") > 0),
                (f"mem_sync_domain_map (domains 0-{domains - 1})" if domains > 1 else
                 "mem_sync_domain_map (domain 0 only)", domains > 0),
                (f"access_policy (windows up to {window:,} bytes)", window > 0)]
    takes = [name for name, taken in features if taken]
    lacks = [name.split(" ")[0] for name, taken in features if not taken]
    return ", ".join(takes or ["none of cluster, cooperative, mem_sync_domain_map, "
                               "access_policy"]) + ("; not " + ", ".join(lacks)
                                                    if takes and lacks else "")


def _nvrtc_line() -> bool:
    """Print which NVRTC Kernel.from_source uses and its real architectures; False if none."""
    try:
        from kernarg._nvrtc import (
            cache_dir,
            cccl_include_dir,
            cuda_include_dir,
            nvrtc_version,
            supported_archs,
        )

        major, minor = nvrtc_version()
        archs = supported_archs()
    except Exception as exc:   # no NVRTC wheel, or an unusable one
        print(f"NVRTC unavailable ({type(exc).__name__}: {exc})")
        return False
    print(f"NVRTC {major}.{minor} (machine code for sm_{archs[0]} .. sm_{archs[-1]}); "
          f"runtime headers: {cuda_include_dir() or 'not found'}; "
          f"CCCL headers: {cccl_include_dir() or 'not found'}")
    print(f"compilation cache on disk: {cache_dir() or 'off'} (KERNARG_CACHE_DIR)")
    return True


def _default_stream_line(_stream) -> str:
    """The default-stream policy, what stream 0 means where the running cuda-bindings reads
    CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM otherwise, and a value that stops it."""
    names = {1: "legacy (1)", 2: "per-thread (2)"}
    value = os.environ.get(_stream._ENV_PER_THREAD)
    line = (f"default stream: {names[_stream._POLICY_DEFAULT]}; "
            f"{_stream._ENV_PER_THREAD}={'<unset>' if value is None else repr(value)}")
    if _stream._ENV_PROBLEM is not None:
        return f"{line}\n  {_stream._ENV_PROBLEM}"
    if _stream._NULL_STREAM != _stream._POLICY_DEFAULT:
        line += (f"\n  stream 0 (the NULL stream) is the {names[_stream._NULL_STREAM]} one: "
                 "this cuda-bindings loads the driver's per-thread functions for any value "
                 "set (fixed in 12.9.7 and 13.3.0, NVIDIA/cuda-python#2076)")
    return line


def _bindings_line() -> str:
    """Which cuda-bindings kernarg's launcher was compiled against, and which one runs: the
    compiled module imports cydriver's functions by signature, so the two must agree."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        running = version("cuda-bindings")
    except PackageNotFoundError:
        running = "?"
    try:
        from kernarg import _launch
    except ImportError as exc:
        return f"cuda-bindings {running}; kernarg's launcher does not import: {exc}"
    built = getattr(_launch, "BUILT_WITH_CUDA_BINDINGS", "?")
    note = "" if built == running else " (rebuild kernarg if launches fail to import)"
    return f"cuda-bindings {running}; kernarg's launcher built against {built}{note}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernarg")
    sub = parser.add_subparsers(dest="command", required=True)
    bench = sub.add_parser("bench", help="packing latency against cuda.core's ParamHolder")
    bench.add_argument("--quick", action="store_true", help="fewer, shorter repeats")
    bench.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    bench.add_argument("--gpu-only", action="store_true",
                       help="only the GPU parts: launch latency and foreign GPU arrays")
    bench.add_argument("--rounds", type=_positive_int, metavar="N",
                       help="rounds of the launch-latency benchmark (default 7, 3 with --quick)")
    sub.add_parser("info", help="driver, devices, versions, default-stream policy")
    args = parser.parse_args(argv)
    if args.command == "info":
        return _info()
    from kernarg import _bench

    if args.gpu_only:
        result = {"machine": _bench.machine(), "versions": _bench._versions()}
    else:
        result = _bench.run(quick=args.quick, json_path=args.json)
    return _gpu_benchmarks(result, args)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value


def _gpu_benchmarks(result, args) -> int:
    """With a GPU, also measure launch latency (kernarg._bench_launch) and foreign GPU arrays
    (kernarg._bench_interop); without one, say so."""
    try:
        from cuda.bindings import driver

        ok = driver.cuInit(0)[0] == driver.CUresult.CUDA_SUCCESS
    except Exception:
        ok = False
    if not ok:
        print("\nlaunch latency: not measured — no CUDA driver/GPU found")
        return 1 if args.gpu_only else 0
    failed = 0
    try:
        from kernarg import _bench_launch

        rounds = args.rounds or (3 if args.quick else 7)
        result["launch"] = _bench_launch.run(rounds=rounds)
        _bench_launch.print_table(result["launch"])
    except Exception:   # never let the GPU part take the packing results down with it
        print("\nlaunch latency: failed")
        traceback.print_exc()
        failed = 1
    # Written now as well as at the end: a run stopped during the next part (a time limit's
    # kill, which runs no Python cleanup) keeps what is measured so far.
    _write_json(result, args.json)
    try:
        from kernarg import _bench_interop

        result["interop_gpu"] = _bench_interop.run(repeat=5 if args.quick else 15)
    except Exception:
        print("\nforeign GPU arrays: failed")
        traceback.print_exc()
        failed = 1
    _write_json(result, args.json)
    return failed


def _write_json(result: dict, path) -> None:
    if path:
        import json

        with open(path, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
