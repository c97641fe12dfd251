/*
 * cachesim: a deterministic per-vCPU L1D + MESI coherence model as a QEMU TCG
 * plugin (system emulation). Meant for single-threaded TCG with icount
 * (-accel tcg,thread=single -icount shift=N,sleep=off), where every callback
 * runs on the one TCG thread in a deterministic order: no locks are needed
 * and the totals repeat boot to boot.
 *
 * Model: each vCPU has a private set-associative cache (default 32 KiB,
 * 8-way, 64-byte lines, true LRU) indexed by guest *physical* address
 * (qemu_plugin_hwaddr_phys_addr; MMIO accesses are skipped). Lines carry MESI
 * states; the "directory" is the set of all vCPU caches, searched on a miss
 * or an upgrade (a snooping directory: exact, since every cache is modelled).
 *   read  hit (M/E/S)           : hit
 *   read  miss, another has M   : miss + transfer; owner M->S; reader S
 *   read  miss, others have E/S : miss; they -> S; reader S
 *   read  miss, nobody has it   : miss; reader E
 *   write hit M                 : hit
 *   write hit E                 : hit, E->M (silent)
 *   write hit S                 : upgrade (counted in misses and in upgrades);
 *                                 invalidation of every other copy
 *   write miss, another has M   : miss + transfer + invalidation; owner -> I
 *   write miss, others have E/S : miss + invalidation; they -> I
 * invalidations counts write events that removed >=1 other copy; inval_lines
 * counts the copies removed. Modelled cycles = insns + miss_penalty * misses
 * + transfer_penalty * transfers (defaults 1/10/60).
 *
 * Window: the guest brackets what to measure with two magic NOPs,
 *   nopl 0x4b420001(%rax)  (0f 1f 80 01 00 42 4b)  start
 *   nopl 0x4b420002(%rax)  (0f 1f 80 02 00 42 4b)  stop
 * recognised in the translation callback (bytes only: no register reads).
 * The caches are simulated all the time; counters are kept for the whole
 * run ("boot") and for the time inside start..stop ("window"; several
 * windows add up). Instructions are counted per executed translation block.
 *
 * Arguments: out=PATH (report; rewritten at each stop marker and at exit),
 * miss=N, xfer=N, kib=N, ways=N.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "qemu-plugin-min.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = 3;

#define MAXCPU 16
#define LINE_SHIFT 6
#define MAXWAYS 32
enum { ST_I = 0, ST_S, ST_E, ST_M };

typedef struct {
    uint64_t insns, accesses, reads, writes, misses, upgrades, transfers,
        invalidations, inval_lines, writebacks, kernel_transfers, kernel_misses;
} Counters;

typedef struct {
    uint64_t *tag;   /* sets*ways: line address */
    uint64_t *stamp; /* LRU stamp */
    uint8_t *state;
} Cache;

static unsigned nsets = 64, nways = 8, ncpu = 1;
static uint64_t miss_penalty = 10, xfer_penalty = 60;
static Cache caches[MAXCPU];
static Counters boot[MAXCPU], win[MAXCPU];
static int in_window;
static unsigned windows_started, windows_stopped;
static uint64_t tick;
static const char *out_path;
/* Watched object: the instruction at watch_pc accesses the object at pa - watch_off. */
static uint64_t watch_pc, watch_off, watch_size, watch_base, watch_changes;
static uint64_t watch_x[16], watch_inv[16], watch_miss[16], watch_acc[16];
static inline int watch_idx(uint64_t line)
{
    if (!watch_base || !in_window) return -1;
    uint64_t lo = watch_base >> LINE_SHIFT, hi = (watch_base + watch_size - 1) >> LINE_SHIFT;
    if (line < lo || line > hi || line - lo >= 16) return -1;
    return (int)(line - lo);
}

/* Hot lines by transfers inside the window (open addressing). */
#define HOT_SIZE (1 << 16)
static struct { uint64_t line, xfers, invals, pc; } hot[HOT_SIZE];
static void hot_add(uint64_t line, int xfer, int inval, uint64_t pc)
{
    uint64_t h = (line * 0x9E3779B97F4A7C15ull) >> 48;
    for (unsigned i = 0; i < HOT_SIZE; i++) {
        unsigned k = (h + i) & (HOT_SIZE - 1);
        if (hot[k].line == line || hot[k].line == 0) {
            hot[k].line = line;
            hot[k].xfers += xfer;
            hot[k].invals += inval;
            if (xfer) hot[k].pc = pc;
            return;
        }
    }
}

