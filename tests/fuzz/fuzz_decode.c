/* fuzz_decode.c - libFuzzer target: arbitrary argument and parameter bytes through
 * the decoder for every node and escape, and the result into an object tree. The
 * first bytes choose node, escape, size, return value and how the bytes split. */
#include <stdint.h>
#include <string.h>

#include "core/objtree.h"
#include "core/rm_decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct objtree *tree;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 6)
        return 0;
    if (!tree)
        tree = objtree_new();
    struct rm_call call = {0};
    call.node = (enum rm_node)(data[0] % 4);
    uint32_t nr = data[1];
    uint32_t arg_size = (uint32_t)(data[2] | (data[3] & 0x3f) << 8);
    call.request = call.node == RM_NODE_UVM ? (uint32_t)(data[1] | data[2] << 8)
                                            : RM_IOWR(nr, arg_size);
    call.ret = (data[4] & 1) ? -1 : 0;
    size_t split = data[5] % (size - 5);
    call.arg = data + 6;
    call.arg_len = split;
    call.params = data + 6 + split;
    call.params_len = size - 6 - split;
    struct rm_op op;
    rm_decode(&call, &op);
    struct objtree_effect e;
    objtree_apply(tree, 1 + data[4] % 3, data[5] % 3, &op, &e);
    if (data[4] & 2)
        objtree_close_file(tree, 1 + data[5] % 3, &e);
    if (data[4] & 4) {
        objtree_mmap(tree, data[5] % 3, 0x1000ull * data[1], 0x10000);
        objtree_munmap(tree, 0x1000ull * data[2], 0x20000);
    }
    if ((data[4] & 0xf0) == 0xf0) { /* now and then start afresh */
        objtree_free(tree);
        tree = NULL;
    }
    return 0;
}
