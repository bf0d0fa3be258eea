package dashboards

import (
	"os/exec"
	"syscall"
)

// dieWithTest makes cmd's process get SIGKILL when the test binary dies,
// so a timed-out or killed test leaves no Prometheus running.
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
