/*
 * A fake libnvidia-ml.so.1 for tests and `simulate`: real prototypes, return codes, struct layouts and
 * versioned symbol names (nvml.h, API 13), driven by a JSON node description.
 *
 * Why a C library and not a Python mock: the backend must load it exactly as it loads the real driver
 * library (pynvml unchanged, ctypes, lazy dlsym), so every ABI mistake - a wrong struct offset, a
 * missing versioned symbol, an int where pynvml passes a pointer - shows up in tests, not on a node.
 *
 * The node file is named by $HCS_FAKE_NVML_NODE and (re)read by nvmlInit* whenever its path, inode,
 * size or mtime differ from the one loaded; state created at run time (MIG instances, lost GPUs)
 * survives further inits of the same file. Schema: see vendors/nvidia/fake/README.md.
 *
 * Run-time control (events, GPU lost, library failure) comes from a "control file" that tests append
 * JSON lines to; the fake reads new lines at the start of every call and while nvmlEventSetWait_v2
 * waits (every 5 ms), so a test triggers an event without sleeping. An event command is held until an
 * event set is registered for that type on that GPU, so an event sent before the health loop
 * registered is not lost (commands after it wait behind it, keeping their order).
 *
 * Functions that are not implemented are simply not exported: pynvml then raises FunctionNotFound,
 * as it does against an older driver. The node file can also make named functions answer
 * NVML_ERROR_NOT_SUPPORTED, and the build can hide named symbols (vendors/nvidia/fake/build.py).
 */
#define _GNU_SOURCE
#include "nvml_abi.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#define API __attribute__((visibility("default")))

#define MAX_GPUS 32
#define MAX_GI 8
#define MAX_CI 8
#define MAX_PLACEMENTS 8
#define MAX_SETS 32
#define QUEUE_LEN 256
#define MAX_NAMES 64
#define MAX_SCHEDULED 64
#define POLL_MS 5
#define NO_ID 0xFFFFFFFFu

/* JSON reading for the node and control files: vendors/fakelib/fake_json.h */
#include "fake_json.h"

/* ------------------------------------------------------------------------------------------------ */
/* State                                                                                            */
/* ------------------------------------------------------------------------------------------------ */

enum { KIND_GPU = 1, KIND_MIG = 2 };

/* Every device handle (GPU or MIG device) points at one of these, embedded first in its owner. */
struct nvmlDevice_st {
    int kind;
};

typedef struct {
    int supported;
    unsigned id, slices, instances, sm, ce, dec, enc, jpeg, ofa;
    unsigned long long mem_mb;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    unsigned nplace, place_start[MAX_PLACEMENTS], place_size;
} gi_profile_t;

typedef struct gpu gpu_t;
typedef struct nvmlGpuInstance_st gi_t;
typedef struct nvmlComputeInstance_st ci_t;

struct nvmlComputeInstance_st {
    struct nvmlDevice_st dev; /* the MIG device handle of this compute instance */
    int used;
    unsigned id, profile_index, start, size;
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    gi_t *gi;
};

struct nvmlGpuInstance_st {
    int used;
    unsigned id, profile_index, start, size;
    gpu_t *gpu;
    ci_t cis[MAX_CI];
};

typedef struct {
    int state;
    unsigned remote_type;
    unsigned version;
    char remote_bus[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} link_t;

struct gpu {
    struct nvmlDevice_st dev;
    unsigned index;
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
    unsigned minor;
    unsigned long long mem_total, mem_used, mem_reserved;
    int numa_node, nvml_numa;
    int cc_major, cc_minor;
    unsigned sm_count;
    unsigned long long supported_events;
    int has_nvlink;
    unsigned nlinks;
    link_t links[NVML_NVLINK_MAX_LINKS];
    int has_mig;
    unsigned mig_mode, mig_pending, max_mig, mem_slices, compute_slices, profile_count;
    gi_profile_t prof[NVML_GPU_INSTANCE_PROFILE_COUNT];
    gi_t gis[MAX_GI];
    int lost;
};

typedef struct {
    nvmlDevice_t device;
    unsigned long long type, data;
    unsigned gi, ci;
} ev_t;

struct nvmlEventSet_st {
    int used;
    unsigned long long mask[MAX_GPUS];
    ev_t q[QUEUE_LEN];
    unsigned head, count;
    nvmlReturn_t pending;
};

static struct {
    int loaded;
    char path[4096];
    struct stat st;
    jv tree;
    unsigned refcount;
    nvmlReturn_t init_error;
    nvmlReturn_t fail;
    char driver_version[80];
    char nvml_version[80];
    int cuda_version;
    unsigned ngpus;
    gpu_t gpus[MAX_GPUS];
    int has_topo;
    int topo[MAX_GPUS][MAX_GPUS];
    unsigned n_unsupported;
    char unsupported[MAX_NAMES][96];
    char control_path[4096];
    off_t control_off;
    long long load_ms;
    unsigned nsched;
    const jv *sched[MAX_SCHEDULED];
    int fired[MAX_SCHEDULED];
    unsigned serial;
    struct nvmlEventSet_st sets[MAX_SETS];
} S;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond;

__attribute__((constructor)) static void fake_nvml_setup(void) {
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&g_cond, &attr);
    pthread_condattr_destroy(&attr);
}

static long long now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000LL + t.tv_nsec / 1000000;
}

static void unlock_guard(int *unused) {
    (void)unused;
    pthread_mutex_unlock(&g_lock);
}

/* The lock is released by the cleanup attribute on every return path. */
#define LOCKED int hcs_guard_ __attribute__((cleanup(unlock_guard), unused)) = (pthread_mutex_lock(&g_lock), 0)

static void pump(void);
static void copy_bounded(char *dst, size_t cap, const char *src);

/* $HCS_FAKE_NVML_CALL_LOG names a file that gets one line per call through the prologue (every
 * device, system and event call; not init or shutdown), with the function's name: tests count the
 * calls a backend makes. Read at every call, so a test may set or unset it at any time. */
static FILE *call_log;
static char call_log_path[4096];

static void log_call(const char *fn) {
    const char *path = getenv("HCS_FAKE_NVML_CALL_LOG");
    if (!path || !path[0] || strcmp(path, call_log_path) != 0) {
        if (call_log) fclose(call_log);
        call_log = NULL;
        call_log_path[0] = '\0';
        if (!path || !path[0]) return;
        copy_bounded(call_log_path, sizeof call_log_path, path); /* tried once, opened or not */
        call_log = fopen(path, "a");
        if (!call_log) fprintf(stderr, "libnvml_fake: call log %s: %s\n", path, strerror(errno));
    }
    if (!call_log) return;
    fprintf(call_log, "%s\n", fn);
    fflush(call_log);
}

static nvmlReturn_t prologue(const char *fn) {
    log_call(fn);
    if (!S.refcount) return NVML_ERROR_UNINITIALIZED;
    pump();
    if (S.fail) return S.fail;
    for (unsigned k = 0; k < S.n_unsupported; k++)
        if (strcmp(S.unsupported[k], fn) == 0) return NVML_ERROR_NOT_SUPPORTED;
    return NVML_SUCCESS;
}

#define ENTER()                                        \
    LOCKED;                                            \
    do {                                               \
        nvmlReturn_t enter_rc_ = prologue(__func__);   \
        if (enter_rc_ != NVML_SUCCESS) return enter_rc_; \
    } while (0)

static void copy_bounded(char *dst, size_t cap, const char *src) {
    snprintf(dst, cap, "%s", src ? src : "");
}

static nvmlReturn_t copy_out(char *dst, unsigned int length, const char *src) {
    if (!dst) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(src) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, src, strlen(src) + 1);
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------------------------------------------ */
/* Handles                                                                                          */
/* ------------------------------------------------------------------------------------------------ */

static nvmlReturn_t resolve(nvmlDevice_t h, gpu_t **gp, ci_t **cp) {
    if (!h) return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned i = 0; i < S.ngpus; i++) {
        gpu_t *g = &S.gpus[i];
        ci_t *mig = NULL;
        if (h == &g->dev) {
            mig = NULL;
        } else {
            for (unsigned a = 0; a < MAX_GI && !mig; a++)
                for (unsigned b = 0; b < MAX_CI; b++)
                    if (h == &g->gis[a].cis[b].dev) {
                        if (!g->gis[a].used || !g->gis[a].cis[b].used) return NVML_ERROR_INVALID_ARGUMENT;
                        mig = &g->gis[a].cis[b];
                        break;
                    }
            if (!mig) continue;
        }
        *gp = g;
        *cp = mig;
        return g->lost ? NVML_ERROR_GPU_IS_LOST : NVML_SUCCESS;
    }
    return NVML_ERROR_INVALID_ARGUMENT;
}

/* For calls that only make sense on a full GPU: a MIG handle answers NOT_SUPPORTED. */
static nvmlReturn_t resolve_gpu(nvmlDevice_t h, gpu_t **gp) {
    ci_t *mig = NULL;
    nvmlReturn_t rc = resolve(h, gp, &mig);
    if (rc != NVML_SUCCESS) return rc;
    return mig ? NVML_ERROR_NOT_SUPPORTED : NVML_SUCCESS;
}

