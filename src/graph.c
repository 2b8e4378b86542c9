/* SPDX-License-Identifier: MIT */
/* Placeholder registration for the graph concept, filled in by its own change. */
#include "barecuda/state.h"

int
bc_graph_setup(PyObject *m, bc_State *st)
{
    BC_UNUSED(m);
    BC_UNUSED(st);
    return 0;
}
