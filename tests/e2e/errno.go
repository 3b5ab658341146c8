package e2e

import "syscall"

// A reset also means the server closed: it may close with unread input.
var syscallECONNRESET = syscall.ECONNRESET
