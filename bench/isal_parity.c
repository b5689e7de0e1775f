/* ISA-L parity throughput, for bench/parity.sh: xor_gen and pq_gen over D data buffers of each
 * size, page-aligned (as raidctl's buffers), single thread, GB/s of data processed (the same
 * unit as `raidctl bench --parity` and `snapraid -T`). Build: cc -O2 isal_parity.c -lisal */
#include <isa-l/raid.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static double rate(int (*f)(int, int, void **), int vects, int len, void **bufs) {
    f(vects, len, bufs); /* warm up */
    double start = now(), t;
    long n = 0;
    do {
        for (int k = 0; k < 8; k++)
            f(vects, len, bufs);
        n += 8;
        t = now() - start;
    } while (t < 0.2);
    return n * (double)(vects - (f == pq_gen ? 2 : 1)) * len / t / 1e9;
}

int main(int argc, char **argv) {
    int d = argc > 1 ? atoi(argv[1]) : 8;
    int sizes[] = {4096, 65536, 262144};
    printf("{\"data_chunks\": %d, \"results\": [", d);
    for (int s = 0; s < 3; s++) {
        int len = sizes[s];
        void *bufs[d + 2];
        for (int i = 0; i < d + 2; i++) {
            if (posix_memalign(&bufs[i], 4096, len))
                return 1;
            for (int j = 0; j < len; j++)
                ((uint8_t *)bufs[i])[j] = (uint8_t)(rand() >> 7);
        }
        double x = rate(xor_gen, d + 1, len, bufs);
        double pq = rate(pq_gen, d + 2, len, bufs);
        printf("%s{\"chunk_bytes\": %d, \"xor_gbps\": %.3f, \"pq_gen_gbps\": %.3f}", s ? ", " : "", len, x, pq);
        for (int i = 0; i < d + 2; i++)
            free(bufs[i]);
    }
    printf("]}\n");
    return 0;
}
