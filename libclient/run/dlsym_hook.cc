// SPDX-License-Identifier: LGPL-2.1-or-later
// dlsym() of libgpuslot-run.so: asks gpuslot_run_dlsym_answer() whether the
// lookup is one the interposer answers (cuda_intercept.cc; its third
// argument is the caller's return address, so that libgpuslot's own
// lookups get libcuda's entry points), and otherwise
// jumps to glibc's dlsym with the caller's arguments and return address
// untouched. glibc finds the caller from that return address: for
// RTLD_NEXT (the object after the caller) and for the caller's namespace.
// A C wrapper that called glibc's dlsym would make every such lookup
// relative to this library instead, and break other interposers.
//
// An unversioned definition answers both dlsym@GLIBC_2.34 (programs built
// on glibc >= 2.34) and the older dlsym@GLIBC_2.2.5 / @GLIBC_2.17 of libdl.

#if defined(__x86_64__)
__asm__(".text\n"
	".globl dlsym\n"
	".type dlsym, @function\n"
	"dlsym:\n"
	"	.cfi_startproc\n"
#if defined(__CET__)
	"	endbr64\n"
#endif
	"	movq (%rsp), %rdx\n" // the caller's return address
	"	pushq %rdi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	pushq %rsi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	subq $8, %rsp\n" // 16-byte alignment at the call
	"	.cfi_adjust_cfa_offset 8\n"
	"	call gpuslot_run_dlsym_answer\n"
	"	addq $8, %rsp\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	popq %rsi\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	popq %rdi\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	testq %rax, %rax\n"
	"	jnz 1f\n"
	"	jmp *gpuslot_run_real_dlsym(%rip)\n"
	"1:	ret\n"
	"	.cfi_endproc\n"
	".size dlsym, .-dlsym\n");
#elif defined(__aarch64__)
__asm__(".text\n"
	".globl dlsym\n"
	".type dlsym, %function\n"
	".p2align 2\n"
	"dlsym:\n"
	"	.cfi_startproc\n"
#if defined(__ARM_FEATURE_BTI_DEFAULT)
	"	bti c\n"
#endif
	"	mov x2, x30\n" // the caller's return address
	"	stp x29, x30, [sp, #-32]!\n"
	"	.cfi_def_cfa_offset 32\n"
	"	.cfi_offset 29, -32\n"
	"	.cfi_offset 30, -24\n"
	"	mov x29, sp\n"
	"	stp x0, x1, [sp, #16]\n"
	"	bl gpuslot_run_dlsym_answer\n"
	"	cbnz x0, 1f\n"
	"	ldp x0, x1, [sp, #16]\n"
	"	ldp x29, x30, [sp], #32\n"
	"	.cfi_remember_state\n"
	"	.cfi_def_cfa_offset 0\n"
	"	.cfi_restore 29\n"
	"	.cfi_restore 30\n"
	"	adrp x16, gpuslot_run_real_dlsym\n"
	"	ldr x16, [x16, #:lo12:gpuslot_run_real_dlsym]\n"
	"	br x16\n"
	"1:\n"
	"	.cfi_restore_state\n"
	"	ldp x29, x30, [sp], #32\n"
	"	.cfi_def_cfa_offset 0\n"
	"	.cfi_restore 29\n"
	"	.cfi_restore 30\n"
	"	ret\n"
	"	.cfi_endproc\n"
	".size dlsym, .-dlsym\n");
#else
#error "libgpuslot-run.so's dlsym hook is written for x86-64 and AArch64"
#endif