static nvmlReturn_t resolve_gi(nvmlGpuInstance_t h, gi_t **out) {
    for (unsigned i = 0; i < S.ngpus; i++)
        for (unsigned a = 0; a < MAX_GI; a++)
            if (h == &S.gpus[i].gis[a]) {
                if (!h->used) return NVML_ERROR_INVALID_ARGUMENT;
                *out = h;
                return S.gpus[i].lost ? NVML_ERROR_GPU_IS_LOST : NVML_SUCCESS;
            }
    return NVML_ERROR_INVALID_ARGUMENT;
}

static nvmlReturn_t resolve_ci(nvmlComputeInstance_t h, ci_t **out) {
    for (unsigned i = 0; i < S.ngpus; i++)
        for (unsigned a = 0; a < MAX_GI; a++)
            for (unsigned b = 0; b < MAX_CI; b++)
                if (h == &S.gpus[i].gis[a].cis[b]) {
                    if (!h->used || !S.gpus[i].gis[a].used) return NVML_ERROR_INVALID_ARGUMENT;
                    *out = h;
                    return S.gpus[i].lost ? NVML_ERROR_GPU_IS_LOST : NVML_SUCCESS;
                }
    return NVML_ERROR_INVALID_ARGUMENT;
}

static struct nvmlEventSet_st *valid_set(nvmlEventSet_t set) {
    for (unsigned k = 0; k < MAX_SETS; k++)
        if (set == &S.sets[k] && set->used) return set;
    return NULL;
}

/* ------------------------------------------------------------------------------------------------ */
/* MIG bookkeeping                                                                                  */
/* ------------------------------------------------------------------------------------------------ */

/* Compute slices of CI profile index j (NVML_COMPUTE_INSTANCE_PROFILE_*). */
static const unsigned CI_SLICES[NVML_COMPUTE_INSTANCE_PROFILE_COUNT] = {1, 2, 3, 4, 7, 8, 6, 1, 7};

static gi_profile_t *gi_profile(gi_t *gi) { return &gi->gpu->prof[gi->profile_index]; }

static int profile_index_by_id(const gpu_t *g, unsigned id) {
    for (unsigned p = 0; p < NVML_GPU_INSTANCE_PROFILE_COUNT; p++)
        if (g->prof[p].supported && g->prof[p].id == id) return (int)p;
    return -1;
}

/* Whether CI profile j fits a GI, and how many fit: all sizes up to the GI's, as on A100/H100. */
static int ci_profile_ok(gi_t *gi, unsigned j, unsigned *count) {
    unsigned g = gi_profile(gi)->slices;
    if (j > 4) return 0;
    unsigned s = CI_SLICES[j];
    if (s > g || (g == 4 && s == 3)) return 0;
    if (count) *count = g / s;
    return 1;
}

static int full_ci_profile(gi_t *gi) {
    for (unsigned j = 0; j <= 4; j++)
        if (CI_SLICES[j] == gi_profile(gi)->slices) return (int)j;
    return 0;
}

static int gi_range_free(const gpu_t *g, unsigned start, unsigned size) {
    for (unsigned a = 0; a < MAX_GI; a++) {
        const gi_t *o = &g->gis[a];
        if (o->used && start < o->start + o->size && o->start < start + size) return 0;
    }
    return start + size <= g->mem_slices;
}

static unsigned gi_compute_used(const gpu_t *g) {
    unsigned used = 0;
    for (unsigned a = 0; a < MAX_GI; a++)
        if (g->gis[a].used) used += g->prof[g->gis[a].profile_index].slices;
    return used;
}

static unsigned gi_count(const gpu_t *g, unsigned pidx) {
    unsigned n = 0;
    for (unsigned a = 0; a < MAX_GI; a++)
        if (g->gis[a].used && g->gis[a].profile_index == pidx) n++;
    return n;
}

/* First placement (in the profile's order) that is free, or -1; `want` >= 0 asks for that start. */
static int gi_pick_placement(const gpu_t *g, unsigned pidx, long long want) {
    const gi_profile_t *p = &g->prof[pidx];
    if (gi_count(g, pidx) >= p->instances) return -1;
    if (gi_compute_used(g) + p->slices > g->compute_slices) return -1;
    for (unsigned k = 0; k < p->nplace; k++) {
        if (want >= 0 && (long long)p->place_start[k] != want) continue;
        if (gi_range_free(g, p->place_start[k], p->place_size)) return (int)p->place_start[k];
    }
    return -1;
}

static nvmlReturn_t gi_create(gpu_t *g, unsigned pidx, long long want_start, long long want_id, gi_t **out) {
    int start = gi_pick_placement(g, pidx, want_start);
    if (start < 0) return NVML_ERROR_INSUFFICIENT_RESOURCES;
    gi_t *slot = NULL;
    for (unsigned a = 0; a < MAX_GI && !slot; a++)
        if (!g->gis[a].used) slot = &g->gis[a];
    if (!slot) return NVML_ERROR_INSUFFICIENT_RESOURCES;
    unsigned id = want_id >= 0 ? (unsigned)want_id : 1;
    for (int clash = 1; clash && want_id < 0;) {
        clash = 0;
        for (unsigned a = 0; a < MAX_GI; a++)
            if (g->gis[a].used && g->gis[a].id == id) {
                id++;
                clash = 1;
            }
    }
    memset(slot, 0, sizeof(*slot));
    slot->used = 1;
    slot->id = id;
    slot->profile_index = pidx;
    slot->start = (unsigned)start;
    slot->size = g->prof[pidx].place_size;
    slot->gpu = g;
    for (unsigned b = 0; b < MAX_CI; b++) {
        slot->cis[b].dev.kind = KIND_MIG;
        slot->cis[b].gi = slot;
    }
    *out = slot;
    return NVML_SUCCESS;
}

static uint64_t fnv1a(const char *s, uint64_t h) {
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ULL;
    }
    return h;
}

static void make_mig_uuid(char *out, const gpu_t *g, unsigned gi, unsigned ci) {
    char seed[160];
    snprintf(seed, sizeof(seed), "%s/%u/%u/%u", g->uuid, gi, ci, ++S.serial);
    uint64_t a = fnv1a(seed, 0xcbf29ce484222325ULL);
    uint64_t b = fnv1a(seed, a ^ 0x9e3779b97f4a7c15ULL);
    snprintf(out, NVML_DEVICE_UUID_V2_BUFFER_SIZE, "MIG-%08x-%04x-%04x-%04x-%012llx", (unsigned)(a >> 32),
             (unsigned)(a >> 16) & 0xffffu, (unsigned)(a & 0x0fffu) | 0x4000u,
             ((unsigned)(b >> 48) & 0x3fffu) | 0x8000u, (unsigned long long)(b & 0xffffffffffffULL));
}

static nvmlReturn_t ci_create(gi_t *gi, unsigned j, long long want_id, const char *uuid, ci_t **out) {
    unsigned limit = 0;
    if (!ci_profile_ok(gi, j, &limit)) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned s = CI_SLICES[j], g = gi_profile(gi)->slices, have = 0;
    for (unsigned b = 0; b < MAX_CI; b++)
        if (gi->cis[b].used && gi->cis[b].profile_index == j) have++;
    if (have >= limit) return NVML_ERROR_INSUFFICIENT_RESOURCES;
    int start = -1;
    for (unsigned k = 0; k + s <= g && start < 0; k += s) {
        int free_range = 1;
        for (unsigned b = 0; b < MAX_CI; b++) {
            ci_t *o = &gi->cis[b];
            if (o->used && k < o->start + o->size && o->start < k + s) free_range = 0;
        }
        if (free_range) start = (int)k;
    }
    if (start < 0) return NVML_ERROR_INSUFFICIENT_RESOURCES;
    ci_t *slot = NULL;
    for (unsigned b = 0; b < MAX_CI && !slot; b++)
        if (!gi->cis[b].used) slot = &gi->cis[b];
    if (!slot) return NVML_ERROR_INSUFFICIENT_RESOURCES;
    unsigned id = want_id >= 0 ? (unsigned)want_id : 0;
    for (int clash = 1; clash && want_id < 0;) {
        clash = 0;
        for (unsigned b = 0; b < MAX_CI; b++)
            if (gi->cis[b].used && gi->cis[b].id == id) {
                id++;
                clash = 1;
            }
    }
    slot->used = 1;
    slot->id = id;
    slot->profile_index = j;
    slot->start = (unsigned)start;
    slot->size = s;
    if (uuid && uuid[0]) copy_bounded(slot->uuid, sizeof(slot->uuid), uuid);
    else make_mig_uuid(slot->uuid, gi->gpu, gi->id, id);
    *out = slot;
    return NVML_SUCCESS;
}

