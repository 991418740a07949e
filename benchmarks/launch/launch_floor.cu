// The launch-latency floor: cuLaunchKernel in a C++ loop (driver API, no Python).
// Build: nvcc -O2 -o launch_floor launch_floor.cu -ldl
// The driver is opened with dlopen("libcuda.so.1"), as cuda.bindings opens it, so the build
// needs no libcuda.so or stub library (GPU machines often ship only the versioned driver
// library, and toolkits without lib64/stubs exist). Every call goes through a function pointer,
// as a linked call goes through the PLT.
// Run:   ./launch_floor <nargs> <bursts> [burst]  -> prints "median min" host ns per launch
//
// Host cost only, measured as kernarg._bench_launch measures the Python launchers: bursts of
// `burst` launches (default 100, far below the driver's launch-queue depth, so no launch waits
// for the GPU) are timed, and the stream is synchronised between bursts, outside the timing.
// An empty kernel taking <nargs> 8-byte parameters, from PTX.
#include <cuda.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define DRIVER_FUNCTIONS(X) X(cuInit) X(cuDeviceGet) X(cuDevicePrimaryCtxRetain) \
    X(cuCtxSetCurrent) X(cuModuleLoadData) X(cuModuleGetFunction) X(cuStreamCreate) \
    X(cuLaunchKernel) X(cuStreamSynchronize) X(cuGetErrorName)
#define DECLARE(name) static decltype(&::name) p_##name;
DRIVER_FUNCTIONS(DECLARE)

static bool load_driver() {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        std::fprintf(stderr, "dlopen(libcuda.so.1): %s\n", dlerror());
        return false;
    }
#define LOAD(name)                                                              \
    p_##name = reinterpret_cast<decltype(p_##name)>(dlsym(lib, #name));         \
    if (!p_##name) { std::fprintf(stderr, "libcuda.so.1 has no %s\n", #name); return false; }
    DRIVER_FUNCTIONS(LOAD)
    return true;
}

#define CHECK(x) do { CUresult e = (x); if (e != CUDA_SUCCESS) { const char *s = "?"; \
    p_cuGetErrorName(e, &s); std::fprintf(stderr, "%s: %s\n", #x, s); return 1; } } while (0)

int main(int argc, char **argv) {
    int nargs = argc > 1 ? std::atoi(argv[1]) : 0;
    long bursts = argc > 2 ? std::atol(argv[2]) : 200;
    int burst = argc > 3 ? std::atoi(argv[3]) : 100;
    std::string ptx = ".version 7.0\n.target sm_70\n.address_size 64\n.visible .entry k(";
    for (int i = 0; i < nargs; ++i)
        ptx += std::string(i ? ", " : "") + ".param .u64 p" + std::to_string(i);
    ptx += ")\n{\n\tret;\n}\n";
    if (!load_driver()) return 1;
    CUdevice dev; CUcontext ctx; CUmodule mod; CUfunction f; CUstream s;
    CHECK(p_cuInit(0)); CHECK(p_cuDeviceGet(&dev, 0));
    CHECK(p_cuDevicePrimaryCtxRetain(&ctx, dev)); CHECK(p_cuCtxSetCurrent(ctx));
    CHECK(p_cuModuleLoadData(&mod, ptx.c_str())); CHECK(p_cuModuleGetFunction(&f, mod, "k"));
    CHECK(p_cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    std::vector<unsigned long long> vals(nargs > 0 ? nargs : 1, 0);
    std::vector<void *> params(nargs > 0 ? nargs : 1);
    for (int i = 0; i < nargs; ++i) params[i] = &vals[i];
    for (int i = 0; i < 1000; ++i)
        CHECK(p_cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params.data(), nullptr));
    CHECK(p_cuStreamSynchronize(s));
    std::vector<double> per_launch(bursts > 0 ? bursts : 1, 0.0);
    for (long b = 0; b < bursts; ++b) {
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < burst; ++i)
            CHECK(p_cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params.data(), nullptr));
        auto t1 = std::chrono::steady_clock::now();
        CHECK(p_cuStreamSynchronize(s));
        per_launch[b] = std::chrono::duration<double, std::nano>(t1 - t0).count() / burst;
    }
    // The same statistics the Python side reports: median and minimum over bursts.
    std::sort(per_launch.begin(), per_launch.end());
    std::printf("%.1f %.1f\n", per_launch[per_launch.size() / 2], per_launch[0]);
    return 0;
}
