/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * memkern: a NAS-like memory-bound OpenMP kernel.
 *
 *   memkern [-k triad|cg|both] [-n MB] [-i ITERATIONS] [-t THREADS]
 *
 * triad: a[i] = b[i] + s * c[i] over three arrays of MB megabytes each (bigger than any LLC), ITERATIONS times.
 * cg:    conjugate-gradient iterations (sparse matrix-vector product, two dot products, three axpys) on a
 *        banded sparse matrix whose rows (13 non-zeros each) and vectors total about MB*3 megabytes.
 * Both initialise their data in parallel with the same static schedule as the compute loops, so every thread
 * first-touches the part it will work on: its memory lands on the node where it started, and a thread moved
 * to another node afterwards pays remote accesses, as with the NAS benchmarks' OpenMP versions.
 * THREADS defaults to OMP_NUM_THREADS (or all CPUs).
 *
 * Output: "<kernel>_seconds: S" and "<kernel>_mops: M" (millions of floating-point operations per second).
 */
#define _GNU_SOURCE
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n);

	if (!p) {
		fprintf(stderr, "memkern: cannot allocate %zu bytes\n", n);
		exit(1);
	}
	return p;
}

static void triad(long mb, int iters)
{
	long n = mb * 1024 * 1024 / (long)sizeof(double);
	double *a = xmalloc(n * sizeof(double)), *b = xmalloc(n * sizeof(double)), *c = xmalloc(n * sizeof(double));
	double s = 3.0, t0, t1, check = 0;

#pragma omp parallel for schedule(static)
	for (long i = 0; i < n; i++) {
		a[i] = 0;
		b[i] = (double)(i & 1023);
		c[i] = 1.0 / (double)((i & 255) + 1);
	}
	t0 = now_s();
	for (int it = 0; it < iters; it++) {
#pragma omp parallel for schedule(static)
		for (long i = 0; i < n; i++)
			a[i] = b[i] + s * c[i];
	}
	t1 = now_s();
	for (long i = 0; i < n; i += 4096)
		check += a[i];
	printf("triad_check: %.6g\n", check);
	printf("triad_seconds: %.4f\n", t1 - t0);
	printf("triad_mops: %.2f\n", 2.0 * (double)n * iters / (t1 - t0) / 1e6);
	printf("triad_mbytes_per_s: %.1f\n", 3.0 * sizeof(double) * (double)n * iters / (t1 - t0) / 1e6);
	free(a);
	free(b);
	free(c);
}

#define NNZ_PER_ROW 13

static void cg(long mb, int iters)
{
	/* Per row: 13 * (8 + 4) bytes of matrix plus 5 vectors of 8 bytes = 196 bytes. */
	long n = mb * 3 * 1024 * 1024 / (NNZ_PER_ROW * 12 + 5 * 8);
	double *val = xmalloc(sizeof(double) * n * NNZ_PER_ROW);
	int *col = xmalloc(sizeof(int) * n * NNZ_PER_ROW);
	double *x = xmalloc(sizeof(double) * n), *r = xmalloc(sizeof(double) * n), *p = xmalloc(sizeof(double) * n);
	double *q = xmalloc(sizeof(double) * n), *z = xmalloc(sizeof(double) * n);
	double rho = 0, t0, t1;
	/* Offsets of the non-zeros from the diagonal: a band plus a few far entries (long-range coupling). */
	static const long off[NNZ_PER_ROW] = {0, -1, 1, -2, 2, -64, 64, -1024, 1024, -32768, 32768, -262144, 262144};

#pragma omp parallel for schedule(static)
	for (long i = 0; i < n; i++) {
		for (int k = 0; k < NNZ_PER_ROW; k++) {
			long j = ((i + off[k]) % n + n) % n;

			col[i * NNZ_PER_ROW + k] = (int)j;
			val[i * NNZ_PER_ROW + k] = k == 0 ? (double)NNZ_PER_ROW + 1.0 : -1.0 / (1.0 + (double)k);
		}
		x[i] = 0;
		r[i] = 1.0;
		p[i] = 1.0;
		q[i] = 0;
		z[i] = 0;
	}
#pragma omp parallel for schedule(static) reduction(+:rho)
	for (long i = 0; i < n; i++)
		rho += r[i] * r[i];
	t0 = now_s();
	for (int it = 0; it < iters; it++) {
		double pq = 0, rho_new = 0, alpha, beta;

#pragma omp parallel for schedule(static) reduction(+:pq)
		for (long i = 0; i < n; i++) {
			double sum = 0;
			const double *v = &val[i * NNZ_PER_ROW];
			const int *c = &col[i * NNZ_PER_ROW];

			for (int k = 0; k < NNZ_PER_ROW; k++)
				sum += v[k] * p[c[k]];
			q[i] = sum;
			pq += p[i] * sum;
		}
		alpha = rho / pq;
#pragma omp parallel for schedule(static) reduction(+:rho_new)
		for (long i = 0; i < n; i++) {
			z[i] += alpha * p[i];
			r[i] -= alpha * q[i];
			rho_new += r[i] * r[i];
		}
		beta = rho_new / rho;
		rho = rho_new;
		if (rho < 1e-20) {
			/* Converged: restart from the initial residual so the numbers never turn denormal (slow). */
#pragma omp parallel for schedule(static)
			for (long i = 0; i < n; i++) {
				r[i] = 1.0;
				p[i] = 1.0;
			}
			rho = (double)n;
			continue;
		}
#pragma omp parallel for schedule(static)
		for (long i = 0; i < n; i++)
			p[i] = r[i] + beta * p[i];
	}
	t1 = now_s();
	printf("cg_rows: %ld\n", n);
	printf("cg_residual: %.6g\n", rho);
	printf("cg_seconds: %.4f\n", t1 - t0);
	/* Per iteration: 2 flops per non-zero, then 2 (dot) + 4 (two axpys) + 2 (dot) + 2 (update p) per row. */
	printf("cg_mops: %.2f\n", ((2.0 * NNZ_PER_ROW + 10.0) * (double)n * iters) / (t1 - t0) / 1e6);
	free(val);
	free(col);
	free(x);
	free(r);
	free(p);
	free(q);
	free(z);
}

int main(int argc, char **argv)
{
	const char *kernel = "both";
	long mb = 64;
	int iters = 10, threads = 0, opt;

	while ((opt = getopt(argc, argv, "k:n:i:t:")) != -1) {
		switch (opt) {
		case 'k': kernel = optarg; break;
		case 'n': mb = atol(optarg); break;
		case 'i': iters = atoi(optarg); break;
		case 't': threads = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: memkern [-k triad|cg|both] [-n MB] [-i ITERATIONS] [-t THREADS]\n");
			return 2;
		}
	}
	if (mb < 1 || iters < 1 || threads < 0 ||
	    (strcmp(kernel, "triad") && strcmp(kernel, "cg") && strcmp(kernel, "both"))) {
		fprintf(stderr, "memkern: bad arguments\n");
		return 2;
	}
	if (threads)
		omp_set_num_threads(threads);
	printf("memkern: kernel=%s mb=%ld iterations=%d threads=%d\n", kernel, mb, iters, omp_get_max_threads());
	fflush(stdout);
	if (!strcmp(kernel, "triad") || !strcmp(kernel, "both"))
		triad(mb, iters);
	if (!strcmp(kernel, "cg") || !strcmp(kernel, "both"))
		cg(mb, iters);
	return 0;
}