/* MIG devices of a GPU in slot order: by GI placement, then GI id, then CI placement. */
static unsigned mig_list(gpu_t *g, ci_t **out) {
    unsigned n = 0;
    for (unsigned a = 0; a < MAX_GI; a++) {
        if (!g->gis[a].used) continue;
        for (unsigned b = 0; b < MAX_CI; b++)
            if (g->gis[a].cis[b].used) out[n++] = &g->gis[a].cis[b];
    }
    for (unsigned x = 1; x < n; x++) {
        ci_t *cur = out[x];
        unsigned y = x;
        while (y > 0) {
            ci_t *prev = out[y - 1];
            int later = prev->gi->start > cur->gi->start ||
                        (prev->gi->start == cur->gi->start &&
                         (prev->gi->id > cur->gi->id || (prev->gi->id == cur->gi->id && prev->start > cur->start)));
            if (!later) break;
            out[y] = prev;
            y--;
        }
        out[y] = cur;
    }
    return n;
}

static void mig_profile_label(ci_t *ci, char *out, size_t cap) {
    const char *gi_name = gi_profile(ci->gi)->name;
    const char *bare = strncmp(gi_name, "MIG ", 4) == 0 ? gi_name + 4 : gi_name;
    if (CI_SLICES[ci->profile_index] == gi_profile(ci->gi)->slices) snprintf(out, cap, "MIG %s", bare);
    else snprintf(out, cap, "MIG %uc.%s", CI_SLICES[ci->profile_index], bare);
}

/* ------------------------------------------------------------------------------------------------ */
/* Loading the node file                                                                            */
/* ------------------------------------------------------------------------------------------------ */

static void parse_bus_id(const char *text, unsigned *domain, unsigned *bus, unsigned *device) {
    unsigned d = 0, b = 0, dv = 0, fn = 0;
    if (sscanf(text, "%x:%x:%x.%x", &d, &b, &dv, &fn) >= 3) {
        *domain = d;
        *bus = b;
        *device = dv;
    }
}

static void fill_pci(nvmlPciInfo_t *pci, unsigned domain, unsigned bus, unsigned device, unsigned device_id,
                     unsigned subsystem) {
    memset(pci, 0, sizeof(*pci));
    pci->domain = domain;
    pci->bus = bus;
    pci->device = device;
    pci->pciDeviceId = device_id;
    pci->pciSubSystemId = subsystem;
    snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%04X:%02X:%02X.0", domain & 0xffffu, bus & 0xffu,
             device & 0xffu);
    snprintf(pci->busId, sizeof(pci->busId), "%08X:%02X:%02X.0", domain, bus & 0xffu, device & 0xffu);
}

static int load_fail(const char *path, const char *what) {
    fprintf(stderr, "libnvml_fake: %s: %s\n", path, what);
    return 0;
}

static int load_profiles(gpu_t *g, const jv *mig, const char *path) {
    const jv *profiles = jget(mig, "profiles");
    for (size_t k = 0; k < jlen(profiles); k++) {
        const jv *p = &profiles->items[k];
        long long idx = jint(p, "index", -1);
        if (idx < 0 || idx >= NVML_GPU_INSTANCE_PROFILE_COUNT) return load_fail(path, "MIG profile index out of range");
        gi_profile_t *gp = &g->prof[idx];
        gp->supported = 1;
        gp->id = (unsigned)jint(p, "id", idx);
        gp->slices = (unsigned)jint(p, "slices", 1);
        gp->instances = (unsigned)jint(p, "instances", 1);
        gp->sm = (unsigned)jint(p, "sm", 16);
        gp->ce = (unsigned)jint(p, "copy_engines", 1);
        gp->dec = (unsigned)jint(p, "decoders", 1);
        gp->enc = (unsigned)jint(p, "encoders", 0);
        gp->jpeg = (unsigned)jint(p, "jpeg", 1);
        gp->ofa = (unsigned)jint(p, "ofa", 0);
        gp->mem_mb = (unsigned long long)jint(p, "memory_mb", 9984);
        copy_bounded(gp->name, sizeof(gp->name), jstr(p, "name", "MIG"));
        gp->place_size = (unsigned)jint(p, "placement_size", gp->slices);
        const jv *starts = jget(p, "placements");
        for (size_t s = 0; s < jlen(starts) && s < MAX_PLACEMENTS; s++) {
            long long v = 0;
            jas_int(&starts->items[s], &v);
            gp->place_start[gp->nplace++] = (unsigned)v;
        }
    }
    return 1;
}

static int load_instances(gpu_t *g, const jv *mig, const char *path) {
    const jv *instances = jget(mig, "instances");
    for (size_t k = 0; k < jlen(instances); k++) {
        const jv *inst = &instances->items[k];
        long long pidx = jint(inst, "profile_index", -1);
        if (pidx < 0) pidx = profile_index_by_id(g, (unsigned)jint(inst, "profile", -1));
        if (pidx < 0 || pidx >= NVML_GPU_INSTANCE_PROFILE_COUNT || !g->prof[pidx].supported)
            return load_fail(path, "MIG instance names an unknown profile");
        gi_t *gi = NULL;
        if (gi_create(g, (unsigned)pidx, jint(inst, "start", -1), jint(inst, "id", -1), &gi) != NVML_SUCCESS)
            return load_fail(path, "MIG instance does not fit (placement, instance count or slices)");
        const jv *cis = jget(inst, "compute");
        if (!cis) {
            ci_t *ci = NULL;
            if (ci_create(gi, (unsigned)full_ci_profile(gi), -1, jstr(inst, "uuid", NULL), &ci) != NVML_SUCCESS)
                return load_fail(path, "cannot create the compute instance");
            continue;
        }
        for (size_t c = 0; c < jlen(cis); c++) {
            const jv *cd = &cis->items[c];
            long long j = jint(cd, "profile_index", full_ci_profile(gi));
            ci_t *ci = NULL;
            if (j < 0 || ci_create(gi, (unsigned)j, jint(cd, "id", -1), jstr(cd, "uuid", NULL), &ci) != NVML_SUCCESS)
                return load_fail(path, "compute instance does not fit its GPU instance");
        }
    }
    return 1;
}

static unsigned parse_link_type(const jv *link) {
    const char *t = jstr(link, "type", NULL);
    if (!t) return (unsigned)jint(link, "type", NVML_NVLINK_DEVICE_TYPE_GPU);
    if (strcmp(t, "switch") == 0) return NVML_NVLINK_DEVICE_TYPE_SWITCH;
    if (strcmp(t, "gpu") == 0) return NVML_NVLINK_DEVICE_TYPE_GPU;
    return NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
}

