//go:build !amd64

package jsonenc

const haveSIMD = false

func plainSSE2(p *byte, n int) bool { panic("jsonenc: plainSSE2 without SIMD") }