/* Instructions (guest vaddr) by coherence events inside the window. */
static struct { uint64_t pc, xfers, invals, misses; } hotpc[HOT_SIZE];
static void pc_add(uint64_t pc, int xfer, int inval, int miss)
{
    uint64_t h = (pc * 0x9E3779B97F4A7C15ull) >> 48;
    for (unsigned i = 0; i < HOT_SIZE; i++) {
        unsigned k = (h + i) & (HOT_SIZE - 1);
        if (hotpc[k].pc == pc || hotpc[k].pc == 0) {
            hotpc[k].pc = pc;
            hotpc[k].xfers += xfer;
            hotpc[k].invals += inval;
            hotpc[k].misses += miss;
            return;
        }
    }
}

static inline unsigned set_of(uint64_t line) { return (unsigned)(line % nsets); }

static inline int find(Cache *c, uint64_t line)
{
    unsigned base = set_of(line) * nways;
    for (unsigned w = 0; w < nways; w++)
        if (c->state[base + w] != ST_I && c->tag[base + w] == line)
            return (int)(base + w);
    return -1;
}

static inline unsigned victim(Cache *c, uint64_t line, Counters *bc, Counters *wc)
{
    unsigned base = set_of(line) * nways, v = base;
    for (unsigned w = 0; w < nways; w++) {
        if (c->state[base + w] == ST_I)
            return base + w;
        if (c->stamp[base + w] < c->stamp[v])
            v = base + w;
    }
    if (c->state[v] == ST_M) {
        bc->writebacks++;
        if (wc)
            wc->writebacks++;
    }
    return v;
}

static void access_line(unsigned cpu, uint64_t line, int store, int kernel, uint64_t pc)
{
    Cache *c = &caches[cpu];
    Counters *bc = &boot[cpu], *wc = in_window ? &win[cpu] : NULL;
    int i = find(c, line);
    int wi = watch_idx(line);
    if (wi >= 0) watch_acc[wi]++;
    tick++;
    if (i >= 0) {
        c->stamp[i] = tick;
        if (!store || c->state[i] == ST_M)
            return;
        if (c->state[i] == ST_E) {
            c->state[i] = ST_M;
            return;
        }
        /* write to S: upgrade, invalidate the others */
        unsigned removed = 0;
        for (unsigned o = 0; o < ncpu; o++) {
            if (o == cpu)
                continue;
            int j = find(&caches[o], line);
            if (j >= 0) {
                caches[o].state[j] = ST_I;
                removed++;
            }
        }
        c->state[i] = ST_M;
        bc->misses++; bc->upgrades++;
        if (kernel) bc->kernel_misses++;
        if (removed) { bc->invalidations++; bc->inval_lines += removed; }
        if (wi >= 0) { watch_miss[wi]++; if (removed) watch_inv[wi]++; }
        if (wc) {
            wc->misses++; wc->upgrades++;
            if (kernel) wc->kernel_misses++;
            if (removed) { wc->invalidations++; wc->inval_lines += removed; hot_add(line, 0, 1, pc); }
            pc_add(pc, 0, removed ? 1 : 0, 1);
        }
        return;
    }
    /* miss */
    int xfer = 0;
    unsigned removed = 0, others = 0;
    for (unsigned o = 0; o < ncpu; o++) {
        if (o == cpu)
            continue;
        int j = find(&caches[o], line);
        if (j < 0)
            continue;
        others++;
        if (caches[o].state[j] == ST_M)
            xfer = 1;
        if (store) {
            caches[o].state[j] = ST_I;
            removed++;
        } else {
            caches[o].state[j] = ST_S; /* M/E/S -> S (M writes back as it forwards) */
        }
    }
    unsigned v = victim(c, line, bc, wc);
    c->tag[v] = line;
    c->stamp[v] = tick;
    c->state[v] = store ? ST_M : (others ? ST_S : ST_E);
    if (wi >= 0) { watch_miss[wi]++; watch_x[wi] += xfer; if (removed) watch_inv[wi]++; }
    bc->misses++;
    if (kernel) bc->kernel_misses++;
    if (xfer) { bc->transfers++; if (kernel) bc->kernel_transfers++; }
    if (removed) { bc->invalidations++; bc->inval_lines += removed; }
    if (wc) {
        wc->misses++;
        if (kernel) wc->kernel_misses++;
        if (xfer) { wc->transfers++; if (kernel) wc->kernel_transfers++; }
        if (removed) { wc->invalidations++; wc->inval_lines += removed; }
        if (xfer || removed) hot_add(line, xfer, removed ? 1 : 0, pc);
        pc_add(pc, xfer, removed ? 1 : 0, 1);
    }
}

