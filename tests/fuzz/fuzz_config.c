/* fuzz_config.c - libFuzzer target: arbitrary bytes as kairosd.yaml through
 * config_parse (libyaml, the duplicate-key and one-document checks, every setting's
 * parser), compiled here with the fuzzer and sanitizer flags. Whatever the input,
 * it must be accepted or refused with a message, and leave nothing allocated. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/config/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct config c;
    char err[768] = "";
    int rc = config_parse("fuzz.yaml", (const char *)data, size, &c, err, sizeof err);
    if (rc == 0)
        config_free(&c);
    else if (!err[0] && rc != -12 /* ENOMEM */) {
        fprintf(stderr, "refused (%d) without a message\n", rc);
        abort();
    }
    return 0;
}
