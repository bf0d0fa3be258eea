//go:build !linux

package miniotest

import "syscall"

// procAttr: only Linux can tie the server's life to the test binary's.
func procAttr() *syscall.SysProcAttr { return nil }