static void vcpu_mem(unsigned int cpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata)
{
    uint64_t pc = (uint64_t)(uintptr_t)udata;
    if (cpu >= ncpu)
        return;
    struct qemu_plugin_hwaddr *hw = qemu_plugin_get_hwaddr(info, vaddr);
    if (!hw || qemu_plugin_hwaddr_is_io(hw))
        return;
    uint64_t pa = qemu_plugin_hwaddr_phys_addr(hw);
    unsigned size = 1u << qemu_plugin_mem_size_shift(info);
    int store = qemu_plugin_mem_is_store(info);
    int kernel = (vaddr >> 63) != 0;
    Counters *bc = &boot[cpu];
    bc->accesses++;
    if (store) bc->writes++; else bc->reads++;
    if (in_window) {
        win[cpu].accesses++;
        if (store) win[cpu].writes++; else win[cpu].reads++;
    }
    if (watch_pc && pc == watch_pc && in_window && pa - watch_off != watch_base) {
        watch_base = pa - watch_off;
        watch_changes++;
    }
    uint64_t first = pa >> LINE_SHIFT, last = (pa + size - 1) >> LINE_SHIFT;
    for (uint64_t l = first; l <= last; l++)
        access_line(cpu, l, store, kernel, pc);
}

static unsigned last_cpu;
static uint64_t switches_boot, switches_win;
static void tb_exec(unsigned int cpu, void *udata)
{
    if (cpu >= ncpu)
        return;
    if (cpu != last_cpu) { last_cpu = cpu; switches_boot++; if (in_window) switches_win++; }
    uint64_t n = (uint64_t)(uintptr_t)udata;
    boot[cpu].insns += n;
    if (in_window)
        win[cpu].insns += n;
}

static void write_report(const char *why);
static void dump_pcs(void);
static void dump(FILE *f, const char *scope, Counters *cs);
static Counters win_prev[MAXCPU];

/* At each stop: this window alone (window minus the previous windows), appended to OUT.windows. */
static void append_window(void)
{
    if (!out_path)
        return;
    char path[4096], scope[32];
    snprintf(path, sizeof path, "%s.windows", out_path);
    FILE *f = fopen(path, "a");
    if (!f)
        return;
    Counters d[MAXCPU];
    for (unsigned c = 0; c < ncpu; c++) {
        uint64_t *a = (uint64_t *)&win[c], *b = (uint64_t *)&win_prev[c], *o = (uint64_t *)&d[c];
        for (size_t k = 0; k < sizeof(Counters) / sizeof(uint64_t); k++)
            o[k] = a[k] - b[k];
        win_prev[c] = win[c];
    }
    snprintf(scope, sizeof scope, "win%u", windows_stopped);
    dump(f, scope, d);
    fclose(f);
}

static void marker(unsigned int cpu, void *udata)
{
    (void)cpu;
    if ((uintptr_t)udata == 1) {
        if (!in_window) { in_window = 1; windows_started++; }
    } else {
        if (in_window) { in_window = 0; windows_stopped++; append_window(); write_report("stop"); dump_pcs(); }
    }
}

