/* units.h - parsing and printing of memory sizes and percentages as operators
 * write them.
 *
 * "8G", "8GiB", "512MiB", "512M", "1.5G", "4096" (bytes), "80%" (of a given total).
 * K/M/G/T and KiB/MiB/GiB/TiB are all binary (powers of 1024), as GPU memory is
 * counted; "KB/MB/GB" are refused as ambiguous, with a message saying so.
 *
 * Thread rules: no state.
 */
#ifndef KAIROS_CORE_UNITS_H
#define KAIROS_CORE_UNITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Parses text into bytes. percent_of is the total a "N%" refers to (0: percentages
 * refused). Returns 0, or -EINVAL with a reason in err. */
int units_parse_size(const char *text, uint64_t percent_of, uint64_t *bytes, char *err,
                     size_t err_len);

/* Whether text is a bare number ("8", "4096"): units_parse_size reads it as bytes,
 * which on a command line is more likely a slip than a wish. */
bool units_size_is_bare(const char *text);

/* units_parse_size for sizes a person types on a command line or in an environment
 * variable: a bare number is refused, saying to add a unit (8 alone would be 8 bytes;
 * "8B" still means them). */
int units_parse_size_with_unit(const char *text, uint64_t percent_of, uint64_t *bytes,
                               char *err, size_t err_len);

/* Parses "40%", "12.5%", "0%", "100%" into a fraction in [0, 1] (the % sign is
 * required). Returns 0, or -EINVAL with a reason in err. */
int units_parse_percent(const char *text, double *fraction, char *err, size_t err_len);

/* Formats bytes as "8.00 GiB", "512.0 MiB", "4096 B" into out. */
const char *units_format_size(uint64_t bytes, char *out, size_t cap);

#endif /* KAIROS_CORE_UNITS_H */
