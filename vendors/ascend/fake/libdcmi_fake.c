/*
 * A fake libdcmi.so for tests and `simulate`: the real DCMI V2 prototypes, return codes and struct
 * layouts (dcmi_abi.h, pinned by static asserts), driven by a JSON node description.
 *
 * Why a C library and not a Python mock: the backend must load it exactly as it loads the driver's
 * library (ctypes, lazy symbol lookup, structs passed by pointer), so every ABI mistake - a wrong
 * struct offset, an `unsigned long` taken for 4 bytes, the output-first argument of
 * dcmi_get_device_logic_id - shows up in tests, not on a node.
 *
 * The node file is named by $HCS_FAKE_DCMI_NODE and (re)read by dcmi_init whenever its path, inode,
 * size or mtime differ from the loaded one. A "control file" (a JSON object the tests rewrite
 * atomically) is stat()ed at the start of every call and re-parsed when it changed: health, error
 * codes, hangs, dropped chips, removed cards, unsupported calls, a failing dcmi_init. vNPUs created at
 * run time are saved to a state file after every change and reloaded by every dcmi_init, so a restarted
 * backend (or a new process) finds them as it would on a real node. Schema: README.md beside this file.
 *
 * Threads: one mutex guards all state and is held only while a call reads or changes it. A hung chip
 * waits with the mutex released (re-checking the control file every few milliseconds), so only calls
 * for that chip block.
 *
 * Functions the fake does not implement are simply not exported; the build can also hide implemented
 * ones (vendors/ascend/fake/build.py) to stand for an older driver.
 */
#define _GNU_SOURCE
#include "dcmi_abi.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))

#define NODE_ENV "HCS_FAKE_DCMI_NODE"
#define MAX_CHIPS 64
#define MAX_CARDS 64
#define MAX_TEMPLATES 16
#define MAX_VNPU_PER_CHIP 16
#define MAX_VNPUS (MAX_CHIPS * MAX_VNPU_PER_CHIP)
#define MAX_VFG 32
#define VDEV_ID_BASE 100u
#define VDEV_ID_END 1124u
#define DESTROY_ALL 0xffffu
#define MAX_NAMES 64
#define NAME_LEN 96
#define PATH_LEN 4096
#define HANG_SLICE_MS 5
#define DEFAULT_AFFINITY_BUF 32

/* JSON reading for the node and control files: vendors/fakelib/fake_json.h */
#include "fake_json.h"

static double jdouble(const jv *o, const char *key, double dflt) {
    const jv *v = jget(o, key);
    if (v && v->t == J_NUM) return v->is_int ? (double)v->i : v->d;
    long long i;
    return jas_int(v, &i) ? (double)i : dflt;
}

static int read_file(const char *path, char **out, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap) break;
        cap *= 2;
        char *grown = realloc(buf, cap);
        if (!grown) {
            free(buf);
            fclose(f);
            return 0;
        }
        buf = grown;
    }
    fclose(f);
    if (!buf) return 0;
    *out = buf;
    *len = n;
    return 1;
}

static int parse_file(const char *path, jv *tree, const char *what) {
    char *text = NULL;
    size_t len = 0;
    if (!read_file(path, &text, &len)) {
        fprintf(stderr, "libdcmi_fake: cannot read %s %s: %s\n", what, path, strerror(errno));
        return 0;
    }
    const char *err = NULL;
    size_t at = 0;
    int ok = jparse_text(text, len, tree, &err, &at);
    free(text);
    if (!ok) fprintf(stderr, "libdcmi_fake: %s %s: %s at byte %zu\n", what, path, err, at);
    return ok;
}

static void copy_bounded(char *dst, size_t cap, const char *src) { snprintf(dst, cap, "%s", src ? src : ""); }

/* ------------------------------------------------------------------------------------------------ */
/* State                                                                                            */
/* ------------------------------------------------------------------------------------------------ */

typedef struct {
    char name[TEMPLATE_NAME_LEN];
    unsigned aicore, aicpu;
    unsigned long long mem_mb;
    float vpc, vdec, jpegd, jpege, venc, pngd;
} tmpl_t;

/* Utilisation kinds by dcmi_get_device_utilization_rate input_type. */
static const struct {
    int input_type;
    const char *key;
} UTIL_KEYS[] = {
    {DCMI_UTILIZATION_RATE_DDR, "ddr"},
    {DCMI_UTILIZATION_RATE_AICORE, "aicore"},
    {DCMI_UTILIZATION_RATE_AICPU, "aicpu"},
    {DCMI_UTILIZATION_RATE_CTRLCPU, "ctrlcpu"},
    {DCMI_UTILIZATION_RATE_DDR_BANDWIDTH, "ddr_bw"},
    {DCMI_UTILIZATION_RATE_HBM, "hbm"},
    {DCMI_UTILIZATION_RATE_HBM_BANDWIDTH, "hbm_bw"},
    {DCMI_UTILIZATION_RATE_VECTORCORE, "vectorcore"},
    {DCMI_UTILIZATION_RATE_NPU, "npu"},
};
#define N_UTIL (sizeof(UTIL_KEYS) / sizeof(UTIL_KEYS[0]))

typedef struct {
    int card_id, device_id;
    unsigned logic_id, phy_id;
    char chip_type[MAX_CHIP_NAME_LEN], chip_name[MAX_CHIP_NAME_LEN], chip_ver[MAX_CHIP_NAME_LEN];
    char npu_name[MAX_CHIP_NAME_LEN];
    unsigned aicore, aicpu;
    struct dcmi_board_info board;
    char product_type[64];
    int boot_status;
    unsigned vendor, subvendor, pci_device, subdevice;
    int domain;
    unsigned bus, dev, func;
    int has_vdie, has_ndie;
    unsigned vdie[DIE_ID_COUNT], ndie[DIE_ID_COUNT];
    int has_hbm;
    unsigned long long hbm_mb, hbm_usage_mb;
    unsigned hbm_freq, hbm_bw;
    int hbm_temp;
    int has_mem;
    unsigned long long mem_mb, mem_avail_mb;
    unsigned mem_freq, mem_util;
    unsigned long huge_kb, huge_total, huge_free;
    unsigned health;
    unsigned nerr;
    unsigned err[DCMI_ERROR_CODE_MAX_COUNT];
    int dropped;
    int has_net, net_health;
    int temperature, power;
    long long util[N_UTIL]; /* -1: not supported */
    int has_affinity;
    char affinity[128];
    int has_spod;
    struct dcmi_spod_info spod;
    int has_vnpu;
    unsigned ntmpl;
    tmpl_t tmpl[MAX_TEMPLATES];
    unsigned long long vnpu_mem_mb;
} chip_t;

typedef struct {
    int card_id, mcu_id, cpu_id;
} card_t;

typedef struct {
    int used;
    unsigned vdev_id, phy_id, slot, vfg_id;
    char tmpl[TEMPLATE_NAME_LEN];
} vnpu_t;

/* What the control file says about one chip (indexed like S.chips). */
typedef struct {
    int has_health;
    unsigned health;
    int has_err;
    unsigned nerr;
    unsigned err[DCMI_ERROR_CODE_MAX_COUNT];
    double hang_s;
    int dropped;
} chip_ctl_t;

static struct {
    int loaded;
    char path[PATH_LEN];
    struct stat st;
    int inited;
    char dcmi_version[64], driver_version[64];
    int init_error, vdevice_mode;
    unsigned recover_mode;
    unsigned n_unsupported;
    char unsupported[MAX_NAMES][NAME_LEN];
    char control_path[PATH_LEN], state_path[PATH_LEN], host_root[PATH_LEN];
    unsigned nchips;
    chip_t chips[MAX_CHIPS];
    unsigned ncards;
    card_t cards[MAX_CARDS];
    int has_topo;
    int topo[MAX_CHIPS][MAX_CHIPS];
    vnpu_t vnpus[MAX_VNPUS];
    /* the control file, as last parsed */
    int ctl_valid;
    struct stat ctl_st;
    chip_ctl_t ctl[MAX_CHIPS];
    unsigned n_removed;
    int removed[MAX_CARDS];
    unsigned n_ctl_unsupported;
    char ctl_unsupported[MAX_NAMES][NAME_LEN];
    int ctl_init_error;
    unsigned n_in_use;
    unsigned in_use[MAX_VNPUS];
} S;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static void unlock_guard(int *unused) {
    (void)unused;
    pthread_mutex_unlock(&g_lock);
}

