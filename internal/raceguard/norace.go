//go:build !race

package raceguard

const raceEnabled = false
