/* main.h — private to ckrt_main's sources (libckrt): the state of one run and what its parts
 * call of each other.
 *
 *   main.c         the run: device, memory, the steps, the high-water mark, then the files
 *   main_flags.c   the command line (usage, flags, sizes)
 *   main_files.c   weights in and out, inputs, .npy dumps, the --dump-grads buffers
 *   main_report.c  the summary table and the report JSON
 *   main_export.c  --export-onnx, --export-safetensors: the trained state out to ONNX / safetensors
 */
#ifndef CKRT_MAIN_H
#define CKRT_MAIN_H

#include "ckrt.h"
#include "ckrt_dp.h"
#include "ckrt_util.h"

#include <stdbool.h>

/* One dataset (main_data.c): files feeding some of the inputs, n_samples samples each. */
typedef struct ckrt_source {
    int input;                     /* the program input it feeds */
    const char *path;
    ckrt_npy_mapping map;          /* a .npy, or map.a.data the token file's mapping */
    int shift;                     /* --tokens: 0 the token input, 1 the labels; -1 a .npy */
} ckrt_source;
typedef struct ckrt_dataset {
    const char *flag;              /* "--data" or "--eval-data" (messages) */
    ckrt_source src[64];
    int n;
    const char *tokens;            /* --tokens / --eval-tokens FILE: raw token ids */
    void *tok_base;                /* its mapping */
    size_t tok_bytes;
    int64_t n_samples;
} ckrt_dataset;

typedef struct run {
    const ckrt_program *p;
    ckrt_ctx c;
    const char *input_file[64];
    const char *dump_dir, *report, *weights, *grads_dir, *params_dir, *save_weights, *timeline, *profile;
    uint64_t seed;
    int64_t steps;
    int allow_nonfinite;
    int64_t mem_limit;             /* --mem-limit in bytes; 0: none */
    const char *device;            /* --device: "cpu", "cuda" or NULL (cuda when usable) */
    int tf32;
    int64_t threads;               /* --threads N; 0: not given (ckrt_threads_default) */
    const char *threads_from;      /* where the thread count came from: "--threads", an environment variable, "affinity" */
    char device_line[600];         /* "device: ...", the first line printed once the run starts */
    double *losses;
    double *step_seconds;
    double *lrs;                   /* the learning rate each step used */
    int schedule;                  /* --lr-schedule: LR_CONSTANT, LR_LINEAR, LR_COSINE */
    int64_t warmup;                /* --warmup N steps */
    double min_lr;                 /* --min-lr: where linear and cosine end */
    int min_lr_given;
    int64_t measured;
    int from_file[64];
    ckrt_dp *dp;                   /* data-parallel programs (ckptc --data-parallel); NULL otherwise */
    unsigned char *grad_block;     /* --dump-grads: the host copies of the last step's gradients */
    /* --data/--tokens and --eval-data/--eval-tokens (main_data.c); B (the inputs' batch axis) a step */
    ckrt_dataset train, eval;
    int token_bytes;               /* --token-dtype uint16 (2) or int32 (4) */
    int shuffle, steps_given;
    int64_t epochs;                /* --epochs; 0: not given (one epoch) */
    int64_t batch, batches_per_epoch, epoch, first_step;
    int64_t *order;                /* this epoch's sample order */
    /* checkpoints (main_ckpt.c) */
    int64_t save_every, keep;      /* --save-every N (0: never), --keep K newest (default 3) */
    const char *ckpt_dir, *resume; /* --ckpt-dir, --resume */
    char resume_line[4200];
    const char *metrics;           /* --metrics FILE.jsonl */
    FILE *metrics_f;        /* "resumed from ...", printed after the device line */
    unsigned char *gather;         /* one input's batch, gathered when its rows are not contiguous */
    /* export (main_export.c): --export-onnx FILE, --export-safetensors FILE, --source-model PATH */
    const char *export_onnx, *export_st, *source_model;
    /* --grad-accum K (ckptc --grad-accum; 1 once parsed without it), --clip-grad-norm X (a program whose updates are all
     * after the backward), the global gradient norm each step (NaN: not taken) */
    int64_t accum;
    double clip;
    double *grad_norms;
    double *grad_sq;               /* per state entry: the sum of squares ckrt_grad_ready took */
    /* --eval-every N, --eval-batches M: eval losses after those steps (main_data.c) */
    int64_t eval_every, eval_batches, n_evals;
    int64_t *eval_steps;
    double *eval_losses;
} run;