/* The lock is released by the cleanup attribute on every return path. */
#define LOCKED int hcs_guard_ __attribute__((cleanup(unlock_guard), unused)) = (pthread_mutex_lock(&g_lock), 0)

static long long now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000LL + t.tv_nsec / 1000000;
}

static void sleep_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
}

static int same_file(const struct stat *a, const struct stat *b) {
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* A path in the node file, relative to the node file's folder unless absolute. */
static void resolve_path(char *out, const char *node_path, const char *rel) {
    if (rel[0] == '/') {
        copy_bounded(out, PATH_LEN, rel);
        return;
    }
    const char *slash = strrchr(node_path, '/');
    if (!slash) {
        copy_bounded(out, PATH_LEN, rel);
        return;
    }
    snprintf(out, PATH_LEN, "%.*s/%s", (int)(slash - node_path), node_path, rel);
}

static int chip_index(const chip_t *c) { return (int)(c - S.chips); }

static int index_by_phy(unsigned phy) {
    for (unsigned i = 0; i < S.nchips; i++)
        if (S.chips[i].phy_id == phy) return (int)i;
    return -1;
}

static card_t *find_card(int card_id) {
    for (unsigned k = 0; k < S.ncards; k++)
        if (S.cards[k].card_id == card_id) return &S.cards[k];
    return NULL;
}

static int card_removed(int card_id) {
    for (unsigned k = 0; k < S.n_removed; k++)
        if (S.removed[k] == card_id) return 1;
    return 0;
}

static const tmpl_t *find_template(const chip_t *c, const char *name) {
    for (unsigned k = 0; k < c->ntmpl; k++)
        if (strcmp(c->tmpl[k].name, name) == 0) return &c->tmpl[k];
    return NULL;
}

/* ------------------------------------------------------------------------------------------------ */
/* Loading the node file                                                                            */
/* ------------------------------------------------------------------------------------------------ */

static int load_fail(const char *path, const char *what, long long which) {
    if (which >= 0) fprintf(stderr, "libdcmi_fake: %s: chips[%lld]: %s\n", path, which, what);
    else fprintf(stderr, "libdcmi_fake: %s: %s\n", path, what);
    return 0;
}

static void load_words(const jv *arr, unsigned *out, int *has) {
    if (!arr || arr->t != J_ARR) return;
    for (size_t k = 0; k < DIE_ID_COUNT && k < arr->n; k++) {
        long long v = 0;
        jas_int(&arr->items[k], &v);
        out[k] = (unsigned)v;
    }
    *has = 1;
}

static int load_templates(chip_t *c, const jv *vnpu, const char *path, long long idx) {
    const jv *list = jget(vnpu, "templates");
    if (jlen(list) > MAX_TEMPLATES) return load_fail(path, "more than 16 vNPU templates", idx);
    for (size_t k = 0; k < jlen(list); k++) {
        const jv *t = &list->items[k];
        tmpl_t *out = &c->tmpl[c->ntmpl++];
        const char *name = jstr(t, "name", "");
        if (!name[0] || strlen(name) >= DCMI_VDEV_RES_NAME_LEN)
            return load_fail(path, "a vNPU template needs a name of 1..15 characters", idx);
        copy_bounded(out->name, sizeof(out->name), name);
        out->aicore = (unsigned)jint(t, "aicore", 1);
        out->aicpu = (unsigned)jint(t, "aicpu", 1);
        out->mem_mb = (unsigned long long)jint(t, "memory_mb", 0);
        out->vpc = (float)jdouble(t, "vpc", 0);
        out->vdec = (float)jdouble(t, "vdec", 0);
        out->jpegd = (float)jdouble(t, "jpegd", 0);
        out->jpege = (float)jdouble(t, "jpege", 0);
        out->venc = (float)jdouble(t, "venc", 0);
        out->pngd = (float)jdouble(t, "pngd", 0);
    }
    return 1;
}

static void parse_bdf(const char *text, chip_t *c) {
    unsigned d = 0, b = 0, dv = 0, fn = 0;
    if (sscanf(text, "%x:%x:%x.%x", &d, &b, &dv, &fn) == 4) {
        c->domain = (int)d;
        c->bus = b;
        c->dev = dv;
        c->func = fn;
    }
}

static int load_chip(chip_t *c, const jv *o, const char *path, long long idx) {
    memset(c, 0, sizeof(*c));
    long long card = jint(o, "card_id", -1), dev = jint(o, "device_id", -1), phy = jint(o, "phy_id", -1);
    if (card < 0 || dev < 0 || phy < 0) return load_fail(path, "card_id, device_id and phy_id are required", idx);
    c->card_id = (int)card;
    c->device_id = (int)dev;
    c->phy_id = (unsigned)phy;
    c->logic_id = (unsigned)jint(o, "logic_id", phy);
    copy_bounded(c->chip_type, sizeof(c->chip_type), jstr(o, "chip_type", "Ascend"));
    copy_bounded(c->chip_name, sizeof(c->chip_name), jstr(o, "chip_name", "910B3"));
    copy_bounded(c->chip_ver, sizeof(c->chip_ver), jstr(o, "chip_ver", "V1"));
    copy_bounded(c->npu_name, sizeof(c->npu_name), jstr(o, "npu_name", c->chip_name));
    c->aicore = (unsigned)jint(o, "aicore_count", 0);
    c->aicpu = (unsigned)jint(o, "aicpu_count", 0);
    c->board.board_id = (unsigned)jint(o, "board_id", 0);
    c->board.pcb_id = (unsigned)jint(o, "pcb_id", 0);
    c->board.bom_id = (unsigned)jint(o, "bom_id", 0);
    c->board.slot_id = (unsigned)jint(o, "slot_id", card);
    copy_bounded(c->product_type, sizeof(c->product_type), jstr(o, "product_type", ""));
    c->boot_status = (int)jint(o, "boot_status", DCMI_BOOT_STATUS_FINISH);
    const jv *pci = jget(o, "pci");
    c->vendor = (unsigned)jint(pci, "vendor_id", 0x19e5);
    c->subvendor = (unsigned)jint(pci, "subvendor_id", 0);
    c->pci_device = (unsigned)jint(pci, "device_id", 0);
    c->subdevice = (unsigned)jint(pci, "subdevice_id", 0);
    parse_bdf(jstr(pci, "bdf", ""), c);
    const jv *die = jget(o, "die_id");
    load_words(jget(die, "vdie"), c->vdie, &c->has_vdie);
    load_words(jget(die, "ndie"), c->ndie, &c->has_ndie);
    const jv *hbm = jget(o, "hbm");
    if (hbm && hbm->t == J_OBJ) {
        c->has_hbm = 1;
        c->hbm_mb = (unsigned long long)jint(hbm, "size_mb", 0);
        c->hbm_usage_mb = (unsigned long long)jint(hbm, "usage_mb", 0);
        c->hbm_freq = (unsigned)jint(hbm, "freq", 0);
        c->hbm_temp = (int)jint(hbm, "temp", 0);
        c->hbm_bw = (unsigned)jint(hbm, "bandwidth_util", 0);
    }
    const jv *mem = jget(o, "memory");
    if (mem && mem->t == J_OBJ) {
        c->has_mem = 1;
        c->mem_mb = (unsigned long long)jint(mem, "size_mb", 0);
        c->mem_avail_mb = (unsigned long long)jint(mem, "available_mb", (long long)c->mem_mb);
        c->mem_freq = (unsigned)jint(mem, "freq", 0);
        c->huge_kb = (unsigned long)jint(mem, "hugepagesize_kb", 0);
        c->huge_total = (unsigned long)jint(mem, "hugepages_total", 0);
        c->huge_free = (unsigned long)jint(mem, "hugepages_free", 0);
        c->mem_util = (unsigned)jint(mem, "utilization", 0);
    }
    c->health = (unsigned)jint(o, "health", 0);
    const jv *errs = jget(o, "error_codes");
    if (jlen(errs) > DCMI_ERROR_CODE_MAX_COUNT) return load_fail(path, "more than 128 error_codes", idx);
    for (size_t k = 0; k < jlen(errs); k++) {
        long long v = 0;
        jas_int(&errs->items[k], &v);
        c->err[c->nerr++] = (unsigned)v;
    }
    c->dropped = (int)jint(o, "dropped", 0);
    const jv *net = jget(o, "network_health");
    long long netv;
    if (jas_int(net, &netv)) {
        c->has_net = 1;
        c->net_health = (int)netv;
    }
    c->temperature = (int)jint(o, "temperature", 40);
    c->power = (int)jint(o, "power", 900);
    const jv *util = jget(o, "utilization");
    for (size_t k = 0; k < N_UTIL; k++) c->util[k] = jint(util, UTIL_KEYS[k].key, -1);
    const jv *aff = jget(o, "affinity_cpu");
    if (aff && aff->t == J_STR) {
        c->has_affinity = 1;
        copy_bounded(c->affinity, sizeof(c->affinity), aff->s);
    }
    const jv *spod = jget(o, "spod_info");
    if (spod && spod->t == J_OBJ) {
        c->has_spod = 1;
        c->spod.sdid = (unsigned)jint(spod, "sdid", 0);
        c->spod.super_pod_size = (unsigned)jint(spod, "super_pod_size", 0);
        c->spod.super_pod_id = (unsigned)jint(spod, "super_pod_id", 0);
        c->spod.server_index = (unsigned)jint(spod, "server_index", 0);
        c->spod.chassis_id = (unsigned)jint(spod, "chassis_id", 0);
        c->spod.super_pod_type = (unsigned)jint(spod, "super_pod_type", 0);
    }
    const jv *vnpu = jget(o, "vnpu");
    if (vnpu && vnpu->t == J_OBJ) {
        c->has_vnpu = 1;
        unsigned long long dflt = c->has_hbm ? c->hbm_mb : c->mem_mb;
        c->vnpu_mem_mb = (unsigned long long)jint(vnpu, "memory_mb", (long long)dflt);
        if (!load_templates(c, vnpu, path, idx)) return 0;
    }
    return 1;
}

static int add_card(int card_id) {
    if (find_card(card_id)) return 1;
    if (S.ncards >= MAX_CARDS) return 0;
    card_t *k = &S.cards[S.ncards++];
    k->card_id = card_id;
    k->mcu_id = -1;
    k->cpu_id = -1;
    return 1;
}

static int cmp_card(const void *a, const void *b) {
    int x = ((const card_t *)a)->card_id, y = ((const card_t *)b)->card_id;
    return (x > y) - (x < y);
}

static int load_node_tree(const jv *t, const char *path) {
    copy_bounded(S.dcmi_version, sizeof(S.dcmi_version), jstr(t, "dcmi_version", "24.1.rc3"));
    copy_bounded(S.driver_version, sizeof(S.driver_version), jstr(t, "driver_version", "24.1.rc3"));
    S.init_error = (int)jint(t, "init_error", 0);
    S.vdevice_mode = (int)jint(t, "vdevice_mode", 0);
    S.recover_mode = (unsigned)jint(t, "vnpu_config_recover_mode", 0);
    const jv *uns = jget(t, "not_supported");
    for (size_t k = 0; k < jlen(uns) && S.n_unsupported < MAX_NAMES; k++)
        if (uns->items[k].t == J_STR) copy_bounded(S.unsupported[S.n_unsupported++], NAME_LEN, uns->items[k].s);
    resolve_path(S.control_path, path, jstr(t, "control_file", "control.json"));
    resolve_path(S.state_path, path, jstr(t, "state_file", "state.json"));
    const char *host = jstr(t, "host_root", "");
    if (host[0]) resolve_path(S.host_root, path, host);
    const jv *chips = jget(t, "chips");
    if (!chips || chips->t != J_ARR) return load_fail(path, "'chips' must be a list", -1);
    if (chips->n > MAX_CHIPS) return load_fail(path, "more than 64 chips", -1);
    for (size_t i = 0; i < chips->n; i++) {
        chip_t *c = &S.chips[i];
        if (!load_chip(c, &chips->items[i], path, (long long)i)) return 0;
        for (size_t j = 0; j < i; j++) {
            const chip_t *o = &S.chips[j];
            if (o->card_id == c->card_id && o->device_id == c->device_id)
                return load_fail(path, "two chips with the same card_id/device_id", (long long)i);
            if (o->phy_id == c->phy_id) return load_fail(path, "two chips with the same phy_id", (long long)i);
            if (o->logic_id == c->logic_id) return load_fail(path, "two chips with the same logic_id", (long long)i);
        }
        if (!add_card(c->card_id)) return load_fail(path, "more than 64 cards", (long long)i);
        S.nchips++;
    }
    const jv *cards = jget(t, "cards");
    for (size_t k = 0; k < jlen(cards); k++) {
        const jv *o = &cards->items[k];
        long long id = jint(o, "card_id", -1);
        if (id < 0 || !add_card((int)id)) return load_fail(path, "bad entry in 'cards'", -1);
        card_t *card = find_card((int)id);
        card->mcu_id = (int)jint(o, "mcu_id", -1);
        card->cpu_id = (int)jint(o, "cpu_id", -1);
    }
    qsort(S.cards, S.ncards, sizeof(card_t), cmp_card);
    const jv *topo = jget(t, "topology");
    if (topo) {
        if (jlen(topo) != S.nchips) return load_fail(path, "'topology' needs one row per chip", -1);
        for (size_t a = 0; a < S.nchips; a++) {
            const jv *row = &topo->items[a];
            if (jlen(row) != S.nchips) return load_fail(path, "'topology' needs one column per chip", -1);
            for (size_t b = 0; b < S.nchips; b++) {
                long long v = 0;
                if (!jas_int(&row->items[b], &v)) return load_fail(path, "'topology' entries must be numbers", -1);
                S.topo[a][b] = (int)v;
            }
        }
        S.has_topo = 1;
    }
    return 1;
}

/* Lock held. Returns DCMI_OK, or -8005 when there is no (valid) node file. */
static int load_node(void) {
    const char *path = getenv(NODE_ENV);
    if (!path || !path[0]) {
        fprintf(stderr, "libdcmi_fake: $%s is not set: no node to fake\n", NODE_ENV);
        return DCMI_ERR_CODE_INNER_ERR;
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "libdcmi_fake: node file %s: %s\n", path, strerror(errno));
        return DCMI_ERR_CODE_INNER_ERR;
    }
    if (S.loaded && strcmp(S.path, path) == 0 && same_file(&S.st, &st)) return DCMI_OK;
    jv tree;
    memset(&tree, 0, sizeof(tree));
    if (!parse_file(path, &tree, "node file")) return DCMI_ERR_CODE_INNER_ERR;
    memset(&S, 0, sizeof(S));
    int ok = load_node_tree(&tree, path);
    jfree(&tree);
    if (!ok) {
        memset(&S, 0, sizeof(S));
        return DCMI_ERR_CODE_INNER_ERR;
    }
    copy_bounded(S.path, sizeof(S.path), path);
    S.st = st;
    S.loaded = 1;
    return DCMI_OK;
}

