/* The CUDA kernels, compiled with NVRTC after the text of kernels.h. Every kernel loops over its
 * work with a grid stride, so any grid covers it (a captured graph keeps one grid). Each comes
 * twice: `ms_x(ms_args)` takes its arguments by value, for plain launches; `ms_x_p(ms_args *)`
 * reads them from device memory, where a captured graph copies them first. */

#define MS_EACH(g, n) \
    for (ms_u32 g = blockIdx.x * blockDim.x + threadIdx.x; g < (n); g += gridDim.x * blockDim.x)

static __device__ void ms_sync_body(const ms_args *a) {
    ms_u32 n = ms_sync_total(a);
    MS_EACH(g, n) ms_sync_item(a, g);
}

static __device__ void ms_table_init_body(const ms_args *a) {
    MS_EACH(e, 1u << a->prq.table_bits) ms_table_init_item(&a->prq, e);
}

/* Chunks in order; each block waits for the chunk before it to publish its counts (that block
 * took its chunk earlier, so it is running), then publishes its own. */
static __device__ void ms_rank_body(const ms_args *a) {
    __shared__ ms_rank_shared s;
    ms_u32 t = threadIdx.x, chunks = ms_chunks(a);
    for (;;) {
        if (t == 0) s.chunk = atomicAdd(&a->b.ctl->chunk, 1u);
        __syncthreads();
        if (s.chunk >= chunks) return;
        ms_rank_load(a, &s, t);
        __syncthreads();
        if (a->b.mode != MS_UNORDERED) {
            ms_rank_local(&s, t);
            if (t == 0 && s.chunk > 0) {
                volatile ms_u32 *before = &a->b.flags[s.chunk - 1];
                while (*before != a->b.epoch) {
                }
            }
            __syncthreads();
            ms_rank_publish(a, &s, t);
            __threadfence();
            __syncthreads();
            if (t == 0) atomicExch(&a->b.flags[s.chunk], a->b.epoch);
            ms_rank_finish(a, &s, t);
        }
        __syncthreads();
    }
}

static __device__ void ms_wscan_body(const ms_args *a) {
    ms_u32 n = ms_wscan_items(a);
    MS_EACH(g, n) ms_wscan_item(a, g);
}

static __device__ void ms_round_claim_body(const ms_args *a) {
    MS_EACH(i, a->b.count) ms_round_claim(a, i);
}

static __device__ void ms_round_break_body(const ms_args *a) {
    MS_EACH(i, a->b.count) ms_round_break(a, i);
}

static __device__ void ms_round_commit_body(const ms_args *a) {
    MS_EACH(i, a->b.count) ms_round_commit(a, i);
}

/* The last block to finish publishes the earliest fit. */
static __device__ void ms_scan1_body(const ms_args *a) {
    MS_EACH(word, a->umq.words) ms_scan1_word(a, word);
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        if (atomicAdd(&a->b.ctl->done, 1u) == gridDim.x - 1) {
            __threadfence();
            ms_scan1_publish(a);
        }
    }
}

#define MS_KERNEL(name, bounds)                                                              \
    extern "C" __global__ void __launch_bounds__(bounds) name(ms_args a) { name##_body(&a); } \
    extern "C" __global__ void __launch_bounds__(bounds) name##_p(const ms_args *a) {         \
        name##_body(a);                                                                      \
    }

MS_KERNEL(ms_sync, 256)
MS_KERNEL(ms_table_init, 256)
MS_KERNEL(ms_rank, 1024)
MS_KERNEL(ms_wscan, 256)
MS_KERNEL(ms_round_claim, 256)
MS_KERNEL(ms_round_break, 256)
MS_KERNEL(ms_round_commit, 256)
MS_KERNEL(ms_scan1, 256)
