// SPDX-License-Identifier: MIT
/*
 * t_grow: one file grown a cluster at a time the ways programs grow
 * files, while threads write records into what has been grown.
 *
 *   t_grow [-m HOW] [-t THREADS] [-k CLUSTERS] [-c CLUSTER] [-p] FILE
 *   t_grow -v [-k CLUSTERS] [-c CLUSTER] FILE     (check, read buffered)
 *
 * HOW, how the grower thread grows the file by one cluster past its end:
 *   zero   fallocate(FALLOC_FL_ZERO_RANGE) (qcow2's new clusters)
 *   falloc fallocate(0) (InnoDB's extensions: posix_fallocate)
 *   keep   fallocate(FALLOC_FL_KEEP_SIZE): the writes extend the size
 *          (RocksDB and Redpanda preallocate so)
 *   trunc  ftruncate (Seastar's "sloppy" size ahead of its writes)
 *   none   nothing: the writes extend the file (plain counter writes)
 * The grower writes the cluster's first record right after growing it (a
 * guest's write into the cluster qcow2 allocated); THREADS writers (4 by
 * default) take the other 4 KiB records of the clusters grown so far in
 * order, each with pwrite on its own O_DIRECT descriptor.  -p: the file
 * is allocated to its final size first (fallocate, before the clock
 * starts): every write an overwrite, the ceiling.  Every record
 * says where it belongs; -v checks that each one is in place and the
 * size is CLUSTERS * CLUSTER.  Prints the time the run took.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define REC 4096u

static const char *path, *how = "zero";
static unsigned nthreads = 4;
static uint64_t clusters = 256, csize = 64 << 10;
static _Atomic uint64_t grown; /* clusters grown so far */
static _Atomic uint64_t next_slot; /* next record a writer takes */
static _Atomic int failed;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t more = PTHREAD_COND_INITIALIZER;

static void record(unsigned char *p, uint64_t k, uint64_t j)
{
	unsigned i;

	for (i = 0; i < REC; i++)
		p[i] = (unsigned char)(k * 131 + j * 7 + i);
	memcpy(p, "TGROWREC", 8);
	memcpy(p + 8, &k, 8);
	memcpy(p + 16, &j, 8);
}

static int open_file(void)
{
	int fd = open(path, O_RDWR | O_DIRECT);

	if (fd < 0) {
		perror(path);
		exit(2);
	}
	return fd;
}

static void put(int fd, unsigned char *buf, uint64_t k, uint64_t j)
{
	record(buf, k, j);
	if (pwrite(fd, buf, REC, (off_t)(k * csize + j * REC)) != REC) {
		fprintf(stderr, "pwrite cluster %llu record %llu: %s\n",
			(unsigned long long)k, (unsigned long long)j,
			strerror(errno));
		atomic_store(&failed, 1);
	}
}

static int grow(int fd, uint64_t k)
{
	off_t off = (off_t)(k * csize), len = (off_t)csize;

	switch (how[0]) {
	case 'z':
		return fallocate(fd, FALLOC_FL_ZERO_RANGE, off, len);
	case 'f':
		return fallocate(fd, 0, off, len);
	case 'k':
		return fallocate(fd, FALLOC_FL_KEEP_SIZE, off, len);
	case 't':
		return ftruncate(fd, off + len);
	}
	return 0;
}

static void *grower(void *arg)
{
	unsigned char *buf;
	int fd = open_file();
	uint64_t k;

	(void)arg;
	if (posix_memalign((void **)&buf, REC, REC))
		exit(2);
	for (k = 0; k < clusters && !atomic_load(&failed); k++) {
		if (grow(fd, k)) {
			fprintf(stderr, "grow cluster %llu (%s): %s\n",
				(unsigned long long)k, how, strerror(errno));
			atomic_store(&failed, 1);
		}
		put(fd, buf, k, 0);
		pthread_mutex_lock(&lock);
		atomic_store(&grown, k + 1);
		pthread_cond_broadcast(&more);
		pthread_mutex_unlock(&lock);
	}
	pthread_mutex_lock(&lock);
	atomic_store(&grown, clusters);
	pthread_cond_broadcast(&more);
	pthread_mutex_unlock(&lock);
	close(fd);
	free(buf);
	return NULL;
}