static int load_gpu(gpu_t *g, unsigned i, const jv *d, const char *path) {
    char dflt[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    g->dev.kind = KIND_GPU;
    g->index = i;
    snprintf(dflt, sizeof(dflt), "GPU-00000000-0000-4000-8000-%012u", i);
    copy_bounded(g->uuid, sizeof(g->uuid), jstr(d, "uuid", dflt));
    copy_bounded(g->name, sizeof(g->name), jstr(d, "name", "NVIDIA H100 80GB HBM3"));
    g->bus = i + 1;
    parse_bus_id(jstr(d, "bus_id", ""), &g->domain, &g->bus, &g->device);
    g->pci_device_id = (unsigned)jint(d, "pci_device_id", 0x233010de);
    g->pci_subsystem_id = (unsigned)jint(d, "pci_subsystem_id", 0x16c110de);
    g->minor = (unsigned)jint(d, "minor", i);
    g->mem_total = (unsigned long long)jint(d, "memory_total", 85520809984LL);
    g->mem_used = (unsigned long long)jint(d, "memory_used", 0);
    g->mem_reserved = (unsigned long long)jint(d, "memory_reserved", 0);
    g->numa_node = (int)jint(d, "numa_node", -1);
    g->nvml_numa = (int)jint(d, "nvml_numa", 0);
    const jv *cc = jget(d, "compute_capability");
    long long major = 9, minor = 0;
    if (jlen(cc) == 2) {
        jas_int(&cc->items[0], &major);
        jas_int(&cc->items[1], &minor);
    }
    g->cc_major = (int)major;
    g->cc_minor = (int)minor;
    g->sm_count = (unsigned)jint(d, "sm_count", 132);
    g->supported_events = (unsigned long long)jint(d, "supported_events", nvmlEventTypeAll);
    g->lost = (int)jint(d, "lost", 0);

    const jv *links = jget(d, "nvlinks");
    if (links) {
        g->has_nvlink = 1;
        g->nlinks = (unsigned)jint(d, "nvlink_count", (long long)jlen(links));
        if (g->nlinks > NVML_NVLINK_MAX_LINKS) g->nlinks = NVML_NVLINK_MAX_LINKS;
        unsigned version = (unsigned)jint(d, "nvlink_version", 4);
        for (unsigned k = 0; k < g->nlinks; k++) {
            g->links[k].version = version;
            g->links[k].state = 0;
            g->links[k].remote_type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
        }
        for (size_t k = 0; k < jlen(links) && k < g->nlinks; k++) {
            const jv *l = &links->items[k];
            g->links[k].state = (int)jint(l, "state", 1);
            g->links[k].remote_type = parse_link_type(l);
            g->links[k].version = (unsigned)jint(l, "version", version);
            copy_bounded(g->links[k].remote_bus, sizeof(g->links[k].remote_bus), jstr(l, "remote", ""));
        }
    }

    const jv *mig = jget(d, "mig");
    if (mig) {
        g->has_mig = 1;
        g->mig_mode = (unsigned)jint(mig, "mode", 0);
        g->mig_pending = (unsigned)jint(mig, "pending", g->mig_mode);
        g->max_mig = (unsigned)jint(mig, "max_devices", 7);
        g->mem_slices = (unsigned)jint(mig, "memory_slices", 8);
        g->compute_slices = (unsigned)jint(mig, "compute_slices", 7);
        /* Driver 580 answers INVALID_ARGUMENT from index 17 (3_SLICE_GFX) on although the header counts 18. */
        g->profile_count = (unsigned)jint(mig, "profile_count", 17);
        if (g->profile_count > NVML_GPU_INSTANCE_PROFILE_COUNT) g->profile_count = NVML_GPU_INSTANCE_PROFILE_COUNT;
        for (unsigned a = 0; a < MAX_GI; a++) g->gis[a].gpu = g;
        if (!load_profiles(g, mig, path)) return 0;
        if (!load_instances(g, mig, path)) return 0;
    }
    return 1;
}

static void reset_state(void) {
    jfree(&S.tree);
    S.loaded = 0;
    S.init_error = NVML_SUCCESS;
    S.fail = NVML_SUCCESS;
    S.ngpus = 0;
    memset(S.gpus, 0, sizeof(S.gpus));
    S.has_topo = 0;
    S.n_unsupported = 0;
    S.control_path[0] = '\0';
    S.control_off = 0;
    S.nsched = 0;
    memset(S.fired, 0, sizeof(S.fired));
    memset(S.sets, 0, sizeof(S.sets));
}

static nvmlReturn_t load_node(const char *path, const struct stat *st) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "libnvml_fake: cannot open node file %s: %s\n", path, strerror(errno));
        return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    size_t cap = (size_t)st->st_size + 1, len = 0;
    char *text = malloc(cap);
    if (!text) {
        fclose(f);
        return NVML_ERROR_MEMORY;
    }
    len = fread(text, 1, cap - 1, f);
    fclose(f);
    jv root;
    const char *err = NULL;
    size_t at = 0;
    int ok = jparse_text(text, len, &root, &err, &at);
    free(text);
    if (!ok) {
        fprintf(stderr, "libnvml_fake: %s: JSON error at byte %zu: %s\n", path, at, err);
        return NVML_ERROR_UNKNOWN;
    }
    if (root.t != J_OBJ) {
        jfree(&root);
        fprintf(stderr, "libnvml_fake: %s: top level must be an object\n", path);
        return NVML_ERROR_UNKNOWN;
    }
    reset_state();
    S.tree = root;
    const jv *t = &S.tree;

    copy_bounded(S.driver_version, sizeof(S.driver_version), jstr(t, "driver_version", "580.159.04"));
    copy_bounded(S.nvml_version, sizeof(S.nvml_version), jstr(t, "nvml_version", "13.580.159.04"));
    S.cuda_version = (int)jint(t, "cuda_driver_version", 13000);
    S.init_error = (nvmlReturn_t)jint(t, "init_error", 0);

    const jv *gpus = jget(t, "gpus");
    for (size_t i = 0; i < jlen(gpus) && i < MAX_GPUS; i++) {
        if (!load_gpu(&S.gpus[i], (unsigned)i, &gpus->items[i], path)) {
            reset_state();
            return NVML_ERROR_UNKNOWN;
        }
        S.ngpus++;
    }

    const jv *topo = jget(t, "topology");
    if (topo) {
        S.has_topo = 1;
        for (unsigned a = 0; a < MAX_GPUS; a++)
            for (unsigned b = 0; b < MAX_GPUS; b++) S.topo[a][b] = NVML_TOPOLOGY_SYSTEM;
        for (size_t a = 0; a < jlen(topo) && a < MAX_GPUS; a++)
            for (size_t b = 0; b < jlen(&topo->items[a]) && b < MAX_GPUS; b++) {
                long long level = NVML_TOPOLOGY_SYSTEM;
                jas_int(&topo->items[a].items[b], &level);
                S.topo[a][b] = (int)level;
            }
    }

    const jv *names = jget(t, "not_supported");
    for (size_t k = 0; k < jlen(names) && k < MAX_NAMES; k++)
        if (names->items[k].t == J_STR)
            copy_bounded(S.unsupported[S.n_unsupported++], sizeof(S.unsupported[0]), names->items[k].s);

    const char *control = jstr(t, "control_file", NULL);
    if (control && control[0] == '/') {
        copy_bounded(S.control_path, sizeof(S.control_path), control);
    } else if (control && control[0]) {
        const char *slash = strrchr(path, '/');
        int dir_len = slash ? (int)(slash - path) : 1;
        snprintf(S.control_path, sizeof(S.control_path), "%.*s/%s", dir_len, slash ? path : ".", control);
    }
    struct stat cst;
    /* Lines already in the control file belong to the past: start reading at its current end. */
    if (S.control_path[0] && stat(S.control_path, &cst) == 0 && jint(t, "control_from_start", 0) == 0)
        S.control_off = cst.st_size;

    const jv *events = jget(t, "events");
    for (size_t k = 0; k < jlen(events) && k < MAX_SCHEDULED; k++) S.sched[S.nsched++] = &events->items[k];

    S.load_ms = now_ms();
    copy_bounded(S.path, sizeof(S.path), path);
    S.st = *st;
    S.loaded = 1;
    return NVML_SUCCESS;
}

static int node_changed(const char *path, const struct stat *st) {
    return !S.loaded || strcmp(path, S.path) != 0 || st->st_ino != S.st.st_ino || st->st_dev != S.st.st_dev ||
           st->st_size != S.st.st_size || st->st_mtim.tv_sec != S.st.st_mtim.tv_sec ||
           st->st_mtim.tv_nsec != S.st.st_mtim.tv_nsec;
}

/* ------------------------------------------------------------------------------------------------ */
/* Control commands: events, lost GPUs, library failure                                             */
/* ------------------------------------------------------------------------------------------------ */

static gpu_t *cmd_target(const jv *cmd, ci_t **mig) {
    const jv *v = jget(cmd, "gpu");
    long long idx;
    *mig = NULL;
    if (v && v->t == J_STR && (strncmp(v->s, "GPU-", 4) == 0 || strncmp(v->s, "MIG-", 4) == 0)) {
        for (unsigned i = 0; i < S.ngpus; i++) {
            gpu_t *g = &S.gpus[i];
            if (strcmp(g->uuid, v->s) == 0) return g;
            for (unsigned a = 0; a < MAX_GI; a++)
                for (unsigned b = 0; b < MAX_CI; b++)
                    if (g->gis[a].used && g->gis[a].cis[b].used && strcmp(g->gis[a].cis[b].uuid, v->s) == 0) {
                        *mig = &g->gis[a].cis[b];
                        return g;
                    }
        }
        return NULL;
    }
    if (jas_int(v, &idx) && idx >= 0 && (unsigned long long)idx < S.ngpus) return &S.gpus[idx];
    return NULL;
}

static int registered(const gpu_t *g, unsigned long long type) {
    for (unsigned k = 0; k < MAX_SETS; k++)
        if (S.sets[k].used && (S.sets[k].mask[g->index] & type)) return 1;
    return 0;
}

static void deliver(gpu_t *g, unsigned long long type, unsigned long long data, unsigned gi, unsigned ci) {
    for (unsigned k = 0; k < MAX_SETS; k++) {
        struct nvmlEventSet_st *set = &S.sets[k];
        if (!set->used || !(set->mask[g->index] & type) || set->count == QUEUE_LEN) continue;
        ev_t *ev = &set->q[(set->head + set->count) % QUEUE_LEN];
        ev->device = &g->dev;
        ev->type = type;
        ev->data = data;
        ev->gi = gi;
        ev->ci = ci;
        set->count++;
    }
}

/* Apply one command; 0 means "not yet" (an event with nobody registered), keep it for later. */
static int apply_cmd(const jv *cmd) {
    const char *op = jstr(cmd, "op", "");
    ci_t *mig = NULL;
    gpu_t *g = NULL;
    if (strcmp(op, "fail") == 0) {
        S.fail = (nvmlReturn_t)jint(cmd, "code", NVML_ERROR_UNKNOWN);
    } else if (strcmp(op, "xid") == 0 || strcmp(op, "event") == 0) {
        g = cmd_target(cmd, &mig);
        if (!g) {
            fprintf(stderr, "libnvml_fake: control: %s names no GPU\n", op);
            return 1;
        }
        int is_xid = strcmp(op, "xid") == 0;
        unsigned long long type =
            is_xid ? nvmlEventTypeXidCriticalError
                   : (unsigned long long)jint(cmd, "type", nvmlEventTypeDoubleBitEccError);
        if (!registered(g, type)) return 0; /* nobody listens for it on this GPU yet: hold it */
        unsigned gi = (unsigned)jint(cmd, "gi", mig ? (long long)mig->gi->id : NO_ID);
        unsigned ci = (unsigned)jint(cmd, "ci", mig ? (long long)mig->id : NO_ID);
        unsigned long long data = (unsigned long long)(is_xid ? jint(cmd, "xid", 999) : jint(cmd, "data", 0));
        deliver(g, type, data, gi, ci);
    } else if (strcmp(op, "lost") == 0 || strcmp(op, "restore") == 0) {
        g = cmd_target(cmd, &mig);
        if (!g) {
            fprintf(stderr, "libnvml_fake: control: %s names no GPU\n", op);
            return 1;
        }
        g->lost = strcmp(op, "lost") == 0;
        if (g->lost)
            for (unsigned k = 0; k < MAX_SETS; k++)
                if (S.sets[k].used && S.sets[k].mask[g->index]) S.sets[k].pending = NVML_ERROR_GPU_IS_LOST;
    } else {
        fprintf(stderr, "libnvml_fake: control: unknown op '%s'\n", op);
    }
    pthread_cond_broadcast(&g_cond);
    return 1;
}