/* ------------------------------------------------------------------------------------------------ */
/* The control file                                                                                 */
/* ------------------------------------------------------------------------------------------------ */

static void apply_control(const jv *t) {
    memset(S.ctl, 0, sizeof(S.ctl));
    S.n_removed = S.n_ctl_unsupported = S.n_in_use = 0;
    S.ctl_init_error = (int)jint(t, "init_error", 0);
    const jv *chips = jget(t, "chips");
    for (size_t k = 0; chips && chips->t == J_OBJ && k < chips->n; k++) {
        char *end = NULL;
        unsigned long phy = strtoul(chips->keys[k], &end, 10);
        int idx = (end && *end == '\0') ? index_by_phy((unsigned)phy) : -1;
        if (idx < 0) continue;
        const jv *o = &chips->items[k];
        chip_ctl_t *c = &S.ctl[idx];
        long long v;
        if (jas_int(jget(o, "health"), &v)) {
            c->has_health = 1;
            c->health = (unsigned)v;
        }
        const jv *errs = jget(o, "error_codes");
        if (errs && errs->t == J_ARR) {
            c->has_err = 1;
            for (size_t e = 0; e < errs->n && c->nerr < DCMI_ERROR_CODE_MAX_COUNT; e++)
                if (jas_int(&errs->items[e], &v)) c->err[c->nerr++] = (unsigned)v;
        }
        c->hang_s = jdouble(o, "hang_s", 0);
        c->dropped = (int)jint(o, "dropped", 0);
    }
    const jv *removed = jget(t, "removed_cards");
    for (size_t k = 0; k < jlen(removed) && S.n_removed < MAX_CARDS; k++) {
        long long v;
        if (jas_int(&removed->items[k], &v)) S.removed[S.n_removed++] = (int)v;
    }
    const jv *uns = jget(t, "not_supported");
    for (size_t k = 0; k < jlen(uns) && S.n_ctl_unsupported < MAX_NAMES; k++)
        if (uns->items[k].t == J_STR)
            copy_bounded(S.ctl_unsupported[S.n_ctl_unsupported++], NAME_LEN, uns->items[k].s);
    const jv *in_use = jget(t, "vnpus_in_use");
    for (size_t k = 0; k < jlen(in_use) && S.n_in_use < MAX_VNPUS; k++) {
        long long v;
        if (jas_int(&in_use->items[k], &v)) S.in_use[S.n_in_use++] = (unsigned)v;
    }
}

