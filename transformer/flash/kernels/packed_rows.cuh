// Packed rows (transformer/packing.py) in the kernels: several documents back to back in one
// row of n positions, each reading only itself.
//
//   DOC       (b, n) int32: the document of each position, numbered 0, 1, …; -1 marks padding.
//             Query i sees key j only if DOC[j] = DOC[i] >= 0 (and, when causal, j <= i): the
//             block-diagonal mask of transformer.document_mask.
//   DOC_KEYS  (b, Tr, 2) int32: for each query tile, the keys [first, end) that its documents
//             span (computed on the host, flash_cuda.packed_row_args). Key tiles outside it hold
//             no key the tile may see and are skipped, as causal tiles above the diagonal are.
//
// Both null: one sequence a row, every key a candidate.
//
// A key tile needs the document mask only where it holds a key some row of the block may not
// see: when the block's rows all belong to one document and the tile's keys too, it needs none
// (block_document, tile_in_document). For documents longer than a block that is most tiles.
#pragma once

// The keys [first, end) that query tile `tile` of batch row b may see.
__device__ __forceinline__ void doc_key_span(const int* doc_keys, int b, int tile, int n_tiles, int n_k,
                                             int& first, int& end) {
    if (doc_keys == nullptr) {
        first = 0;
        end = n_k;
        return;
    }
    const int* span = doc_keys + ((size_t)b * n_tiles + tile) * 2;
    first = span[0];
    end = span[1];
}

// The document of query row i (doc: this batch row's n entries, or null): -1, which sees no
// key, for padding and for a row past n; 0 without documents.
__device__ __forceinline__ int doc_of_row(const int* doc, int i, int n) {
    if (doc == nullptr) return 0;
    return i < n ? doc[i] : -1;
}

// Whether key j (< n) belongs to document my_doc: always, without documents.
__device__ __forceinline__ bool in_document(const int* doc, int j, int my_doc) {
    return doc == nullptr || (my_doc >= 0 && doc[j] == my_doc);
}

// The document every query row row0 … row0 + rows - 1 belongs to, or -1 where they are not all
// of one (or doc is null, or a row lies past n). Each lane reads every 32nd row; every lane of
// the warp gets the same answer.
__device__ __forceinline__ int block_document(const int* doc, int row0, int rows, int n, int lane) {
    if (doc == nullptr) return -1;
    const int d = doc_of_row(doc, row0, n);
    bool same = d >= 0;
    for (int i = lane; i < rows; i += 32) same = same && doc_of_row(doc, row0 + i, n) == d;
    return __all_sync(0xffffffffu, same) ? d : -1;
}

// Whether keys j0 … j0 + bc - 1 all lie inside n and in document d (d ≥ 0); the same answer on
// every lane of the warp.
__device__ __forceinline__ bool tile_in_document(const int* doc, int j0, int bc, int n, int d, int lane) {
    bool in = d >= 0;
    for (int j = j0 + lane; j < j0 + bc; j += 32) in = in && j < n && doc[j] == d;
    return __all_sync(0xffffffffu, in);
}
