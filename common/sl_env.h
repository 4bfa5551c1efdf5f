/* sl_env.h — environment capture for manifest.json: hosts, CPU, hwloc topology and each
 * rank's binding, MPI library, CUDA/NCCL/cuBLAS and GPUs where built, git describe. */
#ifndef SL_ENV_H
#define SL_ENV_H

#include <mpi.h>
#include <stddef.h>

struct sl_json;

typedef struct sl_env_local {
    char host[256];
    char binding[256];  /* the CPUs this rank may run on, as a list ("0-3,8") */
    int nbound_cpus;    /* how many */
} sl_env_local;

/* This rank's host and binding. */
void sl_env_local_capture(sl_env_local *e);

/* Fields from /proc/cpuinfo and hwloc (rank-independent). Return 0 on success. */
int sl_env_cpu_model(char *buf, size_t len);
/* Whether the first CPU's "flags" line in /proc/cpuinfo (x86: the names lscpu shows) lists
 * `flag`: 1 yes, 0 no, -1 when there is no such line (another architecture, no /proc). */
int sl_env_cpu_has_flag(const char *flag);
/* The instruction set the cpu backend's vectorised kernels run here, the variant the loader
 * picks for kernels/cpu/cpu.h's SL_CPU_CLONES: "avx2", "sse2" (x86-64's baseline, GCC's
 * "default" clone) or "baseline" on a build without clones (another architecture). */
const char *sl_env_cpu_vec_isa(void);
/* Which of the flags a vectorised CPU kernel may use (avx2 fma avx512f f16c avx512_bf16, as
 * lscpu names them) /proc/cpuinfo lists: up to max names into has, their count; -1 where it
 * lists no flags (another architecture, no /proc). */
#define SL_ENV_ISA_FLAGS_MAX 5
int sl_env_cpu_isa_flags(const char **has, int max);
/* "1 package, 1 NUMA node, 2 cores, 2 PUs, L3 32768 KiB" (the cache from sl_env_llc) */
int sl_env_topology_summary(char *buf, size_t len, int *cores, int *pus);
void sl_env_mpi_version(char *buf, size_t len);
/* The last-level data or unified cache of CPU 0 in bytes, from the kernel's description in sysfs
 * (what lscpu and hwloc show); 0 where there is none. *level: its level (3 for an L3), *source:
 * the directory read. Either may be NULL. The suite's one source for the cache size. */
size_t sl_env_llc(int *level, const char **source);

/* Device-side facts: filled by the CUDA build, "not built" otherwise. */
typedef struct sl_env_gpu {
    int built;            /* CUDA support compiled in */
    int ndevices;
    char cuda_runtime[32], cuda_driver[32], cublas[32], nccl[32];
    char models[4][128];  /* first devices' names */
    char note[128];       /* why there are no devices, if none */
} sl_env_gpu;
void sl_env_gpu_capture(sl_env_gpu *g);
/* Visible CUDA devices; 0 where CUDA is not built or there is none. */
int sl_cuda_device_count(void);
/* Bytes of the current device in use by everything (this process, others, the CUDA context),
 * as cudaMemGetInfo sees it: total - free. -1 without CUDA or a device. */
long long sl_cuda_device_used(void);
/* Bytes of the current device free now (cudaMemGetInfo's free): what a run may still allocate
 * there. -1 without CUDA or a device. */
long long sl_cuda_device_free(void);

/* Collective: gathers every rank's sl_env_local; rank 0 writes the manifest object into j. */
struct sl_ctx;
void sl_env_manifest(struct sl_ctx *ctx, struct sl_json *j);

extern const char *sl_build_git_describe; /* from the generated build/build_info.c */
extern const char *sl_build_options;
extern const char *sl_build_programs;     /* the suite's programs, "allreduce|checkpoint|..." */

#endif