/* Lock held. Re-parses the control file when it changed; a missing file means "no overrides". */
static void refresh_control(void) {
    if (!S.loaded) return;
    struct stat st;
    if (stat(S.control_path, &st) != 0) {
        if (S.ctl_valid) {
            jv empty;
            memset(&empty, 0, sizeof(empty));
            empty.t = J_OBJ;
            apply_control(&empty);
            S.ctl_valid = 0;
        }
        return;
    }
    if (S.ctl_valid && same_file(&S.ctl_st, &st)) return;
    jv tree;
    memset(&tree, 0, sizeof(tree));
    if (!parse_file(S.control_path, &tree, "control file")) return; /* keep the last good control */
    if (tree.t != J_OBJ) {
        fprintf(stderr, "libdcmi_fake: control file %s: must hold a JSON object\n", S.control_path);
        jfree(&tree);
        return;
    }
    apply_control(&tree);
    jfree(&tree);
    S.ctl_st = st;
    S.ctl_valid = 1;
}

static int unsupported(const char *fn) {
    for (unsigned k = 0; k < S.n_unsupported; k++)
        if (strcmp(S.unsupported[k], fn) == 0) return 1;
    for (unsigned k = 0; k < S.n_ctl_unsupported; k++)
        if (strcmp(S.ctl_unsupported[k], fn) == 0) return 1;
    return 0;
}

static int vnpu_in_use(unsigned vdev_id) {
    for (unsigned k = 0; k < S.n_in_use; k++)
        if (S.in_use[k] == vdev_id) return 1;
    return 0;
}

static unsigned chip_health(const chip_t *c) {
    const chip_ctl_t *x = &S.ctl[chip_index(c)];
    return x->has_health ? x->health : c->health;
}

static int chip_dropped(const chip_t *c) { return c->dropped || S.ctl[chip_index(c)].dropped; }

/* ------------------------------------------------------------------------------------------------ */
/* Call prologues                                                                                   */
/* ------------------------------------------------------------------------------------------------ */

/* Lock held: every call but dcmi_init starts here. */
static int enter(const char *fn) {
    if (!S.inited) return DCMI_ERR_CODE_INNER_ERR;
    refresh_control();
    if (unsupported(fn)) return DCMI_ERR_CODE_NOT_SUPPORT;
    return DCMI_OK;
}

static int find_chip(int card_id, int device_id, chip_t **out) {
    if (!find_card(card_id)) return DCMI_ERR_CODE_INVALID_DEVICE_ID;
    if (card_removed(card_id)) return DCMI_ERR_CODE_DEVICE_NOT_EXIST;
    for (unsigned i = 0; i < S.nchips; i++)
        if (S.chips[i].card_id == card_id && S.chips[i].device_id == device_id) {
            *out = &S.chips[i];
            return DCMI_OK;
        }
    return DCMI_ERR_CODE_INVALID_DEVICE_ID;
}

/*
 * Lock held on entry and on return. Waits out the hang of one chip (by phy id) with the lock released,
 * re-reading the control file every few ms so that ending or shortening the hang wakes the caller.
 */
static void wait_hang(unsigned phy) {
    long long start = now_ms();
    for (;;) {
        int idx = index_by_phy(phy);
        double hang = (idx >= 0 && S.inited) ? S.ctl[idx].hang_s : 0;
        if (hang <= 0 || (double)(now_ms() - start) >= hang * 1000.0) return;
        pthread_mutex_unlock(&g_lock);
        sleep_ms(HANG_SLICE_MS);
        pthread_mutex_lock(&g_lock);
        refresh_control();
    }
}

/* Lock held. Resolves `n` chips for `fn`, waits out their hangs, then checks for a dropped chip. */
static int enter_chips(const char *fn, unsigned n, const int *cards, const int *devs, chip_t **out) {
    int waited = 0;
    for (;;) {
        int rc = enter(fn);
        if (rc != DCMI_OK) return rc;
        for (unsigned k = 0; k < n; k++) {
            rc = find_chip(cards[k], devs[k], &out[k]);
            if (rc != DCMI_OK) return rc;
        }
        if (waited) break;
        int hung = 0;
        for (unsigned k = 0; k < n; k++) {
            if (S.ctl[chip_index(out[k])].hang_s > 0) {
                wait_hang(out[k]->phy_id);
                hung = 1;
            }
        }
        if (!hung) break;
        waited = 1; /* the description may have been reloaded meanwhile: resolve again */
    }
    for (unsigned k = 0; k < n; k++)
        if (chip_dropped(out[k])) return DCMI_ERR_CODE_NOT_REDAY;
    return DCMI_OK;
}

static int enter_chip(const char *fn, int card_id, int device_id, chip_t **out) {
    return enter_chips(fn, 1, &card_id, &device_id, out);
}

#define CHIP_CALL(card, dev, c)                                         \
    chip_t *c = NULL;                                                   \
    LOCKED;                                                             \
    do {                                                                \
        int enter_rc_ = enter_chip(__func__, (card), (dev), &c);        \
        if (enter_rc_ != DCMI_OK) return enter_rc_;                     \
    } while (0)

#define GLOBAL_CALL()                                   \
    LOCKED;                                             \
    do {                                                \
        int enter_rc_ = enter(__func__);                \
        if (enter_rc_ != DCMI_OK) return enter_rc_;     \
    } while (0)

#define REQUIRE(cond)                                                      \
    do {                                                                   \
        if (!(cond)) return DCMI_ERR_CODE_INVALID_PARAMETER;              \
    } while (0)

static int copy_out(char *dst, long cap, const char *src) {
    if (cap <= 0 || (long)strlen(src) + 1 > cap) return DCMI_ERR_CODE_INVALID_PARAMETER;
    memcpy(dst, src, strlen(src) + 1);
    return DCMI_OK;
}

static void copy_field(unsigned char *dst, size_t cap, const char *src) {
    memset(dst, 0, cap);
    size_t n = strlen(src);
    memcpy(dst, src, n < cap - 1 ? n : cap - 1);
}

/* ------------------------------------------------------------------------------------------------ */
/* vNPU bookkeeping and the state file                                                              */
/* ------------------------------------------------------------------------------------------------ */

typedef struct {
    unsigned count, aicore, aicpu, vfg_bitmap, slot_bitmap;
    unsigned long long mem_mb;
} usage_t;

