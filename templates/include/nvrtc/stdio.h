/* SPDX-License-Identifier: MIT */
/* <stdio.h> for NVRTC.  printf is a device built-in; vprintf, the device's
 * formatted-output system call that printf is built on, is declared here as
 * nvcc's headers declare it (its second argument is a packed buffer of the
 * arguments, not a va_list).  Files do not exist on the device: FILE is left
 * incomplete, and the constants are given for code that names them. */
#ifndef BARECUDA_STDIO_H
#define BARECUDA_STDIO_H

#include <stddef.h>

#ifndef EOF
#define EOF (-1)
#endif
#ifndef BUFSIZ
#define BUFSIZ 8192
#endif
#ifndef FILENAME_MAX
#define FILENAME_MAX 4096
#endif
#ifndef SEEK_SET
#define SEEK_SET 0
#define SEEK_CUR 1
#define SEEK_END 2
#endif

typedef struct barecuda_FILE FILE;

extern "C" __device__ int vprintf(const char *format, const char *args);

#endif