static const uint8_t NOP_MAGIC[3] = { 0x0f, 0x1f, 0x80 };

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    /* Window markers first, so a marker toggles before its TB's count. */
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        uint8_t b[16];
        if (qemu_plugin_insn_size(insn) == 7) {
            size_t got = qemu_plugin_insn_data(insn, b, sizeof b);
            if (got >= 7 && !memcmp(b, NOP_MAGIC, 3) && b[5] == 0x42 && b[6] == 0x4b && b[4] == 0 &&
                (b[3] == 1 || b[3] == 2))
                qemu_plugin_register_vcpu_insn_exec_cb(insn, marker, QEMU_PLUGIN_CB_NO_REGS,
                                                       (void *)(uintptr_t)b[3]);
        }
        qemu_plugin_register_vcpu_mem_cb(insn, vcpu_mem, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW,
                                         (void *)(uintptr_t)qemu_plugin_insn_vaddr(insn));
    }
    qemu_plugin_register_vcpu_tb_exec_cb(tb, tb_exec, QEMU_PLUGIN_CB_NO_REGS, (void *)(uintptr_t)n);
}

static uint64_t cycles(const Counters *c)
{
    return c->insns + miss_penalty * c->misses + xfer_penalty * c->transfers;
}

static void dump(FILE *f, const char *scope, Counters *cs)
{
    Counters t = { 0 };
    for (unsigned c = 0; c < ncpu; c++) {
        Counters *x = &cs[c];
        fprintf(f, "%s cpu%u insns=%lu accesses=%lu reads=%lu writes=%lu misses=%lu upgrades=%lu "
                   "transfers=%lu invalidations=%lu inval_lines=%lu writebacks=%lu "
                   "kernel_misses=%lu kernel_transfers=%lu cycles=%lu\n",
                scope, c, x->insns, x->accesses, x->reads, x->writes, x->misses, x->upgrades,
                x->transfers, x->invalidations, x->inval_lines, x->writebacks, x->kernel_misses,
                x->kernel_transfers, cycles(x));
        t.insns += x->insns; t.accesses += x->accesses; t.reads += x->reads; t.writes += x->writes;
        t.misses += x->misses; t.upgrades += x->upgrades; t.transfers += x->transfers;
        t.invalidations += x->invalidations; t.inval_lines += x->inval_lines;
        t.writebacks += x->writebacks; t.kernel_misses += x->kernel_misses;
        t.kernel_transfers += x->kernel_transfers;
    }
    fprintf(f, "%s total insns=%lu accesses=%lu reads=%lu writes=%lu misses=%lu upgrades=%lu "
               "transfers=%lu invalidations=%lu inval_lines=%lu writebacks=%lu "
               "kernel_misses=%lu kernel_transfers=%lu cycles=%lu\n",
            scope, t.insns, t.accesses, t.reads, t.writes, t.misses, t.upgrades, t.transfers,
            t.invalidations, t.inval_lines, t.writebacks, t.kernel_misses, t.kernel_transfers,
            cycles(&t));
}

