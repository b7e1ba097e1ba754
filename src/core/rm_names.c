/* rm_names.c - name and size lookups built from the X-macro lists in rm_abi.h. */
#include "core/rm_names.h"

#include <stddef.h>

static const struct rm_escape_info escapes[] = {
#define ESCAPE_ROW(nr, name, size, size2, nodes, flags) {nr, #name, size, size2, nodes, flags},
    RM_ESCAPE_LIST(ESCAPE_ROW)
#undef ESCAPE_ROW
};

struct class_row {
    uint32_t id;
    const char *name;
    enum rm_class_kind kind;
    uint32_t params_size;
};
static const struct class_row classes[] = {
#define CLASS_ROW(id, name, kind, params) {id, #name, kind, params},
    RM_CLASS_LIST(CLASS_ROW)
#undef CLASS_ROW
};

struct sized_row {
    uint32_t id;
    const char *name;
    uint32_t size;
};
static const struct sized_row controls[] = {
#define CONTROL_ROW(cmd, name, size) {cmd, #name, size},
    RM_CONTROL_LIST(CONTROL_ROW)
#undef CONTROL_ROW
};
static const struct sized_row uvm_cmds[] = {
#define UVM_ROW(cmd, name, size) {cmd, #name, size},
    RM_UVM_LIST(UVM_ROW)
#undef UVM_ROW
};

struct status_row {
    uint32_t code;
    const char *name;
};
static const struct status_row statuses[] = {
#define STATUS_ROW(code, name) {code, #name},
    RM_STATUS_LIST(STATUS_ROW)
#undef STATUS_ROW
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

const struct rm_escape_info *rm_escape_info(uint32_t nr)
{
    for (size_t i = 0; i < COUNT(escapes); i++)
        if (escapes[i].nr == nr)
            return &escapes[i];
    return NULL;
}

unsigned rm_escape_count(void)
{
    return (unsigned)COUNT(escapes);
}

const struct rm_escape_info *rm_escape_at(unsigned i)
{
    return i < COUNT(escapes) ? &escapes[i] : NULL;
}

static const struct class_row *find_class(uint32_t id)
{
    for (size_t i = 0; i < COUNT(classes); i++)
        if (classes[i].id == id)
            return &classes[i];
    return NULL;
}

const char *rm_class_name(uint32_t h_class)
{
    const struct class_row *row = find_class(h_class);
    return row ? row->name : NULL;
}

enum rm_class_kind rm_class_kind(uint32_t h_class)
{
    const struct class_row *row = find_class(h_class);
    return row ? row->kind : RM_KIND_OTHER;
}

static const struct sized_row *find_sized(const struct sized_row *rows, size_t n, uint32_t id)
{
    for (size_t i = 0; i < n; i++)
        if (rows[i].id == id)
            return &rows[i];
    return NULL;
}

uint32_t rm_class_params_size(uint32_t h_class)
{
    const struct class_row *row = find_class(h_class);
    return row ? row->params_size : 0;
}

const char *rm_control_name(uint32_t cmd)
{
    const struct sized_row *row = find_sized(controls, COUNT(controls), cmd);
    return row ? row->name : NULL;
}

uint32_t rm_control_params_size(uint32_t cmd)
{
    const struct sized_row *row = find_sized(controls, COUNT(controls), cmd);
    return row ? row->size : 0;
}

const char *rm_uvm_name(uint32_t cmd)
{
    const struct sized_row *row = find_sized(uvm_cmds, COUNT(uvm_cmds), cmd);
    return row ? row->name : NULL;
}

uint32_t rm_uvm_params_size(uint32_t cmd)
{
    const struct sized_row *row = find_sized(uvm_cmds, COUNT(uvm_cmds), cmd);
    return row ? row->size : 0;
}

const char *rm_status_name(uint32_t status)
{
    for (size_t i = 0; i < COUNT(statuses); i++)
        if (statuses[i].code == status)
            return statuses[i].name;
    return NULL;
}

const char *rm_node_name(enum rm_node node)
{
    switch (node) {
    case RM_NODE_CTL:
        return "nvidiactl";
    case RM_NODE_DEV:
        return "nvidiaN";
    case RM_NODE_UVM:
        return "nvidia-uvm";
    case RM_NODE_NONE:
        break;
    }
    return "other";
}

char rm_node_tag(enum rm_node node)
{
    switch (node) {
    case RM_NODE_CTL:
        return 'c';
    case RM_NODE_DEV:
        return '0';
    case RM_NODE_UVM:
        return 'u';
    case RM_NODE_NONE:
        break;
    }
    return '?';
}
