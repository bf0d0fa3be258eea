//go:build !race

package broker

const raceBuild = false
