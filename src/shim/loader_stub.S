/* loader_stub.S - libkairos.so's dlopen and dlmopen: save the arguments, let the hook
 * (loader.c) adjust them and name the real function, restore them, jump to it.
 *
 * Owns nothing but the entry points. The jump, not a call, is the point: glibc's dlopen
 * takes its return address as the caller's, to pick the caller's RUNPATH, $ORIGIN and
 * namespace; after the jump that is still the application's (loader.h). One port per
 * architecture; meson builds this file only for x86_64 and aarch64 (elsewhere the shim
 * leaves dlopen alone, docs/security.md).
 */
#if defined(__x86_64__)

#ifdef __CET__
#include <cet.h>        /* _CET_ENDBR, and the IBT/SHSTK property note */
#else
#define _CET_ENDBR
#endif

/* Entry: rsp = 8 mod 16. Three argument registers saved in 24 bytes keep the call to
 * the hook 16-byte aligned; r11 (scratch, no argument) carries the target. */
.macro LOADER_STUB name, hook
    .text
    .globl \name
    .type \name, @function
    .p2align 4
\name:
    .cfi_startproc
    _CET_ENDBR
    subq $24, %rsp
    .cfi_adjust_cfa_offset 24
    movq %rdi, (%rsp)
    movq %rsi, 8(%rsp)
    movq %rdx, 16(%rsp)
    movq %rsp, %rdi
    call \hook
    movq %rax, %r11
    movq (%rsp), %rdi
    movq 8(%rsp), %rsi
    movq 16(%rsp), %rdx
    addq $24, %rsp
    .cfi_adjust_cfa_offset -24
    jmp *%r11
    .cfi_endproc
    .size \name, .-\name
.endm

#elif defined(__aarch64__)

/* x29/x30 and x0-x2 in a 48-byte frame; x30 is restored before the jump, so the real
 * function returns straight to the application. x16 (IP0) carries the target: a BTI
 * "c" landing pad accepts a BR through it. */
.macro LOADER_STUB name, hook
    .text
    .globl \name
    .type \name, %function
    .p2align 2
\name:
    .cfi_startproc
    hint #34                    /* bti c */
    stp x29, x30, [sp, #-48]!
    .cfi_def_cfa_offset 48
    .cfi_offset x29, -48
    .cfi_offset x30, -40
    mov x29, sp
    stp x0, x1, [sp, #16]
    str x2, [sp, #32]
    add x0, sp, #16
    bl \hook
    mov x16, x0
    ldp x0, x1, [sp, #16]
    ldr x2, [sp, #32]
    ldp x29, x30, [sp], #48
    .cfi_restore x30
    .cfi_restore x29
    .cfi_def_cfa_offset 0
    br x16
    .cfi_endproc
    .size \name, .-\name
.endm

#if defined(__ARM_FEATURE_BTI_DEFAULT) || defined(__ARM_FEATURE_PAC_DEFAULT)
/* GNU_PROPERTY_AARCH64_FEATURE_1_AND: this file keeps BTI (the landing pads above) and
 * PAC (no return address is signed or stored across the jump), so the library keeps
 * the marking its C objects give it. */
    .pushsection .note.gnu.property, "a"
    .p2align 3
    .word 4
    .word 16
    .word 5                     /* NT_GNU_PROPERTY_TYPE_0 */
    .asciz "GNU"
    .word 0xc0000000
    .word 4
    .word 3                     /* BTI | PAC */
    .word 0
    .popsection
#endif

#else
#error "loader_stub.S has no port to this architecture: meson must not build it here"
#endif

LOADER_STUB dlopen, shim_loader_dlopen
LOADER_STUB dlmopen, shim_loader_dlmopen

    .section .note.GNU-stack, "", %progbits
