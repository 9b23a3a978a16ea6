//go:build !linux

package prefault

func heap(int) bool { return false }
