//go:build race

package tiering

// raceBuild: the race detector drops a share of sync.Pool puts on purpose,
// so allocation figures that rely on pools are not checked under it.
const raceBuild = true