static void pump_control_file(void) {
    struct stat st;
    if (!S.control_path[0] || stat(S.control_path, &st) != 0) return;
    if (st.st_size < S.control_off) S.control_off = 0; /* truncated: start over */
    if (st.st_size == S.control_off) return;
    FILE *f = fopen(S.control_path, "rb");
    if (!f) return;
    size_t want = (size_t)(st.st_size - S.control_off);
    char *buf = malloc(want + 1);
    size_t got = 0;
    if (buf && fseeko(f, S.control_off, SEEK_SET) == 0) got = fread(buf, 1, want, f);
    fclose(f);
    size_t pos = 0;
    while (buf && pos < got) {
        char *nl = memchr(buf + pos, '\n', got - pos);
        if (!nl) break; /* a line still being written */
        size_t line_len = (size_t)(nl - (buf + pos));
        jv cmd;
        const char *err = NULL;
        size_t at = 0;
        int consumed = 1;
        int blank = 1;
        for (size_t k = 0; k < line_len; k++)
            if (buf[pos + k] != ' ' && buf[pos + k] != '\t' && buf[pos + k] != '\r') blank = 0;
        if (!blank) {
            if (jparse_text(buf + pos, line_len, &cmd, &err, &at)) {
                consumed = apply_cmd(&cmd);
                jfree(&cmd);
            } else {
                fprintf(stderr, "libnvml_fake: control file %s: bad line (%s at %zu)\n", S.control_path, err, at);
            }
        }
        if (!consumed) break;
        pos += line_len + 1;
        S.control_off += (off_t)(line_len + 1);
    }
    free(buf);
}

static void pump(void) {
    if (!S.loaded) return;
    long long since = now_ms() - S.load_ms;
    for (unsigned k = 0; k < S.nsched; k++) {
        if (S.fired[k]) continue;
        if (jint(S.sched[k], "after_ms", 0) > since) break;
        if (!apply_cmd(S.sched[k])) break;
        S.fired[k] = 1;
    }
    pump_control_file();
}

/* ------------------------------------------------------------------------------------------------ */
/* Init, shutdown, system                                                                           */
/* ------------------------------------------------------------------------------------------------ */

static nvmlReturn_t do_init(void) {
    LOCKED;
    const char *path = getenv("HCS_FAKE_NVML_NODE");
    if (path && path[0]) {
        struct stat st;
        if (stat(path, &st) != 0) {
            fprintf(stderr, "libnvml_fake: node file %s: %s\n", path, strerror(errno));
            return NVML_ERROR_DRIVER_NOT_LOADED;
        }
        if (node_changed(path, &st)) {
            nvmlReturn_t rc = load_node(path, &st);
            if (rc != NVML_SUCCESS) return rc;
        }
    } else if (!S.loaded) {
        fprintf(stderr, "libnvml_fake: HCS_FAKE_NVML_NODE is not set\n");
        return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    if (S.init_error) return S.init_error;
    pump();
    if (S.fail) return S.fail;
    S.refcount++;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlInit(void) { return do_init(); }
API nvmlReturn_t nvmlInit_v2(void) { return do_init(); }
API nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    return do_init();
}

API nvmlReturn_t nvmlShutdown(void) {
    LOCKED;
    if (!S.refcount) return NVML_ERROR_UNINITIALIZED;
    S.refcount--;
    return NVML_SUCCESS;
}

API const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER: return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_IRQ_ISSUE: return "Interrupt Request Issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM: return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED: return "GPU requires restart";
    case NVML_ERROR_OPERATING_SYSTEM: return "The operating system has blocked the request.";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch.";
    case NVML_ERROR_IN_USE: return "In use by another client";
    case NVML_ERROR_MEMORY: return "Insufficient Memory";
    case NVML_ERROR_NO_DATA: return "No data";
    case NVML_ERROR_INSUFFICIENT_RESOURCES: return "Insufficient resources";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    case NVML_ERROR_INVALID_STATE: return "Invalid state";
    default: return "Unknown Error";
    }
}

API nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    ENTER();
    return copy_out(version, length, S.driver_version);
}

API nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
    ENTER();
    return copy_out(version, length, S.nvml_version);
}

API nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion) {
    ENTER();
    if (!cudaDriverVersion) return NVML_ERROR_INVALID_ARGUMENT;
    *cudaDriverVersion = S.cuda_version;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion) {
    ENTER();
    if (!cudaDriverVersion) return NVML_ERROR_INVALID_ARGUMENT;
    *cudaDriverVersion = S.cuda_version;
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------------------------------------------ */
/* Enumeration and identity                                                                         */
/* ------------------------------------------------------------------------------------------------ */

API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount) {
    ENTER();
    if (!deviceCount) return NVML_ERROR_INVALID_ARGUMENT;
    *deviceCount = S.ngpus;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    ENTER();
    if (!device || index >= S.ngpus) return NVML_ERROR_INVALID_ARGUMENT;
    if (S.gpus[index].lost) return NVML_ERROR_GPU_IS_LOST;
    *device = &S.gpus[index].dev;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
    ENTER();
    if (!uuid || !device) return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned i = 0; i < S.ngpus; i++) {
        gpu_t *g = &S.gpus[i];
        nvmlDevice_t found = NULL;
        if (strcmp(g->uuid, uuid) == 0) found = &g->dev;
        for (unsigned a = 0; a < MAX_GI && !found; a++)
            for (unsigned b = 0; b < MAX_CI && !found; b++)
                if (g->gis[a].used && g->gis[a].cis[b].used && strcmp(g->gis[a].cis[b].uuid, uuid) == 0)
                    found = &g->gis[a].cis[b].dev;
        if (found) {
            if (g->lost) return NVML_ERROR_GPU_IS_LOST;
            *device = found;
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

API nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device) {
    ENTER();
    if (!pciBusId || !device) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned domain = 0, bus = 0, dev = 0;
    if (sscanf(pciBusId, "%x:%x:%x", &domain, &bus, &dev) != 3) return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned i = 0; i < S.ngpus; i++) {
        gpu_t *g = &S.gpus[i];
        if (g->domain == domain && g->bus == bus && g->device == dev) {
            if (g->lost) return NVML_ERROR_GPU_IS_LOST;
            *device = &g->dev;
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    ENTER();
    gpu_t *g;
    ci_t *mig;
    nvmlReturn_t rc = resolve(device, &g, &mig);
    if (rc != NVML_SUCCESS) return rc;
    if (!mig) return copy_out(name, length, g->name);
    char label[NVML_DEVICE_NAME_V2_BUFFER_SIZE], full[2 * NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    mig_profile_label(mig, label, sizeof(label));
    snprintf(full, sizeof(full), "%s %s", g->name, label);
    return copy_out(name, length, full);
}

API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    ENTER();
    gpu_t *g;
    ci_t *mig;
    nvmlReturn_t rc = resolve(device, &g, &mig);
    if (rc != NVML_SUCCESS) return rc;
    return copy_out(uuid, length, mig ? mig->uuid : g->uuid);
}

API nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber) {
    ENTER();
    gpu_t *g;
    nvmlReturn_t rc = resolve_gpu(device, &g);
    if (rc != NVML_SUCCESS) return rc;
    if (!minorNumber) return NVML_ERROR_INVALID_ARGUMENT;
    *minorNumber = g->minor;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index) {
    ENTER();
    gpu_t *g;
    nvmlReturn_t rc = resolve_gpu(device, &g);
    if (rc != NVML_SUCCESS) return rc;
    if (!index) return NVML_ERROR_INVALID_ARGUMENT;
    *index = g->index;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor) {
    ENTER();
    gpu_t *g;
    ci_t *mig;
    nvmlReturn_t rc = resolve(device, &g, &mig);
    if (rc != NVML_SUCCESS) return rc;
    if (!major || !minor) return NVML_ERROR_INVALID_ARGUMENT;
    *major = g->cc_major;
    *minor = g->cc_minor;
    return NVML_SUCCESS;
}

static void memory_of(gpu_t *g, ci_t *mig, unsigned long long *total, unsigned long long *reserved,
                      unsigned long long *used) {
    if (mig) {
        *total = gi_profile(mig->gi)->mem_mb << 20;
        *reserved = 0;
        *used = 0;
    } else {
        *total = g->mem_total;
        *reserved = g->mem_reserved;
        *used = g->mem_used;
    }
}

API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    ENTER();
    gpu_t *g;
    ci_t *mig;
    nvmlReturn_t rc = resolve(device, &g, &mig);
    if (rc != NVML_SUCCESS) return rc;
    if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned long long total, reserved, used;
    memory_of(g, mig, &total, &reserved, &used);
    memory->total = total;
    memory->used = used + reserved;
    memory->free = total - memory->used;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory) {
    ENTER();
    gpu_t *g;
    ci_t *mig;
    nvmlReturn_t rc = resolve(device, &g, &mig);
    if (rc != NVML_SUCCESS) return rc;
    if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    unsigned long long total, reserved, used;
    memory_of(g, mig, &total, &reserved, &used);
    memory->total = total;
    memory->reserved = reserved;
    memory->used = used;
    memory->free = total - reserved - used;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    ENTER();
    gpu_t *g;
    ci_t *mig;
    nvmlReturn_t rc = resolve(device, &g, &mig);
    if (rc != NVML_SUCCESS) return rc;
    if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
    fill_pci(pci, g->domain, g->bus, g->device, g->pci_device_id, g->pci_subsystem_id);
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int *node) {
    ENTER();
    gpu_t *g;
    nvmlReturn_t rc = resolve_gpu(device, &g);
    if (rc != NVML_SUCCESS) return rc;
    if (!node) return NVML_ERROR_INVALID_ARGUMENT;
    /* Real NVML answers only where the GPU memory is itself a NUMA node (Grace); x86: NOT_SUPPORTED. */
    if (!g->nvml_numa || g->numa_node < 0) return NVML_ERROR_NOT_SUPPORTED;
    *node = (unsigned)g->numa_node;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetMemoryAffinity(nvmlDevice_t device, unsigned int nodeSetSize,
                                             unsigned long *nodeSet, nvmlAffinityScope_t scope) {
    ENTER();
    gpu_t *g;
    nvmlReturn_t rc = resolve_gpu(device, &g);
    if (rc != NVML_SUCCESS) return rc;
    if (!nodeSet || nodeSetSize == 0 || scope > 1) return NVML_ERROR_INVALID_ARGUMENT;
    memset(nodeSet, 0, nodeSetSize * sizeof(unsigned long));
    if (g->numa_node < 0) return NVML_SUCCESS;
    unsigned word = (unsigned)g->numa_node / 64, bit = (unsigned)g->numa_node % 64;
    if (word < nodeSetSize) nodeSet[word] = 1UL << bit;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device, nvmlDeviceAttributes_t *attributes) {
    ENTER();
    gpu_t *g;
    ci_t *mig;
    nvmlReturn_t rc = resolve(device, &g, &mig);
    if (rc != NVML_SUCCESS) return rc;
    if (!attributes) return NVML_ERROR_INVALID_ARGUMENT;
    if (!mig) return NVML_ERROR_NOT_SUPPORTED; /* as a real H100 answers for a full GPU */
    memset(attributes, 0, sizeof(*attributes));
    gi_profile_t *p = gi_profile(mig->gi);
    unsigned cs = CI_SLICES[mig->profile_index];
    attributes->multiprocessorCount = p->sm * cs / (p->slices ? p->slices : 1);
    attributes->sharedCopyEngineCount = p->ce;
    attributes->sharedDecoderCount = p->dec;
    attributes->sharedEncoderCount = p->enc;
    attributes->sharedJpegCount = p->jpeg;
    attributes->sharedOfaCount = p->ofa;
    attributes->gpuInstanceSliceCount = p->slices;
    attributes->computeInstanceSliceCount = cs;
    attributes->memorySizeMB = p->mem_mb;
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------------------------------------------ */
/* Topology and NVLink                                                                              */
/* ------------------------------------------------------------------------------------------------ */

API nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2,
                                                     nvmlGpuTopologyLevel_t *pathInfo) {
    ENTER();
    gpu_t *a, *b;
    nvmlReturn_t rc = resolve_gpu(device1, &a);
    if (rc == NVML_SUCCESS) rc = resolve_gpu(device2, &b);
    if (rc != NVML_SUCCESS) return rc;
    if (!pathInfo) return NVML_ERROR_INVALID_ARGUMENT;
    if (!S.has_topo || a == b) return NVML_ERROR_NOT_SUPPORTED; /* self: as a real H100 answered */
    *pathInfo = (nvmlGpuTopologyLevel_t)S.topo[a->index][b->index];
    return NVML_SUCCESS;
}

static nvmlReturn_t nvlink_of(nvmlDevice_t device, unsigned int link, link_t **out, gpu_t **gp) {
    gpu_t *g;
    nvmlReturn_t rc = resolve_gpu(device, &g);
    if (rc != NVML_SUCCESS) return rc;
    if (!g->has_nvlink) return NVML_ERROR_NOT_SUPPORTED;
    if (link >= g->nlinks) return NVML_ERROR_INVALID_ARGUMENT;
    *out = &g->links[link];
    if (gp) *gp = g;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, nvmlEnableState_t *isActive) {
    ENTER();
    link_t *l;
    nvmlReturn_t rc = nvlink_of(device, link, &l, NULL);
    if (rc != NVML_SUCCESS) return rc;
    if (!isActive) return NVML_ERROR_INVALID_ARGUMENT;
    *isActive = l->state ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetNvLinkVersion(nvmlDevice_t device, unsigned int link, unsigned int *version) {
    ENTER();
    link_t *l;
    nvmlReturn_t rc = nvlink_of(device, link, &l, NULL);
    if (rc != NVML_SUCCESS) return rc;
    if (!version) return NVML_ERROR_INVALID_ARGUMENT;
    *version = l->version;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link, nvmlPciInfo_t *pci) {
    ENTER();
    link_t *l;
    nvmlReturn_t rc = nvlink_of(device, link, &l, NULL);
    if (rc != NVML_SUCCESS) return rc;
    if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
    if (!l->remote_bus[0]) return NVML_ERROR_NOT_SUPPORTED;
    unsigned domain = 0, bus = 0, dev = 0, device_id = 0x22a310de; /* an NVSwitch unless a GPU sits there */
    parse_bus_id(l->remote_bus, &domain, &bus, &dev);
    for (unsigned i = 0; i < S.ngpus; i++)
        if (S.gpus[i].domain == domain && S.gpus[i].bus == bus && S.gpus[i].device == dev)
            device_id = S.gpus[i].pci_device_id;
    fill_pci(pci, domain, bus, dev, device_id, 0);
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
                                                     nvmlIntNvLinkDeviceType_t *pNvLinkDeviceType) {
    ENTER();
    link_t *l;
    nvmlReturn_t rc = nvlink_of(device, link, &l, NULL);
    if (rc != NVML_SUCCESS) return rc;
    if (!pNvLinkDeviceType) return NVML_ERROR_INVALID_ARGUMENT;
    *pNvLinkDeviceType = (nvmlIntNvLinkDeviceType_t)l->remote_type;
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------------------------------------------ */
/* MIG                                                                                              */
/* ------------------------------------------------------------------------------------------------ */

API nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode, unsigned int *pendingMode) {
    ENTER();
    gpu_t *g;
    nvmlReturn_t rc = resolve_gpu(device, &g);
    if (rc != NVML_SUCCESS) return rc;
    if (!currentMode || !pendingMode) return NVML_ERROR_INVALID_ARGUMENT;
    if (!g->has_mig) return NVML_ERROR_NOT_SUPPORTED;
    *currentMode = g->mig_mode;
    *pendingMode = g->mig_pending;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count) {
    ENTER();
    gpu_t *g;
    nvmlReturn_t rc = resolve_gpu(device, &g);
    if (rc != NVML_SUCCESS) return rc;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    *count = (g->has_mig && g->mig_mode) ? g->max_mig : 0;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                     nvmlDevice_t *migDevice) {
    ENTER();
    gpu_t *g;
    nvmlReturn_t rc = resolve_gpu(device, &g);
    if (rc != NVML_SUCCESS) return rc;
    if (!migDevice) return NVML_ERROR_INVALID_ARGUMENT;
    if (!g->has_mig) return NVML_ERROR_NOT_SUPPORTED;
    if (!g->mig_mode) return NVML_ERROR_NOT_FOUND; /* MIG disabled: every slot empty, as on a real H100 */
    if (index >= g->max_mig) return NVML_ERROR_INVALID_ARGUMENT;
    ci_t *list[MAX_GI * MAX_CI];
    unsigned n = mig_list(g, list);
    if (index >= n) return NVML_ERROR_NOT_FOUND;
    *migDevice = &list[index]->dev;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMigDevice) {
    ENTER();
    gpu_t *g;
    ci_t *mig;
    nvmlReturn_t rc = resolve(device, &g, &mig);
    if (rc != NVML_SUCCESS) return rc;
    if (!isMigDevice) return NVML_ERROR_INVALID_ARGUMENT;
    *isMigDevice = mig != NULL;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id) {
    ENTER();
    gpu_t *g;
    ci_t *mig;
    nvmlReturn_t rc = resolve(device, &g, &mig);
    if (rc != NVML_SUCCESS) return rc;
    if (!id || !mig) return NVML_ERROR_INVALID_ARGUMENT;
    *id = mig->gi->id;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id) {
    ENTER();
    gpu_t *g;
    ci_t *mig;
    nvmlReturn_t rc = resolve(device, &g, &mig);
    if (rc != NVML_SUCCESS) return rc;
    if (!id || !mig) return NVML_ERROR_INVALID_ARGUMENT;
    *id = mig->id;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice, nvmlDevice_t *device) {
    ENTER();
    gpu_t *g;
    ci_t *mig;
    nvmlReturn_t rc = resolve(migDevice, &g, &mig);
    if (rc != NVML_SUCCESS) return rc;
    if (!device || !mig) return NVML_ERROR_INVALID_ARGUMENT;
    *device = &g->dev;
    return NVML_SUCCESS;
}

static nvmlReturn_t profile_for(nvmlDevice_t device, unsigned int profile, gi_profile_t **out) {
    gpu_t *g;
    nvmlReturn_t rc = resolve_gpu(device, &g);
    if (rc != NVML_SUCCESS) return rc;
    if (!g->has_mig) return NVML_ERROR_NOT_SUPPORTED;
    if (profile >= g->profile_count) return NVML_ERROR_INVALID_ARGUMENT;
    if (!g->prof[profile].supported) return NVML_ERROR_NOT_SUPPORTED;
    *out = &g->prof[profile];
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
                                                     nvmlGpuInstanceProfileInfo_t *info) {
    ENTER();
    gi_profile_t *p;
    nvmlReturn_t rc = profile_for(device, profile, &p);
    if (rc != NVML_SUCCESS) return rc;
    if (!info) return NVML_ERROR_INVALID_ARGUMENT;
    memset(info, 0, sizeof(*info));
    info->id = p->id;
    info->isP2pSupported = 0;
    info->sliceCount = p->slices;
    info->instanceCount = p->instances;
    info->multiprocessorCount = p->sm;
    info->copyEngineCount = p->ce;
    info->decoderCount = p->dec;
    info->encoderCount = p->enc;
    info->jpegCount = p->jpeg;
    info->ofaCount = p->ofa;
    info->memorySizeMB = p->mem_mb;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t device, unsigned int profile,
                                                      nvmlGpuInstanceProfileInfo_v2_t *info) {
    ENTER();
    gi_profile_t *p;
    nvmlReturn_t rc = profile_for(device, profile, &p);
    if (rc != NVML_SUCCESS) return rc;
    if (!info) return NVML_ERROR_INVALID_ARGUMENT;
    if (info->version != nvmlGpuInstanceProfileInfo_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    info->id = p->id;
    info->isP2pSupported = 0;
    info->sliceCount = p->slices;
    info->instanceCount = p->instances;
    info->multiprocessorCount = p->sm;
    info->copyEngineCount = p->ce;
    info->decoderCount = p->dec;
    info->encoderCount = p->enc;
    info->jpegCount = p->jpeg;
    info->ofaCount = p->ofa;
    info->memorySizeMB = p->mem_mb;
    copy_bounded(info->name, sizeof(info->name), p->name);
    info->version = 0; /* a real H100 (driver 580) hands the struct back with version zeroed */
    return NVML_SUCCESS;
}

/* Queries by profile id answer with MIG disabled too (a real H100 does); creating needs MIG on. */
static nvmlReturn_t mig_gpu_by_profile_id(nvmlDevice_t device, unsigned int profileId, gpu_t **gp, int *pidx) {
    nvmlReturn_t rc = resolve_gpu(device, gp);
    if (rc != NVML_SUCCESS) return rc;
    if (!(*gp)->has_mig) return NVML_ERROR_NOT_SUPPORTED;
    *pidx = profile_index_by_id(*gp, profileId);
    return *pidx < 0 ? NVML_ERROR_INVALID_ARGUMENT : NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvmlDevice_t device, unsigned int profileId,
                                                               nvmlGpuInstancePlacement_t *placements,
                                                               unsigned int *count) {
    ENTER();
    gpu_t *g;
    int pidx;
    nvmlReturn_t rc = mig_gpu_by_profile_id(device, profileId, &g, &pidx);
    if (rc != NVML_SUCCESS) return rc;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    gi_profile_t *p = &g->prof[pidx];
    if (placements)
        for (unsigned k = 0; k < p->nplace; k++) {
            placements[k].start = p->place_start[k];
            placements[k].size = p->place_size;
        }
    *count = p->nplace;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetGpuInstanceRemainingCapacity(nvmlDevice_t device, unsigned int profileId,
                                                           unsigned int *count) {
    ENTER();
    gpu_t *g;
    int pidx;
    nvmlReturn_t rc = mig_gpu_by_profile_id(device, profileId, &g, &pidx);
    if (rc != NVML_SUCCESS) return rc;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    /* Count by trial: create on a scratch copy until nothing fits. */
    static gpu_t scratch;
    scratch = *g;
    for (unsigned a = 0; a < MAX_GI; a++) scratch.gis[a].gpu = &scratch;
    unsigned n = 0;
    gi_t *made;
    while (gi_create(&scratch, (unsigned)pidx, -1, -1, &made) == NVML_SUCCESS) n++;
    *count = n;
    return NVML_SUCCESS;
}

static nvmlReturn_t create_gi(nvmlDevice_t device, unsigned int profileId, long long start,
                              nvmlGpuInstance_t *gpuInstance) {
    gpu_t *g;
    int pidx;
    nvmlReturn_t rc = mig_gpu_by_profile_id(device, profileId, &g, &pidx);
    if (rc != NVML_SUCCESS) return rc;
    if (!gpuInstance) return NVML_ERROR_INVALID_ARGUMENT;
    if (!g->mig_mode) return NVML_ERROR_NOT_SUPPORTED; /* per the NVML docs; not seen on hardware */
    gi_t *gi = NULL;
    rc = gi_create(g, (unsigned)pidx, start, -1, &gi);
    if (rc != NVML_SUCCESS) return rc;
    *gpuInstance = gi;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceCreateGpuInstance(nvmlDevice_t device, unsigned int profileId,
                                             nvmlGpuInstance_t *gpuInstance) {
    ENTER();
    return create_gi(device, profileId, -1, gpuInstance);
}

API nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t device, unsigned int profileId,
                                                          const nvmlGpuInstancePlacement_t *placement,
                                                          nvmlGpuInstance_t *gpuInstance) {
    ENTER();
    if (!placement) return NVML_ERROR_INVALID_ARGUMENT;
    return create_gi(device, profileId, placement->start, gpuInstance);
}

API nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t gpuInstance) {
    ENTER();
    gi_t *gi;
    nvmlReturn_t rc = resolve_gi(gpuInstance, &gi);
    if (rc != NVML_SUCCESS) return rc;
    for (unsigned b = 0; b < MAX_CI; b++)
        if (gi->cis[b].used) return NVML_ERROR_IN_USE;
    gi->used = 0;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int profileId,
                                           nvmlGpuInstance_t *gpuInstances, unsigned int *count) {
    ENTER();
    gpu_t *g;
    int pidx;
    nvmlReturn_t rc = mig_gpu_by_profile_id(device, profileId, &g, &pidx);
    if (rc != NVML_SUCCESS) return rc;
    if (!gpuInstances || !count) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned n = 0;
    for (unsigned a = 0; a < MAX_GI; a++)
        if (g->gis[a].used && g->gis[a].profile_index == (unsigned)pidx) gpuInstances[n++] = &g->gis[a];
    *count = n;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id, nvmlGpuInstance_t *gpuInstance) {
    ENTER();
    gpu_t *g;
    nvmlReturn_t rc = resolve_gpu(device, &g);
    if (rc != NVML_SUCCESS) return rc;
    if (!gpuInstance) return NVML_ERROR_INVALID_ARGUMENT;
    if (!g->has_mig) return NVML_ERROR_NOT_SUPPORTED;
    for (unsigned a = 0; a < MAX_GI; a++)
        if (g->gis[a].used && g->gis[a].id == id) {
            *gpuInstance = &g->gis[a];
            return NVML_SUCCESS;
        }
    return NVML_ERROR_NOT_FOUND;
}

API nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gpuInstance, nvmlGpuInstanceInfo_t *info) {
    ENTER();
    gi_t *gi;
    nvmlReturn_t rc = resolve_gi(gpuInstance, &gi);
    if (rc != NVML_SUCCESS) return rc;
    if (!info) return NVML_ERROR_INVALID_ARGUMENT;
    info->device = &gi->gpu->dev;
    info->id = gi->id;
    info->profileId = gi_profile(gi)->id;
    info->placement.start = gi->start;
    info->placement.size = gi->size;
    return NVML_SUCCESS;
}

static void fill_ci_profile(gi_t *gi, unsigned j, unsigned count, unsigned *id, unsigned *slices,
                            unsigned *instances, unsigned *sm, unsigned *ce, unsigned *dec, unsigned *enc,
                            unsigned *jpeg, unsigned *ofa) {
    gi_profile_t *p = gi_profile(gi);
    *id = j;
    *slices = CI_SLICES[j];
    *instances = count;
    *sm = p->sm * CI_SLICES[j] / (p->slices ? p->slices : 1);
    *ce = p->ce;
    *dec = p->dec;
    *enc = p->enc;
    *jpeg = p->jpeg;
    *ofa = p->ofa;
}

API nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t gpuInstance, unsigned int profile,
                                                              unsigned int engProfile,
                                                              nvmlComputeInstanceProfileInfo_t *info) {
    ENTER();
    gi_t *gi;
    unsigned count = 0;
    nvmlReturn_t rc = resolve_gi(gpuInstance, &gi);
    if (rc != NVML_SUCCESS) return rc;
    if (!info || profile >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT ||
        engProfile >= NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!ci_profile_ok(gi, profile, &count)) return NVML_ERROR_NOT_SUPPORTED;
    memset(info, 0, sizeof(*info));
    fill_ci_profile(gi, profile, count, &info->id, &info->sliceCount, &info->instanceCount,
                    &info->multiprocessorCount, &info->sharedCopyEngineCount, &info->sharedDecoderCount,
                    &info->sharedEncoderCount, &info->sharedJpegCount, &info->sharedOfaCount);
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfoV(nvmlGpuInstance_t gpuInstance, unsigned int profile,
                                                               unsigned int engProfile,
                                                               nvmlComputeInstanceProfileInfo_v2_t *info) {
    ENTER();
    gi_t *gi;
    unsigned count = 0;
    nvmlReturn_t rc = resolve_gi(gpuInstance, &gi);
    if (rc != NVML_SUCCESS) return rc;
    if (!info || profile >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT ||
        engProfile >= NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (info->version != nvmlComputeInstanceProfileInfo_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (!ci_profile_ok(gi, profile, &count)) return NVML_ERROR_NOT_SUPPORTED;
    fill_ci_profile(gi, profile, count, &info->id, &info->sliceCount, &info->instanceCount,
                    &info->multiprocessorCount, &info->sharedCopyEngineCount, &info->sharedDecoderCount,
                    &info->sharedEncoderCount, &info->sharedJpegCount, &info->sharedOfaCount);
    const char *gi_name = gi_profile(gi)->name;
    const char *bare = strncmp(gi_name, "MIG ", 4) == 0 ? gi_name + 4 : gi_name;
    if (CI_SLICES[profile] == gi_profile(gi)->slices) copy_bounded(info->name, sizeof(info->name), gi_name);
    else snprintf(info->name, sizeof(info->name), "MIG %uc.%s", CI_SLICES[profile], bare);
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlGpuInstanceGetComputeInstanceRemainingCapacity(nvmlGpuInstance_t gpuInstance,
                                                                    unsigned int profileId, unsigned int *count) {
    ENTER();
    gi_t *gi;
    nvmlReturn_t rc = resolve_gi(gpuInstance, &gi);
    if (rc != NVML_SUCCESS) return rc;
    if (!count || profileId >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT) return NVML_ERROR_INVALID_ARGUMENT;
    if (!ci_profile_ok(gi, profileId, NULL)) return NVML_ERROR_NOT_SUPPORTED;
    static gi_t scratch;
    scratch = *gi;
    unsigned n = 0;
    ci_t *made;
    while (ci_create(&scratch, profileId, -1, "scratch", &made) == NVML_SUCCESS) n++;
    *count = n;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t gpuInstance, unsigned int profileId,
                                                      nvmlComputeInstance_t *computeInstance) {
    ENTER();
    gi_t *gi;
    nvmlReturn_t rc = resolve_gi(gpuInstance, &gi);
    if (rc != NVML_SUCCESS) return rc;
    if (!computeInstance || profileId >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT) return NVML_ERROR_INVALID_ARGUMENT;
    if (!ci_profile_ok(gi, profileId, NULL)) return NVML_ERROR_NOT_SUPPORTED;
    ci_t *ci = NULL;
    rc = ci_create(gi, profileId, -1, NULL, &ci);
    if (rc != NVML_SUCCESS) return rc;
    *computeInstance = ci;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t computeInstance) {
    ENTER();
    ci_t *ci;
    nvmlReturn_t rc = resolve_ci(computeInstance, &ci);
    if (rc != NVML_SUCCESS) return rc;
    ci->used = 0;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t gpuInstance, unsigned int profileId,
                                                    nvmlComputeInstance_t *computeInstances, unsigned int *count) {
    ENTER();
    gi_t *gi;
    nvmlReturn_t rc = resolve_gi(gpuInstance, &gi);
    if (rc != NVML_SUCCESS) return rc;
    if (!computeInstances || !count || profileId >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned n = 0;
    for (unsigned b = 0; b < MAX_CI; b++)
        if (gi->cis[b].used && gi->cis[b].profile_index == profileId) computeInstances[n++] = &gi->cis[b];
    *count = n;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(nvmlGpuInstance_t gpuInstance, unsigned int id,
                                                       nvmlComputeInstance_t *computeInstance) {
    ENTER();
    gi_t *gi;
    nvmlReturn_t rc = resolve_gi(gpuInstance, &gi);
    if (rc != NVML_SUCCESS) return rc;
    if (!computeInstance) return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned b = 0; b < MAX_CI; b++)
        if (gi->cis[b].used && gi->cis[b].id == id) {
            *computeInstance = &gi->cis[b];
            return NVML_SUCCESS;
        }
    return NVML_ERROR_NOT_FOUND;
}

API nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t computeInstance,
                                               nvmlComputeInstanceInfo_t *info) {
    ENTER();
    ci_t *ci;
    nvmlReturn_t rc = resolve_ci(computeInstance, &ci);
    if (rc != NVML_SUCCESS) return rc;
    if (!info) return NVML_ERROR_INVALID_ARGUMENT;
    info->device = &ci->gi->gpu->dev;
    info->gpuInstance = ci->gi;
    info->id = ci->id;
    info->profileId = ci->profile_index;
    info->placement.start = ci->start;
    info->placement.size = ci->size;
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------------------------------------------ */
/* Events                                                                                           */
/* ------------------------------------------------------------------------------------------------ */

API nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) {
    ENTER();
    if (!set) return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned k = 0; k < MAX_SETS; k++)
        if (!S.sets[k].used) {
            memset(&S.sets[k], 0, sizeof(S.sets[k]));
            S.sets[k].used = 1;
            *set = &S.sets[k];
            return NVML_SUCCESS;
        }
    return NVML_ERROR_INSUFFICIENT_RESOURCES;
}

API nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *eventTypes) {
    ENTER();
    gpu_t *g;
    nvmlReturn_t rc = resolve_gpu(device, &g);
    if (rc != NVML_SUCCESS) return rc;
    if (!eventTypes) return NVML_ERROR_INVALID_ARGUMENT;
    *eventTypes = g->supported_events;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes, nvmlEventSet_t set) {
    ENTER();
    gpu_t *g;
    /* Per-instance registration through MIG handles is not supported (nvidia.md §2.6). */
    nvmlReturn_t rc = resolve_gpu(device, &g);
    if (rc != NVML_SUCCESS) return rc;
    struct nvmlEventSet_st *es = valid_set(set);
    if (!es) return NVML_ERROR_INVALID_ARGUMENT;
    if (eventTypes & ~g->supported_events) return NVML_ERROR_NOT_SUPPORTED;
    es->mask[g->index] |= eventTypes;
    pthread_cond_broadcast(&g_cond);
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms) {
    ENTER();
    if (!valid_set(set) || !data) return NVML_ERROR_INVALID_ARGUMENT;
    long long deadline = now_ms() + timeoutms;
    for (;;) {
        if (!S.refcount) return NVML_ERROR_UNINITIALIZED;
        if (S.fail) return S.fail;
        if (!set->used) return NVML_ERROR_INVALID_ARGUMENT;
        if (set->pending) {
            nvmlReturn_t rc = set->pending;
            set->pending = NVML_SUCCESS;
            return rc;
        }
        if (set->count) {
            ev_t *ev = &set->q[set->head];
            data->device = ev->device;
            data->eventType = ev->type;
            data->eventData = ev->data;
            data->gpuInstanceId = ev->gi;
            data->computeInstanceId = ev->ci;
            set->head = (set->head + 1) % QUEUE_LEN;
            set->count--;
            return NVML_SUCCESS;
        }
        long long now = now_ms();
        if (now >= deadline) return NVML_ERROR_TIMEOUT;
        long long wake = now + POLL_MS < deadline ? now + POLL_MS : deadline;
        struct timespec ts;
        ts.tv_sec = (time_t)(wake / 1000);
        ts.tv_nsec = (long)(wake % 1000) * 1000000L;
        pthread_cond_timedwait(&g_cond, &g_lock, &ts);
        pump();
    }
}

API nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
    ENTER();
    struct nvmlEventSet_st *es = valid_set(set);
    if (!es) return NVML_ERROR_INVALID_ARGUMENT;
    memset(es, 0, sizeof(*es));
    pthread_cond_broadcast(&g_cond);
    return NVML_SUCCESS;
}
