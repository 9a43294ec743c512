/* fuzz_config: the mongod.conf YAML loader and the command line. Input: a
 * flags byte, then text. An even flags byte writes the text as a config
 * file and loads it (options_load_file); an odd one splits it at NUL bytes
 * into arguments for options_parse. Either way the options parse or are
 * refused with a message; nothing crashes or leaks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf/options.h"

#define FUZZ_MAX_ARGS 32

static char fuzz_path[256];

/* Removes the temporary file when libFuzzer exits. */
static void fuzz_cleanup(void)
{
    unlink(fuzz_path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    snprintf(fuzz_path, sizeof fuzz_path, "/tmp/atomdb-fuzz-config-XXXXXX");
    int fd = mkstemp(fuzz_path);
    if (fd < 0)
        abort();
    close(fd);
    atexit(fuzz_cleanup);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t flags = data[0];
    data++;
    size--;
    options_t o;
    dberr_t err = {0};
    options_init(&o);
    if (!(flags & 1)) {
        FILE *f = fopen(fuzz_path, "wb");
        if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0)
            abort();
        options_load_file(&o, fuzz_path, &err);
    } else {
        char *text = malloc(size + 1);
        memcpy(text, data, size);
        text[size] = '\0';
        char *argv[FUZZ_MAX_ARGS + 2];
        int argc = 0;
        argv[argc++] = "atomdb";
        for (size_t i = 0; i < size && argc < FUZZ_MAX_ARGS + 1;) {
            argv[argc++] = text + i;
            i += strlen(text + i) + 1;
        }
        argv[argc] = NULL;
        for (int i = 1; i < argc; i++)
            if (strstr(argv[i], "/dev") || strstr(argv[i], "/proc") || strstr(argv[i], "/sys"))
                argc = 0; /* a --config that could block reading a device */
        if (argc)
            options_parse(&o, argc, argv, &err);
        free(text);
    }
    options_destroy(&o);
    return 0;
}