static void *writer(void *arg)
{
	uint64_t per = csize / REC - 1, s, k;
	unsigned char *buf;
	int fd = open_file();

	(void)arg;
	if (posix_memalign((void **)&buf, REC, REC))
		exit(2);
	while ((s = atomic_fetch_add(&next_slot, 1)) < clusters * per &&
	       !atomic_load(&failed)) {
		k = s / per;
		if (atomic_load(&grown) <= k) {
			pthread_mutex_lock(&lock);
			while (atomic_load(&grown) <= k)
				pthread_cond_wait(&more, &lock);
			pthread_mutex_unlock(&lock);
		}
		put(fd, buf, k, 1 + s % per);
	}
	close(fd);
	free(buf);
	return NULL;
}

static int check(void)
{
	unsigned char *want = malloc(REC), *got = malloc(REC);
	uint64_t k, j, bad = 0;
	struct stat st;
	int fd = open(path, O_RDONLY);

	if (fd < 0 || !want || !got || fstat(fd, &st))
		return 2;
	if ((uint64_t)st.st_size != clusters * csize) {
		printf("size %lld, expected %llu\n", (long long)st.st_size,
		       (unsigned long long)(clusters * csize));
		bad++;
	}
	for (k = 0; k < clusters; k++)
		for (j = 0; j < csize / REC; j++) {
			record(want, k, j);
			if (pread(fd, got, REC, (off_t)(k * csize + j * REC)) !=
				    REC ||
			    memcmp(want, got, REC)) {
				if (bad++ < 5)
					printf("cluster %llu record %llu: not "
					       "in place\n",
					       (unsigned long long)k,
					       (unsigned long long)j);
			}
		}
	printf("%s: %llu records, %llu bad\n", bad ? "BAD" : "OK",
	       (unsigned long long)(clusters * (csize / REC)),
	       (unsigned long long)bad);
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	pthread_t g, *w;
	struct timespec t0, t1;
	bool verify = false, prealloc = false;
	unsigned i;
	int c, fd;

	while ((c = getopt(argc, argv, "m:t:k:c:vp")) != -1) {
		switch (c) {
		case 'm': how = optarg; break;
		case 't': nthreads = (unsigned)atoi(optarg); break;
		case 'k': clusters = strtoull(optarg, NULL, 0); break;
		case 'c': csize = strtoull(optarg, NULL, 0) << 10; break;
		case 'v': verify = true; break;
		case 'p': prealloc = true; break;
		default: return 2;
		}
	}
	if (optind + 1 != argc || csize < 2 * REC || csize % REC ||
	    !strchr("zfktn", how[0]))
		return 2;
	path = argv[optind];
	if (verify)
		return check();
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0644);
	if (fd < 0) {
		perror(path);
		return 2;
	}
	if (prealloc && fallocate(fd, 0, 0, (off_t)(clusters * csize))) {
		perror("fallocate");
		return 2;
	}
	w = calloc(nthreads, sizeof(*w));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pthread_create(&g, NULL, grower, NULL);
	for (i = 0; i < nthreads; i++)
		pthread_create(&w[i], NULL, writer, NULL);
	pthread_join(g, NULL);
	for (i = 0; i < nthreads; i++)
		pthread_join(w[i], NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	close(fd);
	printf("%s: %llu clusters of %llu KiB, %u writers: %.3f s\n", how,
	       (unsigned long long)clusters, (unsigned long long)(csize >> 10),
	       nthreads,
	       (double)(t1.tv_sec - t0.tv_sec) +
		       (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	return atomic_load(&failed) ? 1 : 0;
}
