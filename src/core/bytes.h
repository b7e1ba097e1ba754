/* bytes.h - reading little-endian integers at an offset of a byte buffer.
 *
 * The driver's argument layouts are read by offset from bytes the caller owns;
 * memcpy keeps the reads legal at any alignment. Callers check the length.
 */
#ifndef KAIROS_CORE_BYTES_H
#define KAIROS_CORE_BYTES_H

#include <stdint.h>
#include <string.h>

static inline uint32_t bytes_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint64_t bytes_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

#endif /* KAIROS_CORE_BYTES_H */
