package miniotest

import "syscall"

// procAttr makes the kernel kill the server if the test binary dies (a
// timeout's panic, a kill -9), so no MinIO outlives its test.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