static int hot_cmp(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b; /* line, xfers, invals */
    uint64_t kx = x[1] + x[2], ky = y[1] + y[2];
    if (kx != ky) return kx < ky ? 1 : -1;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

static void write_report(const char *why)
{
    if (!out_path)
        return;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", out_path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return;
    fprintf(f, "# cachesim: %u vCPUs, L1D %u KiB %u-way 64 B lines LRU, MESI; cycles = insns + %lu*misses + %lu*transfers\n",
            ncpu, nsets * nways * 64 / 1024, nways, miss_penalty, xfer_penalty);
    fprintf(f, "written_at=%s windows_started=%u windows_stopped=%u in_window=%d vcpu_switches_window=%lu vcpu_switches_boot=%lu\n", why,
            windows_started, windows_stopped, in_window, switches_win, switches_boot);
    dump(f, "window", win);
    dump(f, "boot", boot);
    /* top 12 lines by coherence events in the window */
    static uint64_t arr[HOT_SIZE][4];
    unsigned m = 0;
    for (unsigned i = 0; i < HOT_SIZE; i++)
        if (hot[i].line) { arr[m][0] = hot[i].line; arr[m][1] = hot[i].xfers; arr[m][2] = hot[i].invals; arr[m][3] = hot[i].pc; m++; }
    qsort(arr, m, sizeof arr[0], hot_cmp);
    for (unsigned i = 0; i < m && i < 40; i++)
        fprintf(f, "hot pa=0x%lx transfers=%lu invalidating_writes=%lu last_transfer_pc=0x%lx\n", arr[i][0] << LINE_SHIFT, arr[i][1], arr[i][2], arr[i][3]);
    if (watch_pc) {
        fprintf(f, "watch last_base_pa=0x%lx (mod 64 = %lu) size=%lu objects=%lu\n", watch_base, watch_base & 63, watch_size, watch_changes);
        uint64_t tx = 0, ti = 0, tm = 0, ta = 0;
        for (unsigned l = 0; l < 16; l++) {
            if (!watch_acc[l]) continue;
            fprintf(f, "watch rel_line=%u accesses=%lu misses=%lu transfers=%lu invalidating_writes=%lu\n", l, watch_acc[l], watch_miss[l], watch_x[l], watch_inv[l]);
            tx += watch_x[l]; ti += watch_inv[l]; tm += watch_miss[l]; ta += watch_acc[l];
        }
        fprintf(f, "watch total accesses=%lu misses=%lu transfers=%lu invalidating_writes=%lu\n", ta, tm, tx, ti);
    }
    /* top 40 instructions by transfers, then invalidations */
    m = 0;
    for (unsigned i = 0; i < HOT_SIZE; i++)
        if (hotpc[i].pc && (hotpc[i].xfers || hotpc[i].invals)) {
            arr[m][0] = hotpc[i].pc; arr[m][1] = hotpc[i].xfers; arr[m][2] = hotpc[i].invals; m++;
        }
    qsort(arr, m, sizeof arr[0], hot_cmp);
    for (unsigned i = 0; i < m && i < 40; i++)
        fprintf(f, "hotpc pc=0x%lx transfers=%lu invalidating_writes=%lu\n", arr[i][0], arr[i][1], arr[i][2]);
    fclose(f);
    rename(tmp, out_path);
}

static void dump_pcs(void)
{
    if (!out_path)
        return;
    char path[4096];
    snprintf(path, sizeof path, "%s.pcs", out_path);
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    for (unsigned i = 0; i < HOT_SIZE; i++)
        if (hotpc[i].pc)
            fprintf(f, "0x%lx %lu %lu %lu\n", hotpc[i].pc, hotpc[i].xfers, hotpc[i].invals, hotpc[i].misses);
    fclose(f);
}

static void at_exit(qemu_plugin_id_t id, void *p)
{
    (void)id; (void)p;
    write_report("exit");
    dump_pcs();
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
    unsigned kib = 32;
    for (int i = 0; i < argc; i++) {
        char *a = argv[i];
        if (!strncmp(a, "out=", 4)) out_path = a + 4;
        else if (!strncmp(a, "miss=", 5)) miss_penalty = strtoull(a + 5, NULL, 0);
        else if (!strncmp(a, "xfer=", 5)) xfer_penalty = strtoull(a + 5, NULL, 0);
        else if (!strncmp(a, "kib=", 4)) kib = strtoul(a + 4, NULL, 0);
        else if (!strncmp(a, "ways=", 5)) nways = strtoul(a + 5, NULL, 0);
        else if (!strncmp(a, "watchpc=", 8)) watch_pc = strtoull(a + 8, NULL, 0);
        else if (!strncmp(a, "watchoff=", 9)) watch_off = strtoull(a + 9, NULL, 0);
        else if (!strncmp(a, "watchsize=", 10)) watch_size = strtoull(a + 10, NULL, 0);
        else { fprintf(stderr, "cachesim: unknown argument %s\n", a); return -1; }
    }
    if (!info->system_emulation) { fprintf(stderr, "cachesim: system emulation only\n"); return -1; }
    ncpu = info->system.max_vcpus > 0 ? (unsigned)info->system.max_vcpus : 1;
    if (ncpu > MAXCPU) { fprintf(stderr, "cachesim: at most %d vCPUs\n", MAXCPU); return -1; }
    if (nways == 0 || nways > MAXWAYS) return -1;
    nsets = kib * 1024 / 64 / nways;
    for (unsigned c = 0; c < ncpu; c++) {
        caches[c].tag = calloc((size_t)nsets * nways, sizeof(uint64_t));
        caches[c].stamp = calloc((size_t)nsets * nways, sizeof(uint64_t));
        caches[c].state = calloc((size_t)nsets * nways, 1);
        if (!caches[c].tag || !caches[c].stamp || !caches[c].state) return -1;
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    return 0;
}
