/* main_ckpt.c — training checkpoints (--save-every N --ckpt-dir DIR --keep K, --resume DIR) and
 * the stop on SIGINT/SIGTERM.
 *
 * What a step depends on besides the arena's static region (parameters, buffers, optimizer state,
 * the inputs) is a function of the step number: dropout masks (Philox keyed by seed and step),
 * AdamW's bias correction, the LR schedule and the dataset's order (drawn from seed and epoch).
 * So a checkpoint is that region plus the step it ends, the seed and what identifies the model
 * (weights.bin's layout hash and the region's size); --resume loads it and continues at the next
 * step, and the run ends with the same bits as one that was never stopped, given the same flags.
 *
 * DIR/ckpt-STEP.bin: a 64-byte header (magic "CKPTCCKP", version u32, --grad-accum K u32, layout u64,
 * static_bytes u64, step u64, seed u64, samples u64 (--data's N, 0 without), payload checksum u64)
 * then the region. Written as DIR/.ckpt-STEP.tmp, flushed, fsync'ed, renamed, and the directory
 * fsync'ed: a crash leaves the previous checkpoints and at most a temporary file, which --resume
 * ignores and the next checkpoint removes. The newest K are kept. --resume takes the newest file whose header fits and whose
 * checksum holds (an older one when the newest is damaged).
 *
 * A run refuses a --ckpt-dir that already holds checkpoints past its first step (another run's,
 * unless it resumes from that directory): they would be the newest there, so --keep would delete
 * this run's own and a later --resume would silently continue the other run.
 *
 * CKRT_DEBUG_KILL=step:N or ckpt:N (tests only) sends the process SIGKILL in the middle of step N
 * (after its forward) or in the middle of writing the checkpoint of step N.
 */
#define _DEFAULT_SOURCE /* realpath */
#include "main.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CKPT_MAGIC "CKPTCCKP"
#define CKPT_VERSION 1
enum { CKPT_HEADER = 64 };

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig) { stop_signal = sig; }

void ckrt_run_catch_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int ckrt_run_stop_signal(void) { return stop_signal; }

/* CKRT_DEBUG_KILL: "what:N" matches (what, step N, 1-based) */
void ckrt_run_debug_kill(const char *what, int64_t step) {
    const char *e = getenv("CKRT_DEBUG_KILL");
    size_t n = strlen(what);
    if (e && strncmp(e, what, n) == 0 && e[n] == ':' && atoll(e + n + 1) == step) kill(getpid(), SIGKILL);
}

static void put64(unsigned char *h, int at, uint64_t v) { memcpy(h + at, &v, 8); }
static uint64_t get64(const unsigned char *h, int at) {
    uint64_t v;
    memcpy(&v, h + at, 8);
    return v;
}

static int fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* Steps of DIR's ckpt-STEP.bin files, newest first (malloc'ed, *n of them). */
static int64_t *list_ckpts(const char *dir, int *n) {
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return NULL;
    int64_t *v = NULL;
    int cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        long long s;
        char tail[8];
        if (sscanf(de->d_name, "ckpt-%lld.%4s", &s, tail) != 2 || strcmp(tail, "bin") != 0) continue;
        if (*n == cap) {
            cap = cap * 2 + 8;
            int64_t *w = realloc(v, (size_t)cap * sizeof *v);
            if (!w) break;
            v = w;
        }
        v[(*n)++] = s;
    }
    closedir(d);
    for (int i = 1; i < *n; i++) /* insertion sort, newest first */
        for (int j = i; j > 0 && v[j] > v[j - 1]; j--) {
            int64_t t = v[j];
            v[j] = v[j - 1], v[j - 1] = t;
        }
    return v;
}

