/* SPDX-License-Identifier: MIT */
/* Placeholder registration for the nvrtc concept, filled in by its own change. */
#include "barecuda/state.h"

int
bc_nvrtc_setup(PyObject *m, bc_State *st)
{
    BC_UNUSED(m);
    BC_UNUSED(st);
    return 0;
}