static usage_t chip_usage(const chip_t *c) {
    usage_t u;
    memset(&u, 0, sizeof(u));
    for (unsigned k = 0; k < MAX_VNPUS; k++) {
        const vnpu_t *v = &S.vnpus[k];
        if (!v->used || v->phy_id != c->phy_id) continue;
        const tmpl_t *t = find_template(c, v->tmpl);
        u.count++;
        if (t) {
            u.aicore += t->aicore;
            u.aicpu += t->aicpu;
            u.mem_mb += t->mem_mb;
        }
        if (v->vfg_id < MAX_VFG) u.vfg_bitmap |= 1u << v->vfg_id;
        u.slot_bitmap |= 1u << v->slot;
    }
    return u;
}

static vnpu_t *find_vnpu(const chip_t *c, unsigned vdev_id) {
    for (unsigned k = 0; k < MAX_VNPUS; k++)
        if (S.vnpus[k].used && S.vnpus[k].vdev_id == vdev_id && S.vnpus[k].phy_id == c->phy_id) return &S.vnpus[k];
    return NULL;
}

static int vdev_id_taken(unsigned vdev_id) {
    for (unsigned k = 0; k < MAX_VNPUS; k++)
        if (S.vnpus[k].used && S.vnpus[k].vdev_id == vdev_id) return 1;
    return 0;
}

static int bitcount(unsigned x) {
    int n = 0;
    for (; x; x &= x - 1) n++;
    return n;
}

/* Lock held. Rewrites the state file atomically (temporary file + rename). */
static void save_state(void) {
    if (!S.state_path[0]) return;
    char tmp[PATH_LEN + 32];
    snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", S.state_path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "libdcmi_fake: cannot write vNPU state %s: %s\n", tmp, strerror(errno));
        return;
    }
    fprintf(f, "{\"vnpus\": [");
    int first = 1;
    for (unsigned k = 0; k < MAX_VNPUS; k++) {
        const vnpu_t *v = &S.vnpus[k];
        if (!v->used) continue;
        fprintf(f, "%s\n  {\"vdev_id\": %u, \"phy_id\": %u, \"template\": \"%s\", \"vfg_id\": %u, \"slot\": %u}",
                first ? "" : ",", v->vdev_id, v->phy_id, v->tmpl, v->vfg_id, v->slot);
        first = 0;
    }
    fprintf(f, "%s]}\n", first ? "" : "\n");
    if (fclose(f) != 0 || rename(tmp, S.state_path) != 0) {
        fprintf(stderr, "libdcmi_fake: cannot write vNPU state %s: %s\n", S.state_path, strerror(errno));
        unlink(tmp);
    }
}

/* Lock held. Reloads the vNPU table from the state file (missing file: none). */
static void load_state(void) {
    memset(S.vnpus, 0, sizeof(S.vnpus));
    if (!S.state_path[0] || access(S.state_path, F_OK) != 0) return;
    jv tree;
    memset(&tree, 0, sizeof(tree));
    if (!parse_file(S.state_path, &tree, "vNPU state file")) return;
    const jv *list = jget(&tree, "vnpus");
    unsigned n = 0;
    for (size_t k = 0; k < jlen(list) && n < MAX_VNPUS; k++) {
        const jv *o = &list->items[k];
        long long phy = jint(o, "phy_id", -1), vdev = jint(o, "vdev_id", -1), slot = jint(o, "slot", -1);
        int idx = phy >= 0 ? index_by_phy((unsigned)phy) : -1;
        const char *name = jstr(o, "template", "");
        if (idx < 0 || vdev < 0 || slot < 0 || slot >= MAX_VNPU_PER_CHIP || !find_template(&S.chips[idx], name)) {
            fprintf(stderr, "libdcmi_fake: %s: vnpus[%zu] does not fit this node; ignored\n", S.state_path, k);
            continue;
        }
        vnpu_t *v = &S.vnpus[n++];
        v->used = 1;
        v->vdev_id = (unsigned)vdev;
        v->phy_id = (unsigned)phy;
        v->slot = (unsigned)slot;
        v->vfg_id = (unsigned)jint(o, "vfg_id", 0);
        copy_bounded(v->tmpl, sizeof(v->tmpl), name);
    }
    jfree(&tree);
}

/* The driver's /dev/vdavinci<id>, under the node's host root when it has one. */
static void vnpu_node(unsigned vdev_id, int present) {
    if (!S.host_root[0]) return;
    char path[PATH_LEN + 64];
    snprintf(path, sizeof(path), "%s/dev/vdavinci%u", S.host_root, vdev_id);
    if (present) {
        int fd = open(path, O_WRONLY | O_CREAT, 0644);
        if (fd >= 0) close(fd);
        else fprintf(stderr, "libdcmi_fake: cannot create %s: %s\n", path, strerror(errno));
    } else {
        unlink(path);
    }
}

static void fill_media(struct dcmi_media_resource *m, const tmpl_t *t) {
    m->jpegd = t->jpegd;
    m->jpege = t->jpege;
    m->vpc = t->vpc;
    m->vdec = t->vdec;
    m->pngd = t->pngd;
    m->venc = t->venc;
}

/* ------------------------------------------------------------------------------------------------ */
/* Init, versions, enumeration, id mapping                                                          */
/* ------------------------------------------------------------------------------------------------ */

API int dcmi_init(void) {
    LOCKED;
    S.inited = 0;
    int rc = load_node();
    if (rc != DCMI_OK) return rc;
    S.ctl_valid = 0;
    refresh_control();
    if (S.ctl_init_error) return S.ctl_init_error;
    if (S.init_error) return S.init_error;
    load_state();
    S.inited = 1;
    return DCMI_OK;
}

API int dcmi_get_dcmi_version(char *dcmi_ver, unsigned int len) {
    REQUIRE(dcmi_ver);
    GLOBAL_CALL();
    return copy_out(dcmi_ver, (long)len, S.dcmi_version);
}

API int dcmi_get_driver_version(char *driver_ver, unsigned int len) {
    REQUIRE(driver_ver);
    GLOBAL_CALL();
    return copy_out(driver_ver, (long)len, S.driver_version);
}

static int card_list(int *card_num, int *list, int list_len) {
    int n = 0;
    for (unsigned k = 0; k < S.ncards; k++)
        if (!card_removed(S.cards[k].card_id)) n++;
    if (n > list_len) return DCMI_ERR_CODE_INVALID_PARAMETER;
    n = 0;
    for (unsigned k = 0; k < S.ncards; k++)
        if (!card_removed(S.cards[k].card_id)) list[n++] = S.cards[k].card_id;
    *card_num = n;
    return DCMI_OK;
}

API int dcmi_get_card_list(int *card_num, int *card_list_out, int list_len) {
    REQUIRE(card_num && card_list_out && list_len >= 0);
    GLOBAL_CALL();
    return card_list(card_num, card_list_out, list_len);
}

API int dcmi_get_card_num_list(int *card_num, int *card_list_out, int list_len) {
    REQUIRE(card_num && card_list_out && list_len >= 0);
    GLOBAL_CALL();
    return card_list(card_num, card_list_out, list_len);
}

static int card_chip_count(int card_id, int *count) {
    if (!find_card(card_id)) return DCMI_ERR_CODE_INVALID_DEVICE_ID;
    if (card_removed(card_id)) return DCMI_ERR_CODE_DEVICE_NOT_EXIST;
    int n = 0;
    for (unsigned i = 0; i < S.nchips; i++)
        if (S.chips[i].card_id == card_id) n++;
    *count = n;
    return DCMI_OK;
}

API int dcmi_get_device_num_in_card(int card_id, int *device_num) {
    REQUIRE(device_num);
    GLOBAL_CALL();
    return card_chip_count(card_id, device_num);
}

API int dcmi_get_device_id_in_card(int card_id, int *device_id_max, int *mcu_id, int *cpu_id) {
    REQUIRE(device_id_max && mcu_id && cpu_id);
    GLOBAL_CALL();
    int n = 0;
    int rc = card_chip_count(card_id, &n);
    if (rc != DCMI_OK) return rc;
    const card_t *card = find_card(card_id);
    *device_id_max = n;
    *mcu_id = card->mcu_id;
    *cpu_id = card->cpu_id;
    return DCMI_OK;
}

