/* ckrt_dp.h — what ckrt_main (main.c) calls around its steps when the program is data-parallel
 * (ckptc --data-parallel). Private to libckrt: generated programs only see ckrt.h.
 *
 * The rules every call here keeps: ranks stay in lockstep (every rank makes the same collective
 * calls in the same order), so a failure must either be agreed (ckrt_dp_agree: every rank learns
 * it at the same point and stops cleanly with the failing rank's message) or end the job
 * (ckrt_dp_finish calls the transport's abort when a failure was not agreed): never a hang.
 */
#ifndef CKRT_DP_H
#define CKRT_DP_H

#include "ckrt.h"

#include <stdio.h>

typedef struct ckrt_dp ckrt_dp;

/* Starts the communicator (MPI_Init), takes the data-parallel flags out of argv (see
 * ckrt_dp_usage), sets c->dp, and silences stdout on ranks other than 0. On failure *out may
 * still be set (ckrt_dp_finish reports and cleans up). */
int ckrt_dp_init(ckrt_dp **out, const ckrt_program *p, ckrt_ctx *c, int *argc, char ***argv);
/* The trainer's --help lines for those flags. */
extern const char *ckrt_dp_usage;
/* This rank writes files (reports, dumps, weights): rank 0, or any rank of a one-process run. */
bool ckrt_dp_writes(const ckrt_dp *dp);

/* Every rank passes its status; returns CKRT_OK when all are OK, else the first failing rank's
 * code with its message in c->msg ("rank R of N: ..."). */
int ckrt_dp_agree(ckrt_dp *dp, ckrt_ctx *c, int rc);
/* Has a failure been agreed (so every rank already knows)? */
bool ckrt_dp_agreed(const ckrt_dp *dp);

/* --input paths: "{rank}" replaced by this rank's number (the string lives as long as dp). */
const char *ckrt_dp_input_path(ckrt_dp *dp, const char *path);
/* After reading input `io` (index i) from `path`: an array with N times the per-rank leading
 * dimension is cut to this rank's rows; a per-rank ({rank}) or same-shape file is kept. Any
 * other shape fails with a message saying what the data-parallel program accepts. */
int ckrt_dp_shard(ckrt_dp *dp, ckrt_ctx *c, const ckrt_io *io, int i, const char *path, ckrt_array *a);
/* This rank's index among the ranks on its machine (the launcher's environment: Open MPI,
 * MPICH, Slurm), 0 when none says: it picks the rank's GPU. */
int ckrt_dp_local_rank(void);
int ckrt_dp_rank(const ckrt_dp *dp);
int ckrt_dp_size(const ckrt_dp *dp); /* ranks in the job */
/* Seed for inputs filled at random: the seed itself on rank 0, a distinct stream per other rank.
 * (Dropout keeps the seed on every rank and starts each rank at its own counters.) */
uint64_t ckrt_dp_seed(const ckrt_dp *dp, uint64_t seed);

/* After the backward (the gradients are already averaged): agrees on rc and replaces *loss by the
 * mean of the ranks' losses, summed in rank order. */
int ckrt_dp_after_backward(ckrt_dp *dp, ckrt_ctx *c, int rc, double *loss);
/* Agrees on rc and replaces *v by the mean of the ranks' values, summed in rank order (the eval loss). */
int ckrt_dp_mean(ckrt_dp *dp, ckrt_ctx *c, int rc, double *v);
/* After the update: buffers (BatchNorm running statistics) broadcast from rank 0, as PyTorch DDP
 * does; every --check-replicas K steps (and after the last) the parameters and optimizer state
 * checksummed on every rank and compared. */
int ckrt_dp_after_update(ckrt_dp *dp, ckrt_ctx *c, const ckrt_program *p, int64_t step, int64_t steps);
/* Parameters and optimizer state identical on every rank (checked once after loading too). */
int ckrt_dp_check_replicas(ckrt_dp *dp, ckrt_ctx *c, const ckrt_program *p, const char *when);

/* Report members ("data_parallel": {...},) and the lines of the end-of-run table. */
void ckrt_dp_report_json(const ckrt_dp *dp, FILE *f);
void ckrt_dp_print_summary(const ckrt_dp *dp);

/* Ends the run: prints the error where this rank should, aborts every rank when the failure was
 * not agreed, finalizes the communicator, frees dp. Returns the process exit status. */
int ckrt_dp_finish(ckrt_dp *dp, ckrt_ctx *c, int rc, const char *name);

#endif
