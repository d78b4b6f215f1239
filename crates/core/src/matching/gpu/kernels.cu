/* The CUDA kernels: one thread per body call. The engine compiles this with NVRTC after the
 * text of kernels.h. */

extern "C" __global__ void ms_scan(ms_u32 word_begin, ms_u32 word_end, const ms_u64 *keys,
                                   const ms_u32 *live, const ms_u64 *items, ms_u32 count,
                                   int queued_patterns, ms_u32 *first) {
    ms_u32 word = word_begin + blockIdx.x * blockDim.x + threadIdx.x;
    if (word < word_end) ms_scan_word(word, keys, live, items, count, queued_patterns, first);
}

extern "C" __global__ void ms_lookup(ms_u32 count, const ms_u64 *items, const ms_entry *table,
                                     ms_u32 bits, const ms_u32 *next, ms_u32 *claims, int claim,
                                     ms_u32 *entry, ms_u32 *slot) {
    ms_u32 item = blockIdx.x * blockDim.x + threadIdx.x;
    if (item < count) ms_lookup_item(item, items, table, bits, next, claims, claim, entry, slot);
}