/* Lock held: the chip with that logic (by_phy = 0) or phy id, honouring removed cards. */
static int chip_by_id(unsigned id, int by_phy, chip_t **out) {
    for (unsigned i = 0; i < S.nchips; i++) {
        chip_t *c = &S.chips[i];
        if ((by_phy ? c->phy_id : c->logic_id) != id) continue;
        if (card_removed(c->card_id)) return DCMI_ERR_CODE_DEVICE_NOT_EXIST;
        *out = c;
        return DCMI_OK;
    }
    return DCMI_ERR_CODE_INVALID_DEVICE_ID;
}

API int dcmi_get_device_logic_id(int *device_logic_id, int card_id, int device_id) {
    REQUIRE(device_logic_id);
    GLOBAL_CALL();
    chip_t *c = NULL;
    int rc = find_chip(card_id, device_id, &c);
    if (rc != DCMI_OK) return rc;
    *device_logic_id = (int)c->logic_id;
    return DCMI_OK;
}

API int dcmi_get_device_phyid_from_logicid(unsigned int logicid, unsigned int *phyid) {
    REQUIRE(phyid);
    GLOBAL_CALL();
    chip_t *c = NULL;
    int rc = chip_by_id(logicid, 0, &c);
    if (rc != DCMI_OK) return rc;
    *phyid = c->phy_id;
    return DCMI_OK;
}

API int dcmi_get_device_logicid_from_phyid(unsigned int phyid, unsigned int *logicid) {
    REQUIRE(logicid);
    GLOBAL_CALL();
    chip_t *c = NULL;
    int rc = chip_by_id(phyid, 1, &c);
    if (rc != DCMI_OK) return rc;
    *logicid = c->logic_id;
    return DCMI_OK;
}

API int dcmi_get_card_id_device_id_from_logicid(int *card_id, int *device_id, unsigned int device_logic_id) {
    REQUIRE(card_id && device_id);
    GLOBAL_CALL();
    chip_t *c = NULL;
    int rc = chip_by_id(device_logic_id, 0, &c);
    if (rc != DCMI_OK) return rc;
    *card_id = c->card_id;
    *device_id = c->device_id;
    return DCMI_OK;
}

API int dcmi_get_card_id_device_id_from_phyid(int *card_id, int *device_id, unsigned int device_phy_id) {
    REQUIRE(card_id && device_id);
    GLOBAL_CALL();
    chip_t *c = NULL;
    int rc = chip_by_id(device_phy_id, 1, &c);
    if (rc != DCMI_OK) return rc;
    *card_id = c->card_id;
    *device_id = c->device_id;
    return DCMI_OK;
}

API int dcmi_get_driver_health(unsigned int *health) {
    REQUIRE(health);
    GLOBAL_CALL();
    *health = 0;
    return DCMI_OK;
}

API int dcmi_get_vdevice_mode(int *mode) {
    REQUIRE(mode);
    GLOBAL_CALL();
    *mode = S.vdevice_mode;
    return DCMI_OK;
}

API int dcmi_get_vnpu_config_recover_mode(unsigned int *mode) {
    REQUIRE(mode);
    GLOBAL_CALL();
    *mode = S.recover_mode;
    return DCMI_OK;
}

/* ------------------------------------------------------------------------------------------------ */
/* Per-chip identity and state                                                                      */
/* ------------------------------------------------------------------------------------------------ */

API int dcmi_get_device_type(int card_id, int device_id, enum dcmi_unit_type *device_type) {
    REQUIRE(device_type);
    {
        LOCKED;
        int rc = enter(__func__);
        if (rc != DCMI_OK) return rc;
        const card_t *card = find_card(card_id);
        if (card && !card_removed(card_id) && card->mcu_id >= 0 && card->mcu_id == device_id) {
            *device_type = MCU_TYPE;
            return DCMI_OK;
        }
    }
    CHIP_CALL(card_id, device_id, c);
    (void)c;
    *device_type = NPU_TYPE;
    return DCMI_OK;
}

API int dcmi_get_product_type(int card_id, int device_id, char *product_type_str, int buf_size) {
    REQUIRE(product_type_str && buf_size > 0);
    CHIP_CALL(card_id, device_id, c);
    if (!c->product_type[0]) return DCMI_ERR_CODE_NOT_SUPPORT;
    return copy_out(product_type_str, buf_size, c->product_type);
}

API int dcmi_get_device_board_info(int card_id, int device_id, struct dcmi_board_info *board_info) {
    REQUIRE(board_info);
    CHIP_CALL(card_id, device_id, c);
    *board_info = c->board;
    return DCMI_OK;
}

API int dcmi_get_device_boot_status(int card_id, int device_id, enum dcmi_boot_status *boot_status) {
    REQUIRE(boot_status);
    CHIP_CALL(card_id, device_id, c);
    *boot_status = (enum dcmi_boot_status)c->boot_status;
    return DCMI_OK;
}

API int dcmi_get_device_health(int card_id, int device_id, unsigned int *health) {
    REQUIRE(health);
    CHIP_CALL(card_id, device_id, c);
    *health = chip_health(c);
    return DCMI_OK;
}

API int dcmi_get_device_errorcode_v2(int card_id, int device_id, int *error_count, unsigned int *error_code_list,
                                     unsigned int list_len) {
    REQUIRE(error_count && error_code_list && list_len > 0);
    CHIP_CALL(card_id, device_id, c);
    const chip_ctl_t *x = &S.ctl[chip_index(c)];
    unsigned n = x->has_err ? x->nerr : c->nerr;
    const unsigned *codes = x->has_err ? x->err : c->err;
    if (n > list_len) n = list_len;
    memcpy(error_code_list, codes, n * sizeof(unsigned));
    *error_count = (int)n;
    return DCMI_OK;
}

API int dcmi_get_device_errorcode_string(int card_id, int device_id, unsigned int error_code,
                                         unsigned char *error_info, int buf_size) {
    REQUIRE(error_info && buf_size > 0);
    CHIP_CALL(card_id, device_id, c);
    (void)c;
    char text[64];
    snprintf(text, sizeof(text), "fake fault 0x%08X", error_code);
    return copy_out((char *)error_info, buf_size, text);
}

API int dcmi_get_device_network_health(int card_id, int device_id, enum dcmi_rdfx_detect_result *result) {
    REQUIRE(result);
    CHIP_CALL(card_id, device_id, c);
    if (!c->has_net) return DCMI_ERR_CODE_NOT_SUPPORT;
    *result = (enum dcmi_rdfx_detect_result)c->net_health;
    return DCMI_OK;
}

API int dcmi_get_device_chip_info(int card_id, int device_id, struct dcmi_chip_info *chip_info) {
    REQUIRE(chip_info);
    CHIP_CALL(card_id, device_id, c);
    copy_field(chip_info->chip_type, sizeof(chip_info->chip_type), c->chip_type);
    copy_field(chip_info->chip_name, sizeof(chip_info->chip_name), c->chip_name);
    copy_field(chip_info->chip_ver, sizeof(chip_info->chip_ver), c->chip_ver);
    chip_info->aicore_cnt = c->aicore;
    return DCMI_OK;
}

API int dcmi_get_device_chip_info_v2(int card_id, int device_id, struct dcmi_chip_info_v2 *chip_info) {
    REQUIRE(chip_info);
    CHIP_CALL(card_id, device_id, c);
    copy_field(chip_info->chip_type, sizeof(chip_info->chip_type), c->chip_type);
    copy_field(chip_info->chip_name, sizeof(chip_info->chip_name), c->chip_name);
    copy_field(chip_info->chip_ver, sizeof(chip_info->chip_ver), c->chip_ver);
    copy_field(chip_info->npu_name, sizeof(chip_info->npu_name), c->npu_name);
    chip_info->aicore_cnt = c->aicore;
    return DCMI_OK;
}

