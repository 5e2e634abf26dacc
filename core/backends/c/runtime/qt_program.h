/* qt_program.h: what every generated network program (core/backends/program.py) shares before
 * its layers: the standard headers, the per-image layer dump of -DQT_DUMP_LAYERS builds, and
 * run_network's declaration. The program defines first:
 *   QT_INPUT_BYTES     one image, int8 HWC
 *   QT_NUM_END_POINTS  the end points, in the IR's order
 *   QT_OUTPUT_BYTES    their bytes together
 *   QT_DUMP_BYTES      every layer's output of one image (host layout, IR order)
 * and after its layers `qt_end_point_bytes[QT_NUM_END_POINTS]` and run_network's body, then
 * includes qt_main.h.
 */
#ifndef QT_PROGRAM_H
#define QT_PROGRAM_H

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 199309L /* clock_gettime; the program includes this header first */
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef QT_DUMP_LAYERS
static int8_t qt_dump_layers[QT_DUMP_BYTES]; /* one image: every layer's output, host layout, IR order */
#define QT_DUMP(offset, data, bytes) memcpy(qt_dump_layers + (offset), (data), (bytes))
#else
#define QT_DUMP(offset, data, bytes) ((void)0)
#endif

/* One image: `input` the network input as int8 HWC (QT_INPUT_BYTES bytes, already quantized at
 * the IR's input log2scale); end_points[k] a caller-owned buffer of qt_end_point_bytes[k]
 * bytes that the k-th end-point layer writes. */
void run_network(const int8_t *input, int8_t **end_points);

#endif /* QT_PROGRAM_H */
