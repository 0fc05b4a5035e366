/* compute.c -- placeholder: the CPU kernels land with the ops work. */
#include "loom-cpu.h"

enum loom_status loom_cpu_graph_compute(struct loom_cgraph * graph, int n_threads) {
    (void)n_threads;
    for (int i = 0; i < graph->n_nodes; i++) {
        if (!loom_op_is_view(graph->nodes[i]->op)) return LOOM_ERR_UNSUPPORTED;
    }
    return LOOM_OK;
}

bool loom_cpu_supports_op(const struct loom_tensor * op) { return loom_op_is_view(op->op) || op->op == LOOM_OP_NONE; }
void loom_cpu_set_scalar(bool scalar) { (void)scalar; }
bool loom_cpu_get_scalar(void) { return true; }
const char * loom_cpu_features(void) { return "scalar"; }