API int dcmi_get_device_memory_info_v3(int card_id, int device_id, struct dcmi_get_memory_info_stru *memory_info) {
    REQUIRE(memory_info);
    CHIP_CALL(card_id, device_id, c);
    if (!c->has_mem) return DCMI_ERR_CODE_NOT_SUPPORT;
    memset(memory_info, 0, sizeof(*memory_info));
    memory_info->memory_size = c->mem_mb;
    memory_info->memory_available = c->mem_avail_mb;
    memory_info->freq = c->mem_freq;
    memory_info->hugepagesize = c->huge_kb;
    memory_info->hugepages_total = c->huge_total;
    memory_info->hugepages_free = c->huge_free;
    memory_info->utiliza = c->mem_util;
    return DCMI_OK;
}

API int dcmi_get_device_memory_info_v2(int card_id, int device_id, struct dcmi_memory_info *memory_info) {
    REQUIRE(memory_info);
    CHIP_CALL(card_id, device_id, c);
    if (!c->has_mem) return DCMI_ERR_CODE_NOT_SUPPORT;
    memory_info->memory_size = c->mem_mb;
    memory_info->freq = c->mem_freq;
    memory_info->utiliza = c->mem_util;
    return DCMI_OK;
}

API int dcmi_get_memory_info(int card_id, int device_id, struct dcmi_memory_info_stru *device_memory_info) {
    REQUIRE(device_memory_info);
    CHIP_CALL(card_id, device_id, c);
    if (!c->has_mem) return DCMI_ERR_CODE_NOT_SUPPORT;
    device_memory_info->memory_size = c->mem_mb;
    device_memory_info->freq = c->mem_freq;
    device_memory_info->utiliza = c->mem_util;
    return DCMI_OK;
}

API int dcmi_get_device_hbm_info(int card_id, int device_id, struct dcmi_hbm_info *hbm_info) {
    REQUIRE(hbm_info);
    CHIP_CALL(card_id, device_id, c);
    if (!c->has_hbm) return DCMI_ERR_CODE_NOT_SUPPORT;
    memset(hbm_info, 0, sizeof(*hbm_info));
    hbm_info->memory_size = c->hbm_mb;
    hbm_info->freq = c->hbm_freq;
    hbm_info->memory_usage = c->hbm_usage_mb;
    hbm_info->temp = c->hbm_temp;
    hbm_info->bandwith_util_rate = c->hbm_bw;
    return DCMI_OK;
}

API int dcmi_get_device_pcie_info(int card_id, int device_id, struct dcmi_pcie_info *pcie_info) {
    REQUIRE(pcie_info);
    CHIP_CALL(card_id, device_id, c);
    pcie_info->deviceid = c->pci_device;
    pcie_info->venderid = c->vendor;
    pcie_info->subvenderid = c->subvendor;
    pcie_info->subdeviceid = c->subdevice;
    pcie_info->bdf_deviceid = c->dev;
    pcie_info->bdf_busid = c->bus;
    pcie_info->bdf_funcid = c->func;
    return DCMI_OK;
}

API int dcmi_get_device_pcie_info_v2(int card_id, int device_id, struct dcmi_pcie_info_all *pcie_info) {
    REQUIRE(pcie_info);
    CHIP_CALL(card_id, device_id, c);
    memset(pcie_info, 0, sizeof(*pcie_info));
    pcie_info->venderid = c->vendor;
    pcie_info->subvenderid = c->subvendor;
    pcie_info->deviceid = c->pci_device;
    pcie_info->subdeviceid = c->subdevice;
    pcie_info->domain = c->domain;
    pcie_info->bdf_busid = c->bus;
    pcie_info->bdf_deviceid = c->dev;
    pcie_info->bdf_funcid = c->func;
    return DCMI_OK;
}

API int dcmi_get_device_die_v2(int card_id, int device_id, enum dcmi_die_type input_type, struct dcmi_die_id *die_id) {
    REQUIRE(die_id);
    int kind = (int)input_type;
    REQUIRE(kind == NDIE || kind == VDIE || kind == DDIE);
    CHIP_CALL(card_id, device_id, c);
    if (kind == VDIE && c->has_vdie) {
        memcpy(die_id->soc_die, c->vdie, sizeof(die_id->soc_die));
        return DCMI_OK;
    }
    if (kind == NDIE && c->has_ndie) {
        memcpy(die_id->soc_die, c->ndie, sizeof(die_id->soc_die));
        return DCMI_OK;
    }
    return DCMI_ERR_CODE_NOT_SUPPORT;
}

API int dcmi_get_device_utilization_rate(int card_id, int device_id, int input_type, unsigned int *utilization_rate) {
    REQUIRE(utilization_rate);
    int slot = -1;
    for (size_t k = 0; k < N_UTIL; k++)
        if (UTIL_KEYS[k].input_type == input_type) slot = (int)k;
    REQUIRE(slot >= 0);
    CHIP_CALL(card_id, device_id, c);
    if (c->util[slot] < 0) return DCMI_ERR_CODE_NOT_SUPPORT;
    *utilization_rate = (unsigned)c->util[slot];
    return DCMI_OK;
}

API int dcmi_get_device_temperature(int card_id, int device_id, int *temperature) {
    REQUIRE(temperature);
    CHIP_CALL(card_id, device_id, c);
    *temperature = c->temperature;
    return DCMI_OK;
}

API int dcmi_get_device_power_info(int card_id, int device_id, int *power) {
    REQUIRE(power);
    CHIP_CALL(card_id, device_id, c);
    *power = c->power;
    return DCMI_OK;
}

/* *length on input: the buffer size when > 0, else MindX's 32 bytes; on output: the string length. */
API int dcmi_get_affinity_cpu_info_by_device_id(int card_id, int device_id, char *affinity_cpu, int *length) {
    REQUIRE(affinity_cpu && length);
    CHIP_CALL(card_id, device_id, c);
    if (!c->has_affinity) return DCMI_ERR_CODE_NOT_SUPPORT;
    int rc = copy_out(affinity_cpu, *length > 0 ? *length : DEFAULT_AFFINITY_BUF, c->affinity);
    if (rc == DCMI_OK) *length = (int)strlen(c->affinity);
    return rc;
}

API int dcmi_get_topo_info_by_device_id(int card_id1, int device_id1, int card_id2, int device_id2, int *topo_type) {
    REQUIRE(topo_type);
    LOCKED;
    int cards[2] = {card_id1, card_id2}, devs[2] = {device_id1, device_id2};
    chip_t *pair[2] = {NULL, NULL};
    int rc = enter_chips(__func__, 2, cards, devs, pair);
    if (rc != DCMI_OK) return rc;
    if (!S.has_topo) return DCMI_ERR_CODE_NOT_SUPPORT;
    *topo_type = pair[0] == pair[1] ? DCMI_TOPO_TYPE_SELF : S.topo[chip_index(pair[0])][chip_index(pair[1])];
    return DCMI_OK;
}

/* ------------------------------------------------------------------------------------------------ */
/* vNPU: create, destroy, query                                                                     */
/* ------------------------------------------------------------------------------------------------ */

