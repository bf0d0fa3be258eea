//go:build !race

package tiering

const raceBuild = false
