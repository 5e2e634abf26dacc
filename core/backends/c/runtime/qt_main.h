/* qt_main.h: the driver of every generated network program, included last (after run_network
 * and qt_end_point_bytes): `network INPUT OUTPUT [DUMP]`.
 *
 * INPUT holds N images back to back, raw int8 HWC (N = file size / QT_INPUT_BYTES; any other
 * size is an error). OUTPUT gets, per image, the end points in order, raw int8
 * (N * QT_OUTPUT_BYTES bytes). It prints one line, `images N seconds T int8_simd S`, T the time
 * spent in run_network (CLOCK_MONOTONIC), S the conv microkernels the build took (qt_gemm.h's
 * QT_INT8_SIMD: 2 AVX-512 VNNI, 1 AVX2, 0 portable C). Built with -DQT_DUMP_LAYERS it also writes DUMP: per image,
 * every layer's output in layer order, so a mismatch can be traced to the first layer that
 * differs. Exit status: 0, 1 for an I/O error, 2 for a usage error.
 */
#ifndef QT_MAIN_H
#define QT_MAIN_H

static double qt_seconds(void)
{
#if defined(CLOCK_MONOTONIC)
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
#else
    return (double)clock() / CLOCKS_PER_SEC;
#endif
}

/* the whole of `path`, and its size; NULL (having said why) if it cannot be read */
static int8_t *qt_read_images(const char *path, long *size)
{
    FILE *in = fopen(path, "rb");
    int8_t *images;
    if (!in || fseek(in, 0, SEEK_END) != 0 || (*size = ftell(in)) < 0 || fseek(in, 0, SEEK_SET) != 0) {
        fprintf(stderr, "%s: cannot read\n", path);
        return NULL;
    }
    if (*size % QT_INPUT_BYTES != 0) {
        fprintf(stderr, "%s: %ld bytes, not a whole number of %d-byte images\n", path, *size, QT_INPUT_BYTES);
        return NULL;
    }
    images = malloc(*size > 0 ? (size_t)*size : 1);
    if (!images || fread(images, 1, (size_t)*size, in) != (size_t)*size) {
        fprintf(stderr, "%s: cannot read %ld bytes\n", path, *size);
        return NULL;
    }
    fclose(in);
    return images;
}

int main(int argc, char **argv)
{
    static int8_t outputs[QT_OUTPUT_BYTES];
    int8_t *end_points[QT_NUM_END_POINTS];
    FILE *out, *dump = NULL;
    int8_t *images;
    long size, count, image, offset = 0;
    int k;
    double seconds = 0.0;
    if (argc < 3) {
        fprintf(stderr, "usage: %s INPUT OUTPUT [DUMP]\n", argv[0]);
        return 2;
    }
    for (k = 0; k < QT_NUM_END_POINTS; k++) {
        end_points[k] = outputs + offset;
        offset += qt_end_point_bytes[k];
    }
    if (!(images = qt_read_images(argv[1], &size)))
        return 1;
    count = size / QT_INPUT_BYTES;
    if (!(out = fopen(argv[2], "wb"))) {
        fprintf(stderr, "%s: cannot write\n", argv[2]);
        return 1;
    }
#ifdef QT_DUMP_LAYERS
    if (argc < 4 || !(dump = fopen(argv[3], "wb"))) {
        fprintf(stderr, "a QT_DUMP_LAYERS build needs a writable DUMP path\n");
        return 2;
    }
#endif
    for (image = 0; image < count; image++) {
        double start = qt_seconds();
        run_network(images + image * QT_INPUT_BYTES, end_points);
        seconds += qt_seconds() - start;
        if (fwrite(outputs, 1, QT_OUTPUT_BYTES, out) != QT_OUTPUT_BYTES) {
            fprintf(stderr, "%s: write failed\n", argv[2]);
            return 1;
        }
#ifdef QT_DUMP_LAYERS
        if (fwrite(qt_dump_layers, 1, QT_DUMP_BYTES, dump) != QT_DUMP_BYTES) {
            fprintf(stderr, "%s: write failed\n", argv[3]);
            return 1;
        }
#endif
    }
    if (fclose(out) != 0 || (dump && fclose(dump) != 0)) {
        fprintf(stderr, "%s: write failed\n", argv[2]);
        return 1;
    }
    free(images);
    printf("images %ld seconds %.9f int8_simd %d\n", count, seconds, QT_INT8_SIMD);
    return 0;
}

#endif /* QT_MAIN_H */
