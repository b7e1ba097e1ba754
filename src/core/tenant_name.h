/* tenant_name.h - what a tenant's name may be, the same rule everywhere (daemon,
 * protocol checks, configuration, the shim's settings).
 */
#ifndef KAIROS_CORE_TENANT_NAME_H
#define KAIROS_CORE_TENANT_NAME_H

#include <stdbool.h>

/* 1..63 characters of [A-Za-z0-9._-], not starting with '.' or '-'. */
bool tenant_name_valid(const char *name);

#endif /* KAIROS_CORE_TENANT_NAME_H */
