#include "textflag.h"

// The bytes plainSSE2 refuses, each in all 16 lanes, and 0x1f (the
// largest byte below the plain range, compared as signed bytes: 0x80 and
// above are negative, so "greater than 0x1f" is exactly 0x20-0x7f).
DATA plainConsts<>+0x00(SB)/8, $0x2222222222222222 // '"'
DATA plainConsts<>+0x08(SB)/8, $0x2222222222222222
DATA plainConsts<>+0x10(SB)/8, $0x5c5c5c5c5c5c5c5c // '\\'
DATA plainConsts<>+0x18(SB)/8, $0x5c5c5c5c5c5c5c5c
DATA plainConsts<>+0x20(SB)/8, $0x3c3c3c3c3c3c3c3c // '<'
DATA plainConsts<>+0x28(SB)/8, $0x3c3c3c3c3c3c3c3c
DATA plainConsts<>+0x30(SB)/8, $0x3e3e3e3e3e3e3e3e // '>'
DATA plainConsts<>+0x38(SB)/8, $0x3e3e3e3e3e3e3e3e
DATA plainConsts<>+0x40(SB)/8, $0x2626262626262626 // '&'
DATA plainConsts<>+0x48(SB)/8, $0x2626262626262626
DATA plainConsts<>+0x50(SB)/8, $0x1f1f1f1f1f1f1f1f
DATA plainConsts<>+0x58(SB)/8, $0x1f1f1f1f1f1f1f1f
GLOBL plainConsts<>(SB), RODATA|NOPTR, $0x60

// PLAIN16 sets AX to 0xffff when all 16 bytes in X0 are plain: in
// 0x20-0x7f and none of " \ < > &. It uses X1-X3.
#define PLAIN16 \
	MOVOU	X0, X1 \
	PCMPEQB	X8, X1 \
	MOVOU	X0, X2 \
	PCMPEQB	X9, X2 \
	POR	X2, X1 \
	MOVOU	X0, X2 \
	PCMPEQB	X10, X2 \
	POR	X2, X1 \
	MOVOU	X0, X2 \
	PCMPEQB	X11, X2 \
	POR	X2, X1 \
	MOVOU	X0, X2 \
	PCMPEQB	X12, X2 \
	POR	X2, X1 \
	MOVOU	X0, X3 \
	PCMPGTB	X13, X3 \
	PANDN	X3, X1 \
	PMOVMSKB X1, AX

// func plainSSE2(p *byte, n int) bool
// n >= 8. SSE2 is part of every amd64 CPU (GOAMD64=v1 included).
TEXT ·plainSSE2(SB), NOSPLIT, $0-17
	MOVQ	p+0(FP), SI
	MOVQ	n+8(FP), CX
	MOVOU	plainConsts<>+0x00(SB), X8
	MOVOU	plainConsts<>+0x10(SB), X9
	MOVOU	plainConsts<>+0x20(SB), X10
	MOVOU	plainConsts<>+0x30(SB), X11
	MOVOU	plainConsts<>+0x40(SB), X12
	MOVOU	plainConsts<>+0x50(SB), X13
	CMPQ	CX, $16
	JA	long
	// 8 to 16 bytes: the first eight and the last eight (overlapping
	// when n < 16) in one register; no byte outside p[:n] is read.
	MOVQ	(SI), X0
	MOVQ	-8(SI)(CX*1), X4
	PUNPCKLQDQ X4, X0
	PLAIN16
	CMPL	AX, $0xffff
	SETEQ	ret+16(FP)
	RET
long:
	// Whole 16-byte blocks, then the last 16 bytes (overlapping).
	LEAQ	-16(SI)(CX*1), DI // the last block
loop:
	MOVOU	(SI), X0
	PLAIN16
	CMPL	AX, $0xffff
	JNE	no
	ADDQ	$16, SI
	CMPQ	SI, DI
	JB	loop
	MOVOU	(DI), X0
	PLAIN16
	CMPL	AX, $0xffff
	SETEQ	ret+16(FP)
	RET
no:
	MOVB	$0, ret+16(FP)
	RET
