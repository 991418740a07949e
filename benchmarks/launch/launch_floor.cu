// The launch-latency floor: cuLaunchKernel in a C++ loop (driver API, no Python).
// Build: nvcc -O2 -o launch_floor launch_floor.cu -lcuda   (add -L<cuda>/lib64/stubs if needed)
// Run:   ./launch_floor <nargs> <bursts> [burst]  -> prints "median min" host ns per launch
//
// Host cost only, measured as kernarg._bench_launch measures the Python launchers: bursts of
// `burst` launches (default 100, far below the driver's launch-queue depth, so no launch waits
// for the GPU) are timed, and the stream is synchronised between bursts, outside the timing.
// An empty kernel taking <nargs> 8-byte parameters, from PTX.
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define CHECK(x) do { CUresult e = (x); if (e != CUDA_SUCCESS) { const char *s = "?"; \
    cuGetErrorName(e, &s); std::fprintf(stderr, "%s: %s\n", #x, s); return 1; } } while (0)

int main(int argc, char **argv) {
    int nargs = argc > 1 ? std::atoi(argv[1]) : 0;
    long bursts = argc > 2 ? std::atol(argv[2]) : 200;
    int burst = argc > 3 ? std::atoi(argv[3]) : 100;
    std::string ptx = ".version 7.0\n.target sm_70\n.address_size 64\n.visible .entry k(";
    for (int i = 0; i < nargs; ++i)
        ptx += std::string(i ? ", " : "") + ".param .u64 p" + std::to_string(i);
    ptx += ")\n{\n\tret;\n}\n";
    CUdevice dev; CUcontext ctx; CUmodule mod; CUfunction f; CUstream s;
    CHECK(cuInit(0)); CHECK(cuDeviceGet(&dev, 0)); CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx)); CHECK(cuModuleLoadData(&mod, ptx.c_str()));
    CHECK(cuModuleGetFunction(&f, mod, "k")); CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    std::vector<unsigned long long> vals(nargs > 0 ? nargs : 1, 0);
    std::vector<void *> params(nargs > 0 ? nargs : 1);
    for (int i = 0; i < nargs; ++i) params[i] = &vals[i];
    for (int i = 0; i < 1000; ++i)
        CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params.data(), nullptr));
    CHECK(cuStreamSynchronize(s));
    std::vector<double> per_launch(bursts > 0 ? bursts : 1, 0.0);
    for (long b = 0; b < bursts; ++b) {
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < burst; ++i)
            CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params.data(), nullptr));
        auto t1 = std::chrono::steady_clock::now();
        CHECK(cuStreamSynchronize(s));
        per_launch[b] = std::chrono::duration<double, std::nano>(t1 - t0).count() / burst;
    }
    // The same statistics the Python side reports: median and minimum over bursts.
    std::sort(per_launch.begin(), per_launch.end());
    std::printf("%.1f %.1f\n", per_launch[per_launch.size() / 2], per_launch[0]);
    return 0;
}