static inline bool training(const run *r) { return r->p->forward != NULL; }

/* main_flags.c */
int ckrt_run_parse_args(run *r, int argc, char **argv);

/* main_files.c */
int ckrt_run_load_weights(run *r);
int ckrt_run_save_weights(run *r);
int ckrt_run_load_inputs(run *r);
int ckrt_run_ensure_dir(ckrt_ctx *c, const char *dir);
int ckrt_run_write_arena_npy(ckrt_ctx *c, const char *path, ckrt_dtype dt, int rank, const int64_t *dims, int64_t offset);
int ckrt_run_write_npys(run *r, const char *dir, bool grads);
int ckrt_run_alloc_grad_dump(run *r);
/* The gradient an update reads (ck_k_grad_eff of g and acc, n floats at arena pointers; acc may be
 * NULL): its sum of squares in *sq, each value also into dump unless NULL; on a device the bytes
 * are fetched to the host first. */
int ckrt_run_grad_pass(ckrt_ctx *c, const float *g, const float *acc, int64_t n, float *dump, double *sq);
void ckrt_run_free_grad_dump(run *r);

/* main_data.c: the datasets mapped and checked (steps set from --epochs), a step's batch written
 * to the inputs, the mappings released */
int ckrt_run_open_data(run *r);
int ckrt_run_feed(run *r, int64_t batch); /* the training batch of that index (step x K + micro-batch) */
/* --eval-data/--eval-tokens: the mean loss of the forward in eval mode over the eval batches,
 * recorded as the eval after `step` (the training inputs are restored afterwards) */
int ckrt_run_eval(run *r, int64_t step);
int ckrt_run_data_context(run *r, int64_t step, int rc); /* adds the batch's rows to a failure's message */
void ckrt_run_close_data(run *r);

/* main_flags.c: the LR schedule's factor for step s (0-based) of r->steps: lr_s = p->lr x it */
enum { LR_CONSTANT, LR_LINEAR, LR_COSINE };
float ckrt_run_lr_scale(const run *r, int64_t s);

/* main_ckpt.c: the checkpoint after `step` steps; --resume (sets first_step); SIGINT/SIGTERM
 * noted (ckrt_run_stop_signal: the signal, 0 if none); the tests' CKRT_DEBUG_KILL */
int ckrt_run_save_ckpt(run *r, int64_t step);
int ckrt_run_resume(run *r);
int ckrt_run_check_ckpt_dir(run *r); /* refuses a --ckpt-dir holding a later run's checkpoints */
void ckrt_run_catch_signals(void);
int ckrt_run_stop_signal(void);
void ckrt_run_debug_kill(const char *what, int64_t step);

/* main_export.c: the flags checked before training (the source model unchanged, FILE's directory
 * writable); the trained state written to FILE after it */
int ckrt_run_check_export(run *r);
int ckrt_run_export(run *r);

/* main_report.c */
int ckrt_run_metrics_line(run *r, int64_t s, double eval_s); /* --metrics: step s's line (and its eval's, eval_s >= 0 seconds) */
void ckrt_run_print_summary(const run *r);
int ckrt_run_write_report(run *r);
const char *ckrt_run_bytes_str(char *buf, size_t n, int64_t b); /* "N bytes (X.Y MiB)" */
double ckrt_run_now(void);                                      /* seconds, monotonic */

#endif
