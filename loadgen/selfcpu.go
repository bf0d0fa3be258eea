package loadgen

import (
	"runtime"
	"syscall"
	"time"
)

// selfCPU is this process's CPU time so far, user and system (zero where
// getrusage fails).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadgenResources is the load generator's mean CPU over the measured
// phase [0, measured] from the samples that carry it, its CPU-seconds in
// that phase and per GB produced; nil when no sample carries it.
func loadgenResources(series []Sample, measured float64, produced int64) *LoadgenResources {
	var sum float64
	var n int
	for _, s := range series {
		secs := s.Seconds
		if secs == 0 {
			secs = 1
		}
		if s.LoadgenCPUCores > 0 && s.T-secs >= -0.05 && s.T <= measured+0.05 {
			sum += s.LoadgenCPUCores
			n++
		}
	}
	if n == 0 || !(measured > 0) {
		return nil
	}
	l := &LoadgenResources{CPUCoresMean: sum / float64(n), MachineCores: runtime.NumCPU()}
	l.CPUSeconds = l.CPUCoresMean * measured
	if produced > 0 {
		l.CPUSecondsPerGBProduced = l.CPUSeconds / (float64(produced) / 1e9)
	}
	return l
}
