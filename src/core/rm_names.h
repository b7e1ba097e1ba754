/* rm_names.h - names for escapes, classes, controls, status codes and UVM commands.
 *
 * Generated from the lists in rm_abi.h, the single source of truth, so a number
 * added there gets its name here. Unknown numbers get NULL; callers print hex.
 *
 * Thread rules: read-only tables; safe from any thread.
 */
#ifndef KAIROS_CORE_RM_NAMES_H
#define KAIROS_CORE_RM_NAMES_H

#include <stdbool.h>
#include <stdint.h>

#include "core/rm_abi.h"

struct rm_escape_info {
    uint32_t nr;
    const char *name;
    uint32_t size;       /* exact size, 0 when variable */
    uint32_t size2;      /* second legal size, or element size (RM_ESC_ARRAY) */
    unsigned node_mask;
    unsigned flags;
};

const struct rm_escape_info *rm_escape_info(uint32_t nr);
const char *rm_class_name(uint32_t h_class);
enum rm_class_kind rm_class_kind(uint32_t h_class);
/* Size of the class's allocation parameters as RM copies them, 0 when unknown. */
uint32_t rm_class_params_size(uint32_t h_class);
const char *rm_control_name(uint32_t cmd);
/* Expected params size of a control, 0 when unknown. */
uint32_t rm_control_params_size(uint32_t cmd);
const char *rm_status_name(uint32_t status);
const char *rm_uvm_name(uint32_t cmd);
uint32_t rm_uvm_params_size(uint32_t cmd);
const char *rm_node_name(enum rm_node node);
/* One-letter tag used by the recording format: c, 0..9 (device), u. */
char rm_node_tag(enum rm_node node);

/* Iteration, for tests that check the lists against each other. */
unsigned rm_escape_count(void);
const struct rm_escape_info *rm_escape_at(unsigned i);

#endif /* KAIROS_CORE_RM_NAMES_H */