API int dcmi_create_vdevice(int card_id, int device_id, struct dcmi_create_vdev_res_stru *vdev,
                            struct dcmi_create_vdev_out *out) {
    REQUIRE(vdev && out);
    REQUIRE(memchr(vdev->template_name, '\0', sizeof(vdev->template_name)) != NULL);
    CHIP_CALL(card_id, device_id, c);
    if (!c->has_vnpu) return DCMI_ERR_CODE_NOT_SUPPORT;
    const tmpl_t *t = find_template(c, vdev->template_name);
    if (!t) return DCMI_ERR_CODE_INVALID_PARAMETER;
    usage_t u = chip_usage(c);
    if (u.aicore + t->aicore > c->aicore || u.mem_mb + t->mem_mb > c->vnpu_mem_mb || u.count >= MAX_VNPU_PER_CHIP)
        return DCMI_ERR_CODE_RESOURCE_OCCUPIED;
    unsigned slot = 0;
    while (u.slot_bitmap & (1u << slot)) slot++;
    unsigned vdev_id = VDEV_ID_BASE + MAX_VNPU_PER_CHIP * c->phy_id + slot;
    if (vdev->vdev_id != DCMI_VDEV_ID_AUTO) {
        if (vdev->vdev_id < VDEV_ID_BASE || vdev->vdev_id >= VDEV_ID_END || vdev_id_taken(vdev->vdev_id))
            return DCMI_ERR_CODE_INVALID_PARAMETER;
        vdev_id = vdev->vdev_id;
    } else if (vdev_id >= VDEV_ID_END || vdev_id_taken(vdev_id)) {
        vdev_id = VDEV_ID_BASE;
        while (vdev_id < VDEV_ID_END && vdev_id_taken(vdev_id)) vdev_id++;
        if (vdev_id >= VDEV_ID_END) return DCMI_ERR_CODE_RESOURCE_OCCUPIED;
    }
    unsigned vfg = vdev->vfg_id;
    if (vfg == DCMI_VDEV_ID_AUTO) {
        vfg = 0;
        while (vfg < MAX_VFG && (u.vfg_bitmap & (1u << vfg))) vfg++;
        if (vfg >= MAX_VFG) return DCMI_ERR_CODE_RESOURCE_OCCUPIED;
    } else if (vfg >= MAX_VFG) {
        return DCMI_ERR_CODE_INVALID_PARAMETER;
    }
    vnpu_t *v = NULL;
    for (unsigned k = 0; k < MAX_VNPUS && !v; k++)
        if (!S.vnpus[k].used) v = &S.vnpus[k];
    if (!v) return DCMI_ERR_CODE_RESOURCE_OCCUPIED;
    memset(v, 0, sizeof(*v));
    v->used = 1;
    v->vdev_id = vdev_id;
    v->phy_id = c->phy_id;
    v->slot = slot;
    v->vfg_id = vfg;
    copy_bounded(v->tmpl, sizeof(v->tmpl), t->name);
    save_state();
    vnpu_node(vdev_id, 1);
    memset(out, 0, sizeof(*out));
    out->vdev_id = vdev_id;
    out->pcie_bus = c->bus;
    out->pcie_device = c->dev;
    out->pcie_func = slot + 1;
    out->vfg_id = vfg;
    return DCMI_OK;
}

API int dcmi_set_destroy_vdevice(int card_id, int device_id, unsigned int vdevid) {
    CHIP_CALL(card_id, device_id, c);
    if (!c->has_vnpu) return DCMI_ERR_CODE_NOT_SUPPORT;
    if (vdevid == DESTROY_ALL) {
        int busy = 0;
        for (unsigned k = 0; k < MAX_VNPUS; k++) {
            vnpu_t *v = &S.vnpus[k];
            if (!v->used || v->phy_id != c->phy_id) continue;
            if (vnpu_in_use(v->vdev_id)) {
                busy = 1;
                continue;
            }
            v->used = 0;
            vnpu_node(v->vdev_id, 0);
        }
        save_state();
        return busy ? DCMI_ERR_CODE_RESOURCE_OCCUPIED : DCMI_OK;
    }
    vnpu_t *v = find_vnpu(c, vdevid);
    if (!v) return DCMI_ERR_CODE_DEVICE_NOT_EXIST;
    if (vnpu_in_use(vdevid)) return DCMI_ERR_CODE_RESOURCE_OCCUPIED;
    v->used = 0;
    save_state();
    vnpu_node(vdevid, 0);
    return DCMI_OK;
}

static void fill_totals(const chip_t *c, const usage_t *u, int free_part, struct dcmi_computing_resource *comp) {
    unsigned long long mem_left = c->vnpu_mem_mb > u->mem_mb ? c->vnpu_mem_mb - u->mem_mb : 0;
    comp->aic = (float)(free_part ? c->aicore - u->aicore : c->aicore);
    comp->memory_size = free_part ? mem_left : c->vnpu_mem_mb;
    comp->device_aicpu = (unsigned short)(free_part ? (u->aicpu < c->aicpu ? c->aicpu - u->aicpu : 0) : c->aicpu);
    comp->vdev_memory_total = c->vnpu_mem_mb;
    comp->vdev_memory_free = mem_left;
}

static int vdev_mng(chip_t *c, unsigned sub_cmd, void *buf, unsigned *size) {
    if (!c->has_vnpu) return DCMI_ERR_CODE_NOT_SUPPORT;
    usage_t u = chip_usage(c);
    switch (sub_cmd) {
    case DCMI_VMNG_SUB_CMD_GET_VDEV_RESOURCE: {
        struct dcmi_vdev_query_stru *q = buf;
        if (*size < sizeof(*q)) return DCMI_ERR_CODE_INVALID_PARAMETER;
        const vnpu_t *v = find_vnpu(c, q->vdev_id);
        if (!v) return DCMI_ERR_CODE_DEVICE_NOT_EXIST;
        const tmpl_t *t = find_template(c, v->tmpl);
        if (!t) return DCMI_ERR_CODE_INNER_ERR;
        unsigned vdev_id = q->vdev_id;
        memset(q, 0, sizeof(*q));
        q->vdev_id = vdev_id;
        struct dcmi_vdev_query_info *info = &q->query_info;
        copy_bounded(info->name, sizeof(info->name), t->name);
        info->is_container_used = (unsigned)vnpu_in_use(v->vdev_id);
        info->vfid = v->slot + 1;
        info->vfg_id = v->vfg_id;
        info->base.vfg_id = v->vfg_id;
        info->computing.aic = (float)t->aicore;
        info->computing.memory_size = t->mem_mb;
        info->computing.device_aicpu = (unsigned short)t->aicpu;
        info->computing.vdev_memory_total = t->mem_mb;
        info->computing.vdev_memory_free = t->mem_mb;
        fill_media(&info->media, t);
        *size = sizeof(*q);
        return DCMI_OK;
    }
    case DCMI_VMNG_SUB_CMD_GET_TOTAL_RESOURCE: {
        struct dcmi_soc_total_resource *r = buf;
        if (*size < sizeof(*r)) return DCMI_ERR_CODE_INVALID_PARAMETER;
        memset(r, 0, sizeof(*r));
        for (unsigned id = VDEV_ID_BASE; id < VDEV_ID_END && r->vdev_num < DCMI_SOC_SPLIT_MAX; id++)
            if (find_vnpu(c, id)) r->vdev_id[r->vdev_num++] = id;
        r->vfg_bitmap = u.vfg_bitmap;
        r->vfg_num = (unsigned)bitcount(u.vfg_bitmap);
        fill_totals(c, &u, 0, &r->computing);
        *size = sizeof(*r);
        return DCMI_OK;
    }
    case DCMI_VMNG_SUB_CMD_GET_FREE_RESOURCE: {
        struct dcmi_soc_free_resource *r = buf;
        if (*size < sizeof(*r)) return DCMI_ERR_CODE_INVALID_PARAMETER;
        memset(r, 0, sizeof(*r));
        r->vfg_bitmap = ~u.vfg_bitmap & ((1u << MAX_VNPU_PER_CHIP) - 1u);
        r->vfg_num = (unsigned)bitcount(r->vfg_bitmap);
        fill_totals(c, &u, 1, &r->computing);
        *size = sizeof(*r);
        return DCMI_OK;
    }
    default:
        return DCMI_ERR_CODE_NOT_SUPPORT;
    }
}

API int dcmi_get_device_info(int card_id, int device_id, enum dcmi_main_cmd main_cmd, unsigned int sub_cmd, void *buf,
                             unsigned int *size) {
    REQUIRE(buf && size);
    CHIP_CALL(card_id, device_id, c);
    int cmd = (int)main_cmd;
    if (cmd == DCMI_MAIN_CMD_VDEV_MNG) return vdev_mng(c, sub_cmd, buf, size);
    if (cmd == DCMI_MAIN_CMD_CHIP_INF && sub_cmd == DCMI_CHIP_INF_SUB_CMD_SPOD_INFO) {
        if (!c->has_spod) return DCMI_ERR_CODE_NOT_SUPPORT;
        if (*size < sizeof(struct dcmi_spod_info)) return DCMI_ERR_CODE_INVALID_PARAMETER;
        memcpy(buf, &c->spod, sizeof(c->spod));
        *size = sizeof(c->spod);
        return DCMI_OK;
    }
    return DCMI_ERR_CODE_NOT_SUPPORT;
}
