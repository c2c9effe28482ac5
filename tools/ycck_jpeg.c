/* Writes a YCCK JPEG (Adobe transform 2), which Pillow cannot write, for
 * tools/gen_image_fixtures.py: raw CMYK bytes (Adobe-inverted, as Pillow's
 * CMYK JPEGs store them) on stdin, the JPEG on stdout.
 *   cc tools/ycck_jpeg.c -ljpeg -o ycck_jpeg && ./ycck_jpeg W H QUALITY < cmyk > out.jpg */
#include <stdio.h>
#include <stdlib.h>

#include <jpeglib.h>

int main(int argc, char **argv)
{
    if (argc != 4) return 2;
    int w = atoi(argv[1]), h = atoi(argv[2]);
    unsigned char *px = malloc((size_t)w * h * 4);
    if (!px || fread(px, 4, (size_t)w * h, stdin) != (size_t)w * h) return 1;
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr e;
    c.err = jpeg_std_error(&e);
    jpeg_create_compress(&c);
    jpeg_stdio_dest(&c, stdout);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = 4;
    c.in_color_space = JCS_CMYK;
    jpeg_set_defaults(&c);
    jpeg_set_colorspace(&c, JCS_YCCK);
    jpeg_set_quality(&c, atoi(argv[3]), TRUE);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = px + (size_t)c.next_scanline * w * 4;
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    free(px);
    return 0;
}