/* Temporary files an earlier crash left (this run's own was just renamed). */
static void remove_stale_tmps(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    char path[4200];
    while ((de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (strncmp(de->d_name, ".ckpt-", 6) != 0 || n < 4 || strcmp(de->d_name + n - 4, ".tmp") != 0) continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        remove(path);
    }
    closedir(d);
}

int ckrt_run_save_ckpt(run *r, int64_t step) {
    ckrt_ctx *c = &r->c;
    const ckrt_program *p = r->p;
    CKRT_TRY(ckrt_run_ensure_dir(c, r->ckpt_dir));
    char tmp[4200], path[4200];
    snprintf(tmp, sizeof tmp, "%s/.ckpt-%lld.tmp", r->ckpt_dir, (long long)step);
    snprintf(path, sizeof path, "%s/ckpt-%lld.bin", r->ckpt_dir, (long long)step);
    uint64_t sum = 0;
    CKRT_TRY(ckrt_arena_checksum(c, 0, p->static_bytes, &sum));
    unsigned char h[CKPT_HEADER] = {0};
    memcpy(h, CKPT_MAGIC, 8);
    uint32_t version = CKPT_VERSION;
    memcpy(h + 8, &version, 4);
    uint32_t accum = (uint32_t)r->accum;
    memcpy(h + 12, &accum, 4);
    put64(h, 16, p->weights_layout), put64(h, 24, (uint64_t)p->static_bytes), put64(h, 32, (uint64_t)step);
    put64(h, 40, r->seed), put64(h, 48, (uint64_t)r->train.n_samples), put64(h, 56, sum);
    FILE *f = fopen(tmp, "wb");
    if (!f) return ckrt_fail(c, CKRT_ERR_IO, "cannot write '%s': %s", tmp, strerror(errno));
    int rc = fwrite(h, 1, sizeof h, f) == sizeof h ? CKRT_OK : ckrt_fail(c, CKRT_ERR_IO, "cannot write '%s': %s", tmp, strerror(errno));
    if (!rc && getenv("CKRT_DEBUG_KILL")) { /* the half-written file a crash leaves */
        rc = ckrt_arena_save(c, 0, f, tmp, p->static_bytes / 2);
        fflush(f);
        ckrt_run_debug_kill("ckpt", step);
        if (!rc) rc = ckrt_arena_save(c, p->static_bytes / 2, f, tmp, p->static_bytes - p->static_bytes / 2);
    } else if (!rc) {
        rc = ckrt_arena_save(c, 0, f, tmp, p->static_bytes);
    }
    if (!rc && (fflush(f) != 0 || fsync(fileno(f)) != 0)) rc = ckrt_fail(c, CKRT_ERR_IO, "cannot write '%s': %s", tmp, strerror(errno));
    if (fclose(f) != 0 && !rc) rc = ckrt_fail(c, CKRT_ERR_IO, "cannot write '%s': %s", tmp, strerror(errno));
    if (!rc && rename(tmp, path) != 0) rc = ckrt_fail(c, CKRT_ERR_IO, "cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
    if (rc) {
        remove(tmp);
        return rc;
    }
    fsync_dir(r->ckpt_dir);
    remove_stale_tmps(r->ckpt_dir);
    int n = 0;
    int64_t *steps = list_ckpts(r->ckpt_dir, &n);
    for (int i = (int)r->keep; i < n; i++) { /* the newest K stay */
        snprintf(path, sizeof path, "%s/ckpt-%lld.bin", r->ckpt_dir, (long long)steps[i]);
        remove(path);
    }
    free(steps);
    return CKRT_OK;
}

/* One checkpoint into the arena: its header must fit this run, its payload its checksum. */
static int load_one(run *r, const char *path, int64_t *step, char *why, size_t why_n) {
    ckrt_ctx *c = &r->c;
    const ckrt_program *p = r->p;
    FILE *f = fopen(path, "rb");
    if (!f) return snprintf(why, why_n, "cannot open it: %s", strerror(errno)), -1;
    unsigned char h[CKPT_HEADER];
    uint32_t version = 0;
    int bad = fread(h, 1, sizeof h, f) != sizeof h || memcmp(h, CKPT_MAGIC, 8) != 0;
    if (!bad) memcpy(&version, h + 8, 4);
    if (bad) snprintf(why, why_n, "not a ckptc checkpoint");
    else if (version != CKPT_VERSION) snprintf(why, why_n, "format version %u (this program reads %d)", version, CKPT_VERSION), bad = 1;
    else if (get64(h, 16) != p->weights_layout || get64(h, 24) != (uint64_t)p->static_bytes)
        snprintf(why, why_n, "a checkpoint of another model"), bad = 1;
    else if (get64(h, 40) != r->seed)
        snprintf(why, why_n, "written with --seed %llu, this run has --seed %llu", (unsigned long long)get64(h, 40),
                 (unsigned long long)r->seed), bad = 1;
    else if (get64(h, 48) != (uint64_t)r->train.n_samples)
        snprintf(why, why_n, "written for a dataset of %llu samples, this run has %lld", (unsigned long long)get64(h, 48),
                 (long long)r->train.n_samples), bad = 1;
    uint32_t accum = 0;
    memcpy(&accum, h + 12, 4);
    if (!bad && (accum ? accum : 1) != (uint32_t)r->accum)
        snprintf(why, why_n, "written with --grad-accum %u, this run has --grad-accum %lld", accum ? accum : 1,
                 (long long)r->accum), bad = 1;
    uint64_t sum = 0;
    if (!bad) {
        int rc = ckrt_arena_load(c, 0, f, path, p->static_bytes, &sum);
        if (rc == CKRT_ERR_DATA) snprintf(why, why_n, "truncated"), bad = 1;
        else if (rc) return fclose(f), rc;
        else if (sum != get64(h, 56)) snprintf(why, why_n, "corrupted (its checksum does not match)"), bad = 1;
    }
    fclose(f);
    *step = (int64_t)get64(h, 32);
    return bad ? -1 : CKRT_OK;
}

int ckrt_run_check_ckpt_dir(run *r) {
    if (!r->ckpt_dir) return CKRT_OK;
    char a[4200], b[4200];
    /* resuming from the same directory: later files there are the damaged ones --resume skipped */
    if (r->resume && realpath(r->ckpt_dir, a) && realpath(r->resume, b) && strcmp(a, b) == 0) return CKRT_OK;
    int n = 0;
    int64_t *steps = list_ckpts(r->ckpt_dir, &n);
    int64_t newest = n ? steps[0] : -1;
    free(steps);
    if (newest <= r->first_step) return CKRT_OK;
    /* its checkpoints would be the newest: --keep would delete this run's, and --resume would take them */
    return ckrt_fail(&r->c, CKRT_ERR_USAGE,
                     "--ckpt-dir '%s' holds ckpt-%lld.bin, past this run's start (step %lld): another run's checkpoints; "
                     "continue that run with --resume '%s', or give an empty directory",
                     r->ckpt_dir, (long long)newest, (long long)r->first_step, r->ckpt_dir);
}

int ckrt_run_resume(run *r) {
    ckrt_ctx *c = &r->c;
    int n = 0;
    int64_t *steps = list_ckpts(r->resume, &n);
    char why[300] = "", path[4200];
    int rc = -1;
    for (int i = 0; i < n && rc; i++) {
        snprintf(path, sizeof path, "%s/ckpt-%lld.bin", r->resume, (long long)steps[i]);
        int64_t step = 0;
        rc = load_one(r, path, &step, why, sizeof why);
        if (rc > 0) break;
        if (rc == 0) {
            r->first_step = step;
            snprintf(r->resume_line, sizeof r->resume_line, "resumed from %.4000s: step %lld of %lld\n", path, (long long)step,
                     (long long)r->steps);
        } else {
            fprintf(stderr, "%s: warning: skipping '%s': %s\n", r->p->name, path, why);
        }
    }
    free(steps);
    if (rc > 0) return rc;
    if (rc < 0)
        return ckrt_fail(c, CKRT_ERR_DATA, "--resume: no usable checkpoint in '%s'%s%s", r->resume, n ? "; the last tried is " : "",
                         n ? why : " (no ckpt-STEP.bin files)");
    if (r->first_step > r->steps)
        return ckrt_fail(c, CKRT_ERR_USAGE, "--resume: the checkpoint is at step %lld, past this run's %lld steps",
                         (long long)r->first_step, (long long)r->steps);
    return CKRT_OK;
}
