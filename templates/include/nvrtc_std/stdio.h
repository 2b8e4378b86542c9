// SPDX-License-Identifier: MIT
// barecuda: stand-in for <stdio.h> under NVRTC, which declares the device printf
// itself and has no C library headers; last on the include path.
#pragma once
