/* driver_version.h - which NVIDIA driver releases Kairos reads correctly. The
 * argument layouts in rm_abi.h were checked against one driver branch; on another,
 * a layout may differ and a size read from it would be wrong, so the shim and
 * kairosd learn the running driver's version and compare it with this list
 * (docs/drivers.md says what each does on a driver not in it).
 *
 * Shared by the shim (libc only) and kairosd. Thread rules: no state.
 */
#ifndef KAIROS_CORE_DRIVER_VERSION_H
#define KAIROS_CORE_DRIVER_VERSION_H

#include <stdbool.h>
#include <stddef.h>

/* The driver branches (major versions) whose layouts rm_abi.h matches, for
 * messages, and the release the GPU suite last ran on. */
#define DRIVER_BRANCHES_SUPPORTED "580"
#define DRIVER_VERSION_TESTED "580.159.04"

#define DRIVER_VERSION_TEXT_MAX 32

struct driver_version {
    unsigned major, minor, patch;        /* patch 0 when the version has two parts */
    char text[DRIVER_VERSION_TEXT_MAX];  /* as the driver wrote it: "580.159.04" */
};

/* Finds the version in text (len bytes, not necessarily terminated): a bare
 * "580.159.04", the buffer of the driver's version handshake, or the line of
 * /proc/driver/nvidia/version ("NVRM version: NVIDIA UNIX x86_64 Kernel Module
 * 580.159.04 ..."): the first word made of two or three dot-separated numbers.
 * 0, or -1 when there is none (v is then zeroed). */
int driver_version_parse(const char *text, size_t len, struct driver_version *v);

/* Whether v's branch is one rm_abi.h was checked against. */
bool driver_version_supported(const struct driver_version *v);

#endif /* KAIROS_CORE_DRIVER_VERSION_H */
