/* tenant_name.c - the rule for tenant names (see tenant_name.h). */
#include "core/tenant_name.h"

#include <string.h>

#include "kairos/proto.h"

bool tenant_name_valid(const char *name)
{
    size_t n = strnlen(name, KAIROS_NAME_MAX);
    if (n == 0 || n >= KAIROS_NAME_MAX || name[0] == '.' || name[0] == '-')
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-';
        if (!ok)
            return false;
    }
    return true;
}
